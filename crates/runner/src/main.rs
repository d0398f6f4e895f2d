//! `runner`: see the crate documentation of `captf_runner`.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    std::process::exit(captf_runner::app::main(args));
}
