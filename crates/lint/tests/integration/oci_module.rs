//! The OCI machine-pool module against the real `oracle/oci` provider (the
//! build `hack/test-assets.sh` installs into a filesystem mirror; see
//! `oci_support`): `tofu validate`, which a misspelt argument must fail;
//! the whole module's `tofu test` suite (`modules/oci/machinepool/tests`,
//! a mocked provider over the real schema) with the actions of its plans;
//! what only the configuration says (replace triggers, create-before-destroy,
//! ignored changes) read through the linter's own parser; and plans made by
//! the real provider itself: what it replaces, and where a refusal stops it.

use crate::oci_support;

use captf_lint::config::ir::Block;
use oci_support::{Workspace, module_source};
use serde_json::{Value, json};
use std::collections::BTreeMap;

const CONFIGURATION: &str = "oci_core_instance_configuration.pool_instance_configuration";
const FIXED: &str = "oci_core_instance_pool.fixed_instance_pool[0]";
const AUTOSCALED: &str = "oci_core_instance_pool.autoscaled_instance_pool[0]";
const AUTOSCALING: &str =
    "oci_autoscaling_auto_scaling_configuration.pool_autoscaling_configuration[0]";
const ROLL: &str = "terraform_data.kubernetes_version_roll";

#[test]
fn the_module_validates_against_the_real_provider() {
    let ws = Workspace::new();
    ws.init();
    let (ok, out) = ws.validate();
    assert!(ok, "tofu validate: {out}");
    assert!(out.contains("The configuration is valid"), "{out}");
}

#[test]
fn a_misspelt_argument_fails_validation() {
    // Two arguments of the instance configuration, one and three blocks
    // deep: only the provider's schema knows either name.
    let tmp = tempfile::tempdir().unwrap();
    let broken = tmp.path().join("machinepool");
    oci_support::copy_module(&module_source(), &broken);
    let main = broken.join("main.tf");
    let text = std::fs::read_to_string(&main).unwrap();
    let mut edited = text.clone();
    for (right, wrong) in [
        ("instance_type = ", "instanse_type = "),
        ("assign_public_ip = ", "assign_public_ips = "),
    ] {
        assert_eq!(edited.matches(right).count(), 1, "{right} in main.tf");
        edited = edited.replace(right, wrong);
    }
    std::fs::write(&main, edited).unwrap();

    let ws = Workspace::of(&broken);
    ws.init();
    let (ok, out) = ws.validate();
    assert!(!ok, "tofu validate accepted misspelt arguments:\n{out}");
    for name in ["instanse_type", "assign_public_ips"] {
        assert!(
            out.contains(&format!(
                "An argument named \"{name}\" is not expected here"
            )),
            "{name} not reported:\n{out}"
        );
    }
}

fn change<'a>(plan: &'a Value, address: &str) -> &'a Value {
    let changes = plan["resource_changes"].as_array().unwrap();
    changes
        .iter()
        .find(|c| c["address"] == address)
        .unwrap_or_else(|| {
            let all: Vec<&Value> = changes.iter().map(|c| &c["address"]).collect();
            panic!("{address} is not in the plan: {all:?}")
        })
}

fn actions(plan: &Value, address: &str) -> Vec<String> {
    change(plan, address)["change"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

fn reason(plan: &Value, address: &str) -> Option<String> {
    change(plan, address)["action_reason"]
        .as_str()
        .map(str::to_owned)
}

#[test]
fn the_whole_module_passes_its_tofu_test_suite() {
    let ws = Workspace::new();
    ws.init();
    // The suite as written today, so that emptying a file shows.
    let log = oci_support::run_whole_suite(&ws, 37);
    // The zones rule: applied over the cluster's zones A and B, the pool
    // keeps them once the cluster's are B and C.
    assert!(
        log.runs
            .iter()
            .any(|(f, r, status)| f == "tests/zones.tftest.hcl"
                && r == "the_pool_keeps_a_and_b_when_the_clusters_zones_become_b_and_c"
                && status == "pass"),
        "{:?}",
        log.runs
    );

    check_lifecycle_plans(&log.plans);
    // No plan of the suite destroys a resource before its replacement exists.
    for ((file, run), plan) in &log.plans {
        for c in plan["resource_changes"].as_array().unwrap() {
            assert_ne!(
                c["change"]["actions"],
                json!(["delete", "create"]),
                "{file}/{run}: {} is destroyed before it is replaced",
                c["address"]
            );
        }
    }
}

/// The actions of `tests/lifecycle.tftest.hcl`'s plans, change by change.
fn check_lifecycle_plans(plans: &BTreeMap<(String, String), Value>) {
    let plan = |run: &str| {
        plans
            .get(&("tests/lifecycle.tftest.hcl".to_owned(), run.to_owned()))
            .unwrap_or_else(|| panic!("no plan for run {run}"))
    };

    let p = plan("replicas_resize_the_fixed_pool");
    assert_eq!(actions(p, FIXED), ["update"], "resized in place");
    assert_eq!(actions(p, CONFIGURATION), ["no-op"]);

    let p = plan("a_version_roll_replaces_the_pool");
    assert_eq!(actions(p, ROLL), ["create", "delete"]);
    assert_eq!(actions(p, FIXED), ["create", "delete"], "new pool first");
    assert_eq!(reason(p, FIXED).as_deref(), Some("replace_by_triggers"));
    assert_eq!(actions(p, CONFIGURATION), ["no-op"]);

    let p = plan("a_bootstrap_rotation_changes_the_instance_configuration");
    // The mock cannot say that OCI replaces the configuration (the real
    // provider's plan below does); the pool must stay either way.
    assert_eq!(actions(p, CONFIGURATION), ["update"]);
    assert_eq!(actions(p, FIXED), ["no-op"]);
    assert_eq!(actions(p, ROLL), ["no-op"]);

    let p = plan("new_failure_domains_move_the_placement");
    assert_eq!(actions(p, FIXED), ["update"], "placement moves in place");

    let p = plan("a_mode_switch_is_refused_while_autoscaled_disagrees");
    assert_eq!(p["errored"], true, "the refused plan must fail");
    let planned: Vec<&Value> = p["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["change"]["actions"] != json!(["no-op"]))
        .collect();
    assert!(
        planned.is_empty(),
        "a refused plan changes nothing: {planned:?}"
    );

    let p = plan("a_mode_switch_with_autoscaled_replaces_the_pool");
    assert_eq!(actions(p, FIXED), ["delete"]);
    assert_eq!(actions(p, AUTOSCALED), ["create"]);
    assert_eq!(actions(p, AUTOSCALING), ["create"]);

    let p = plan("replicas_leave_the_autoscaled_pool_alone");
    assert_eq!(
        actions(p, AUTOSCALED),
        ["no-op"],
        "the autoscaler owns size"
    );
    assert_eq!(actions(p, AUTOSCALING), ["no-op"], "initial is ignored");

    let p = plan("new_bounds_change_the_autoscaling_configuration");
    assert_ne!(actions(p, AUTOSCALING), ["no-op"]);
    assert_eq!(actions(p, AUTOSCALED), ["no-op"], "the pool stays");
}

/// The `resource` block `<type>.<name>` of the module's root.
fn resource<'a>(blocks: &'a [Block], address: &str) -> &'a Block {
    let (ty, name) = address.split_once('.').unwrap();
    blocks
        .iter()
        .find(|b| b.kind == "resource" && b.labels == [ty, name])
        .unwrap_or_else(|| panic!("no resource {address}"))
}

fn lifecycle_attr(block: &Block, name: &str) -> Option<String> {
    block
        .body
        .blocks_of("lifecycle")
        .find_map(|l| l.body.attr(name))
        .map(|a| a.expr.source().split_whitespace().collect::<String>())
}

#[test]
fn the_configuration_declares_the_documented_lifecycle() {
    let tree = captf_lint::config::load::load(&captf_lint::config::load::DiskFs, &module_source())
        .expect("the linter loads the module");
    let root = tree.modules[0].model();
    let cbd = |address: &str| lifecycle_attr(resource(root, address), "create_before_destroy");
    let trigger = |address: &str| lifecycle_attr(resource(root, address), "replace_triggered_by");
    let ignored = |address: &str| lifecycle_attr(resource(root, address), "ignore_changes");

    let configuration = "oci_core_instance_configuration.pool_instance_configuration";
    let fixed = "oci_core_instance_pool.fixed_instance_pool";
    let autoscaled = "oci_core_instance_pool.autoscaled_instance_pool";
    let autoscaling = "oci_autoscaling_auto_scaling_configuration.pool_autoscaling_configuration";

    // A new instance configuration, and a rolled pool, exist before the old go.
    for address in [configuration, fixed, autoscaled] {
        assert_eq!(cbd(address).as_deref(), Some("true"), "{address}");
    }
    // A pool holds one autoscaling configuration at a time.
    assert_eq!(cbd(autoscaling), None);
    // Both pools are replaced by the version roll, and by nothing else.
    for address in [fixed, autoscaled] {
        assert_eq!(
            trigger(address).as_deref(),
            Some("[terraform_data.kubernetes_version_roll]"),
            "{address}"
        );
    }
    assert_eq!(trigger(configuration), None);
    assert_eq!(trigger(autoscaling), None);
    let roll = resource(root, ROLL);
    assert_eq!(
        roll.body.attr("triggers_replace").map(|a| a.expr.source()),
        Some("var.kubernetes_version".to_owned()),
        "the version is compared verbatim"
    );
    // The autoscaler owns the autoscaled pool's size and the policy's
    // starting capacity; the fixed pool follows replicas.
    assert_eq!(ignored(autoscaled).as_deref(), Some("[size]"));
    assert_eq!(
        ignored(autoscaling).as_deref(),
        Some("[policies[0].capacity[0].initial]")
    );
    assert_eq!(ignored(fixed), None);
    assert_eq!(ignored(configuration), None);

    // The refusals stop the plan at the instance configuration.
    let preconditions: Vec<String> = resource(root, configuration)
        .body
        .blocks_of("lifecycle")
        .flat_map(|l| l.body.blocks_of("precondition"))
        .filter_map(|p| p.body.attr("condition").map(|a| a.expr.source()))
        .collect();
    assert_eq!(
        preconditions,
        ["length(module.logic.violations) == 0"],
        "the instance configuration carries the module's precondition"
    );
}

/// The module's inputs for the real provider's plans.
fn real_inputs() -> Value {
    json!({
        "captf_contract": "v1alpha1",
        "captf_cluster": { "name": "prod", "namespace": "team-a" },
        "captf_object": { "kind": "TerraformMachinePool", "name": "workers", "namespace": "team-a" },
        "captf_tags": { "captf.io/cluster": "prod" },
        "captf_cluster_outputs": {
            "schema": "captf.io/oci-cluster/v1",
            "region": "us-ashburn-1",
            "compartment_id": "ocid1.compartment.oc1..c",
            "worker_subnet_id": "ocid1.subnet.oc1..workers",
            "worker_nsg_id": "ocid1.nsg.oc1..workers",
            "failure_domains": {
                "ad1": { "availability_domain": "Uocm:IAD-AD-1" },
                "ad2-fd1": { "availability_domain": "Uocm:IAD-AD-2", "fault_domain": "FAULT-DOMAIN-1" }
            },
            "node_defined_tags": {}
        },
        "machinepool_name": "workers",
        "replicas": 3,
        "bootstrap_data": "I2Nsb3VkLWNvbmZpZwo=",
        "bootstrap_format": "cloud-config",
        "failure_domains": ["ad1"],
        "cluster_failure_domains": [],
        "kubernetes_version": "v1.33.1",
        "node_labels": {},
        "autoscaling": { "enabled": false, "min": 0, "max": 0 },
        "image_id": "ocid1.image.oc1.iad.node"
    })
}

/// The attribute paths the real provider says force a replacement.
fn replace_paths(plan: &Value, address: &str) -> Vec<String> {
    change(plan, address)["change"]["replace_paths"]
        .as_array()
        .map(|paths| {
            paths
                .iter()
                .map(|p| {
                    let steps: Vec<String> = p
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|s| s.to_string().trim_matches('"').to_owned())
                        .collect();
                    steps.join(".")
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_real_provider_plans_the_fixed_pool_lifecycle() {
    let ws = Workspace::new();
    ws.init();
    let planner = oci_support::RealPlanner::new(&ws, &real_inputs());
    let create = planner.plan(&json!({}));
    assert_eq!(actions(&create, CONFIGURATION), ["create"]);
    assert_eq!(actions(&create, FIXED), ["create"]);
    planner.record_created(&create);

    // A bootstrap rotation, with a new size and placement: OCI cannot
    // update an instance configuration, so a new one is made first, for the
    // rotation alone; the pool takes it, the size and the placement in place.
    let p = planner.plan(&json!({
        "bootstrap_data": "I2Nsb3VkLWNvbmZpZwpydW5jbWQ6IFtyb3RhdGVkXQo=",
        "replicas": 5,
        "failure_domains": ["ad1", "ad2-fd1"]
    }));
    assert_eq!(
        actions(&p, CONFIGURATION),
        ["create", "delete"],
        "new before old"
    );
    assert_eq!(
        replace_paths(&p, CONFIGURATION),
        ["instance_details.0.launch_details.0.metadata"]
    );
    assert_eq!(actions(&p, FIXED), ["update"], "the pool stays");
    assert_eq!(
        change(&p, FIXED)["change"]["after_unknown"]["instance_configuration_id"],
        true,
        "the pool switches to the new configuration"
    );
    let pool = &change(&p, FIXED)["change"]["after"];
    assert_eq!(pool["size"], 5);
    assert_eq!(
        pool["placement_configurations"].as_array().unwrap().len(),
        2
    );

    // A version roll, build metadata included: a new pool, then the old goes.
    let p = planner.plan(&json!({ "kubernetes_version": "v1.33.1+rke2r1" }));
    assert_eq!(actions(&p, FIXED), ["create", "delete"]);
    assert_eq!(reason(&p, FIXED).as_deref(), Some("replace_by_triggers"));
    assert!(!actions(&p, CONFIGURATION).contains(&"delete".to_owned()));
}

#[test]
fn the_real_provider_plans_the_autoscaled_pool_lifecycle() {
    let ws = Workspace::new();
    ws.init();
    let mut inputs = real_inputs();
    inputs["autoscaling"] = json!({ "enabled": true, "min": 2, "max": 6 });
    inputs["autoscaled"] = json!(true);
    let planner = oci_support::RealPlanner::new(&ws, &inputs);
    let create = planner.plan(&json!({}));
    assert_eq!(actions(&create, AUTOSCALED), ["create"]);
    assert_eq!(actions(&create, AUTOSCALING), ["create"]);
    planner.record_created(&create);

    // New replicas and new bounds at once: the replicas change nothing (the
    // autoscaler owns the size, the initial capacity is ignored); the bounds
    // replace the autoscaling configuration, and only it.
    let p = planner.plan(&json!({
        "replicas": 5,
        "autoscaling": { "enabled": true, "min": 2, "max": 9 },
        "autoscaled": true
    }));
    assert_eq!(actions(&p, AUTOSCALED), ["no-op"]);
    assert_eq!(actions(&p, AUTOSCALING), ["delete", "create"]);
    assert_eq!(
        replace_paths(&p, AUTOSCALING),
        ["policies.0.capacity.0.max"]
    );
}

#[test]
fn the_real_provider_plan_stops_at_the_refusals() {
    let ws = Workspace::new();
    ws.init();
    let planner = oci_support::RealPlanner::new(&ws, &real_inputs());

    // Without exports the provider has no region: the module refuses before
    // the provider is configured, so the user reads why, not a client error.
    let out = planner.refused(&json!({ "captf_cluster_outputs": {} }));
    assert!(
        out.contains("The OCI machine pool refuses these inputs: the cluster's exports are empty"),
        "{out}"
    );
    assert!(!out.contains("can not create client"), "{out}");

    // Every other refusal stops the plan at the instance configuration.
    let out = planner.refused(&json!({ "autoscaled": true }));
    assert!(out.contains("Resource precondition failed"), "{out}");
    assert!(
        out.contains("oci_core_instance_configuration\" \"pool_instance_configuration\""),
        "{out}"
    );
    assert!(
        out.contains("autoscaled is true but the MachinePool's autoscaling is off"),
        "{out}"
    );
}
