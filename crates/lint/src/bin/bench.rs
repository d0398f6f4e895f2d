//! Prints how long linting a large generated module takes.
//!
//! Usage: `tfcapi-lint-bench [variables] [resources] [iterations]`
//! (defaults 500, 500, 20). Build with `--release` for meaningful figures.

use captf_lint::checks;
use captf_lint::config::load::{self, DiskFs};
use captf_lint::contract::{self, Role};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

fn generate(variables: usize, resources: usize) -> String {
    let mut s = String::from("terraform {\n  required_version = \">= 1.6\"\n}\n\n");
    for i in contract::inputs(Role::Machine) {
        let _ = write!(s, "variable \"{}\" {{\n  type = {}\n", i.name, i.type_expr);
        if i.nullable || i.name == contract::CLUSTER_OUTPUTS_INPUT {
            s.push_str("  default = null\n");
        }
        if i.sensitive {
            s.push_str("  sensitive = true\n");
        }
        s.push_str("}\n\n");
    }
    for v in 0..variables {
        let _ = write!(
            s,
            "variable \"setting_{v}\" {{\n  type = object({{\n    name = string\n    size = optional(number, {v})\n  }})\n  default = {{ name = \"s{v}\" }}\n}}\n\n"
        );
    }
    for r in 0..resources {
        let v = r % variables.max(1);
        let _ = write!(
            s,
            "resource \"terraform_data\" \"r{r}\" {{\n  input = {{\n    name = \"${{var.machine_name}}-{r}\"\n    size = var.setting_{v}.size\n    tags = merge(var.captf_tags, {{ index = \"{r}\" }})\n    list = [for i in range({}) : i * 2 if i % 3 != 0]\n  }}\n\n  lifecycle {{\n    ignore_changes = [input]\n  }}\n}}\n\n",
            r % 7
        );
    }
    for name in contract::required_outputs(Role::Machine) {
        let value = match *name {
            "health" => "{ state = \"running\", healthy = true }",
            "addresses" => "[]",
            "interruptible" => "false",
            _ => "null",
        };
        let _ = write!(s, "output \"{name}\" {{\n  value = {value}\n}}\n\n");
    }
    s
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("arguments are counts"))
        .collect();
    let variables = args.first().copied().unwrap_or(500);
    let resources = args.get(1).copied().unwrap_or(500);
    let iterations = args.get(2).copied().unwrap_or(20).max(1);

    let dir = std::env::temp_dir().join(format!("tfcapi-lint-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the module directory");
    let src = generate(variables, resources);
    std::fs::write(dir.join("main.tf"), &src).expect("write the module");

    let mut load_time = Duration::ZERO;
    let mut check_time = Duration::ZERO;
    let mut findings = 0;
    for _ in 0..iterations {
        let t = Instant::now();
        let tree = load::load(&DiskFs, &dir).expect("the generated module loads");
        load_time += t.elapsed();
        let t = Instant::now();
        findings = checks::module::check(&tree, Role::Machine).len();
        check_time += t.elapsed();
    }
    let _ = std::fs::remove_dir_all(&dir);

    let per = |d: Duration| d.as_secs_f64() * 1000.0 / iterations as f64;
    println!(
        "module: {variables} user variables, {resources} resources, {} bytes, {} lines",
        src.len(),
        src.lines().count()
    );
    println!("iterations: {iterations}, findings per run: {findings}");
    println!("load+parse: {:.2} ms/run", per(load_time));
    println!("checks:     {:.2} ms/run", per(check_time));
    println!("total:      {:.2} ms/run", per(load_time + check_time));
}
