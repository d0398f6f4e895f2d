# Bootstrap delivery: the MIME message around a cloud-config payload, the
# node-labels boot script, Ignition pass-through and its refusals, and the
# 32,000-byte metadata limit.

variables {
  namespace       = "team-a"
  cluster_name    = "prod"
  pool_name       = "workers"
  captf_tags      = {}
  additional_tags = {}
  cluster_outputs = {
    schema           = "captf.io/oci-cluster/v1"
    region           = "us-ashburn-1"
    compartment_id   = "ocid1.compartment.oc1..c"
    worker_subnet_id = "ocid1.subnet.oc1..s"
    worker_nsg_id    = "ocid1.nsg.oc1..n"
    failure_domains  = { fd1 = { availability_domain = "AD-1" } }
  }
  external_cluster_exports = null
  autoscaling_enabled      = false
  autoscaled               = false
  autoscaling_min          = 0
  scale_in_cpu_percent     = 30
  scale_out_cpu_percent    = 70
  failure_domains          = []
  cluster_failure_domains  = []
  node_labels              = {}
  ssh_authorized_keys      = []
  pool                     = null
  members                  = []
  bootstrap_format         = "cloud-config"
  # A payload longer than one 76-character line.
  bootstrap_data = "I2Nsb3VkLWNvbmZpZwp3cml0ZV9maWxlczoKICAtIHBhdGg6IC9ldGMvY2FwdGYtdGVzdAogICAgY29udGVudDogfAogICAgICBhIHBheWxvYWQgbG9uZyBlbm91Z2ggdG8gbmVlZCBzZXZlcmFsIGxpbmVzIG9mIGJhc2U2NCBpbiB0aGUgTUlNRSBwYXJ0CnJ1bmNtZDoKICAtIGVjaG8gZG9uZQo="
}

run "cloud_config_becomes_a_two_part_mime_message" {
  command = plan
  assert {
    condition     = startswith(nonsensitive(output.mime_message), "Content-Type: multipart/mixed; boundary=\"==CAPTF-BOUNDARY==\"\nMIME-Version: 1.0\n\n--==CAPTF-BOUNDARY==\n")
    error_message = "header: ${nonsensitive(output.mime_message)}"
  }
  assert {
    # Preamble, boothook part, payload part, closing "--".
    condition     = length(split("\n--==CAPTF-BOUNDARY==", nonsensitive(output.mime_message))) == 4 && endswith(nonsensitive(output.mime_message), "\n--==CAPTF-BOUNDARY==--\n")
    error_message = "parts: ${nonsensitive(output.mime_message)}"
  }
  assert {
    condition     = startswith(split("\n--==CAPTF-BOUNDARY==", nonsensitive(output.mime_message))[1], "\nContent-Type: text/cloud-boothook; charset=\"utf-8\"\nContent-Disposition: attachment; filename=\"captf-boothook.sh\"\n")
    error_message = "the first part is the boothook"
  }
  assert {
    condition     = strcontains(split("\n--==CAPTF-BOUNDARY==", nonsensitive(output.mime_message))[1], "\n\n#!/bin/sh\n")
    error_message = "the boothook body is the script"
  }
  assert {
    condition     = startswith(split("\n--==CAPTF-BOUNDARY==", nonsensitive(output.mime_message))[2], "\nContent-Type: text/plain; charset=\"utf-8\"\nContent-Disposition: attachment; filename=\"bootstrap\"\nContent-Transfer-Encoding: base64\n\n")
    error_message = "payload part headers: ${split("\n--==CAPTF-BOUNDARY==", nonsensitive(output.mime_message))[2]}"
  }
  assert {
    condition     = output.bootstrap_content_type == "text/plain; charset=\"utf-8\""
    error_message = "got ${jsonencode(output.bootstrap_content_type)}"
  }
  assert {
    condition     = base64decode(nonsensitive(output.user_data)) == nonsensitive(output.mime_message)
    error_message = "user_data is the base64 of the MIME message"
  }
  assert {
    condition     = keys(nonsensitive(output.metadata)) == ["user_data"]
    error_message = "without SSH keys the metadata holds only user_data"
  }
}

run "payload_part_is_the_unchanged_base64_in_lines_of_at_most_76" {
  command = plan
  assert {
    condition = alltrue([
      for line in split("\n", trimspace(split("\n\n", split("\n--==CAPTF-BOUNDARY==", nonsensitive(output.mime_message))[2])[1])) :
      length(line) <= 76 && length(line) > 0
    ])
    error_message = "a base64 line is longer than 76 characters"
  }
  assert {
    condition     = length(split("\n", trimspace(split("\n\n", split("\n--==CAPTF-BOUNDARY==", nonsensitive(output.mime_message))[2])[1]))) == 3
    error_message = "the test payload spans three lines"
  }
  assert {
    condition     = join("", split("\n", trimspace(split("\n\n", split("\n--==CAPTF-BOUNDARY==", nonsensitive(output.mime_message))[2])[1]))) == nonsensitive(var.bootstrap_data)
    error_message = "the payload's base64 must be carried unchanged"
  }
}

run "jinja_cloud_config_stays_text_plain" {
  command = plan
  variables {
    # "## template: jinja\n#cloud-config\n"
    bootstrap_data = "IyMgdGVtcGxhdGU6IGppbmphCiNjbG91ZC1jb25maWcK"
  }
  assert {
    condition     = output.bootstrap_content_type == "text/plain; charset=\"utf-8\""
    error_message = "got ${jsonencode(output.bootstrap_content_type)}"
  }
}

run "gzipped_cloud_config_is_an_x_gzip_part" {
  command = plan
  variables {
    bootstrap_data = "H4sIAAAAAAACA1NOzskvTdFNzs9Ly0znKirNS85NseJSUNBVSE3OyFfISM3JyecCAChddEElAAAA"
  }
  assert {
    condition     = output.bootstrap_content_type == "application/x-gzip"
    error_message = "got ${jsonencode(output.bootstrap_content_type)}"
  }
  assert {
    condition     = startswith(split("\n--==CAPTF-BOUNDARY==", nonsensitive(output.mime_message))[2], "\nContent-Type: application/x-gzip\n")
    error_message = "payload part headers"
  }
  assert {
    condition     = length(output.violations) == 0
    error_message = "gzip is fine with cloud-config: ${jsonencode(output.violations)}"
  }
}

run "node_labels_reach_the_boothook_sorted" {
  command = plan
  variables {
    node_labels = {
      "tier"                           = "batch"
      "example.com/team"               = "blue"
      "node-role.kubernetes.io/worker" = ""
    }
  }
  assert {
    condition     = output.node_labels == ["example.com/team=blue", "tier=batch"]
    error_message = "got ${jsonencode(output.node_labels)}"
  }
  assert {
    condition     = strcontains(output.boothook, "labels='example.com/team=blue,tier=batch'\n")
    error_message = "kubelet labels line: ${output.boothook}"
  }
  assert {
    condition     = strcontains(output.boothook, "node-label+:\n  - \"example.com/team=blue\"\n  - \"tier=batch\"\nCAPTF_NODE_LABELS\n")
    error_message = "RKE2 drop-in: ${output.boothook}"
  }
  assert {
    condition     = output.dropped_node_labels == tolist(["node-role.kubernetes.io/worker"])
    error_message = "got ${jsonencode(output.dropped_node_labels)}"
  }
  assert {
    condition     = strcontains(nonsensitive(output.mime_message), output.boothook) || strcontains(nonsensitive(output.mime_message), trimsuffix(output.boothook, "\n"))
    error_message = "the MIME message carries the boothook"
  }
}

run "no_node_labels_still_cleans_up_earlier_boots" {
  command = plan
  assert {
    condition     = strcontains(output.boothook, "labels=''\n") && strcontains(output.boothook, "rm -f \"$rke2_file\"")
    error_message = "got ${output.boothook}"
  }
  assert {
    condition     = length(output.node_labels) == 0 && length(output.dropped_node_labels) == 0
    error_message = "no labels in, none out"
  }
}

run "restricted_label_namespaces_are_dropped" {
  command = plan
  variables {
    node_labels = {
      "plain"                                  = "1"
      "example.com/x"                          = "1"
      "kubernetes.io/hostname"                 = "1"
      "kubernetes.io/custom"                   = "1"
      "node-role.kubernetes.io/control-plane"  = ""
      "topology.kubernetes.io/zone"            = "1"
      "topology.kubernetes.io/other"           = "1"
      "k8s.io/x"                               = "1"
      "sub.k8s.io/x"                           = "1"
      "node.kubernetes.io/exclude-from-lb"     = "1"
      "pool.node.kubernetes.io/x"              = "1"
      "kubelet.kubernetes.io/x"                = "1"
      "beta.kubernetes.io/instance-type"       = "1"
      "failure-domain.beta.kubernetes.io/zone" = "1"
      "kubernetes.io.example.com/x"            = "1"
      "notkubernetes.io/x"                     = "1"
    }
  }
  assert {
    condition = output.dropped_node_labels == tolist([
      "k8s.io/x",
      "kubernetes.io/custom",
      "node-role.kubernetes.io/control-plane",
      "sub.k8s.io/x",
      "topology.kubernetes.io/other",
    ])
    error_message = "got ${jsonencode(output.dropped_node_labels)}"
  }
  assert {
    condition     = length(output.node_labels) == 11 && !anytrue([for l in output.node_labels : startswith(l, "kubernetes.io/custom=")])
    error_message = "kept: ${jsonencode(output.node_labels)}"
  }
}

run "ssh_keys_join_the_metadata" {
  command = plan
  variables {
    ssh_authorized_keys = ["ssh-ed25519 AAAAkey1 one", "ssh-ed25519 AAAAkey2 two"]
  }
  assert {
    condition     = nonsensitive(output.metadata).ssh_authorized_keys == "ssh-ed25519 AAAAkey1 one\nssh-ed25519 AAAAkey2 two"
    error_message = "keys: ${jsonencode(nonsensitive(output.metadata))}"
  }
  assert {
    condition     = output.metadata_bytes == length(jsonencode(nonsensitive(output.metadata)))
    error_message = "the size counts the whole metadata as JSON"
  }
}

run "ignition_passes_through_unchanged" {
  command = plan
  variables {
    bootstrap_format = "ignition"
    # {"ignition":{"version":"3.4.0"}}
    bootstrap_data = "eyJpZ25pdGlvbiI6eyJ2ZXJzaW9uIjoiMy40LjAifX0="
  }
  assert {
    condition     = nonsensitive(output.user_data) == "eyJpZ25pdGlvbiI6eyJ2ZXJzaW9uIjoiMy40LjAifX0="
    error_message = "Ignition must not be wrapped"
  }
  assert {
    condition     = output.mime_message == null && output.bootstrap_content_type == null
    error_message = "no MIME message for Ignition"
  }
  assert {
    condition     = length(output.violations) == 0
    error_message = "got ${jsonencode(output.violations)}"
  }
}

run "ignition_with_only_dropped_labels_is_accepted" {
  command = plan
  variables {
    bootstrap_format = "ignition"
    bootstrap_data   = "eyJpZ25pdGlvbiI6eyJ2ZXJzaW9uIjoiMy40LjAifX0="
    node_labels      = { "node-role.kubernetes.io/worker" = "" }
  }
  assert {
    condition     = length(output.violations) == 0 && output.dropped_node_labels == tolist(["node-role.kubernetes.io/worker"])
    error_message = "got ${jsonencode(output.violations)}"
  }
}

run "ignition_with_node_labels_is_refused" {
  command = plan
  variables {
    bootstrap_format = "ignition"
    bootstrap_data   = "eyJpZ25pdGlvbiI6eyJ2ZXJzaW9uIjoiMy40LjAifX0="
    node_labels      = { tier = "batch" }
  }
  assert {
    condition     = output.violations == tolist(["node labels need a cloud-config bootstrap: Ignition cannot carry them (tier)"])
    error_message = "got ${jsonencode(output.violations)}"
  }
}

run "gzipped_ignition_is_refused" {
  command = plan
  variables {
    bootstrap_format = "ignition"
    bootstrap_data   = "H4sIAAAAAAACA1NOzskvTdFNzs9Ly0znKirNS85NseJSUNBVSE3OyFfISM3JyecCAChddEElAAAA"
  }
  assert {
    condition     = output.violations == tolist(["a gzipped Ignition payload cannot be delivered"])
    error_message = "got ${jsonencode(output.violations)}"
  }
}

run "fixtures" {
  # Nothing to create: an apply only makes the outputs readable to later runs.
  command = apply
  module {
    source = "./tests/fixtures"
  }
}

run "metadata_of_exactly_32000_bytes_is_accepted" {
  command = plan
  variables {
    bootstrap_format = "ignition"
    # {"user_data":"<31984 characters>"} is 32,000 bytes of JSON.
    bootstrap_data = run.fixtures.ignition_metadata_32000
  }
  assert {
    condition     = output.metadata_bytes == 32000 && length(output.violations) == 0
    error_message = "got ${output.metadata_bytes} bytes, ${jsonencode(output.violations)}"
  }
}

run "metadata_over_32000_bytes_is_refused" {
  command = plan
  variables {
    bootstrap_format = "ignition"
    bootstrap_data   = run.fixtures.ignition_metadata_32004
  }
  assert {
    condition     = output.metadata_bytes == 32004
    error_message = "got ${output.metadata_bytes}"
  }
  assert {
    condition     = output.violations == tolist(["instance metadata is 32004 bytes, over OCI's 32000"])
    error_message = "got ${jsonencode(output.violations)}"
  }
}

run "the_boothook_and_ssh_keys_count_toward_the_limit" {
  command = plan
  variables {
    # Fits alone (31,984 characters of base64), not once wrapped with the
    # boothook and followed by an SSH key.
    bootstrap_data      = run.fixtures.cloud_config_31984
    ssh_authorized_keys = ["ssh-ed25519 AAAAkey1 one"]
  }
  assert {
    condition     = output.metadata_bytes > 32000 && length(output.violations) == 1 && startswith(output.violations[0], "instance metadata is ")
    error_message = "got ${output.metadata_bytes}: ${jsonencode(output.violations)}"
  }
}
