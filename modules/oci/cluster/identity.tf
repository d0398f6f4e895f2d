# The control-plane nodes' instance-principal identity, for the OCI cloud
# controller manager and CSI controller: a dynamic group of this cluster's
# control-plane instances and a policy for it. Workers get nothing: a
# principal that may read instances may read their user data, which on a
# control-plane instance holds the cluster's CA keys.

locals {
  identity_enabled = var.node_identity.enabled
  defined_tag      = var.node_identity.defined_tag
  defined_tag_key  = local.defined_tag == null ? null : "${local.defined_tag.namespace}.${local.defined_tag.key}"

  # Workers carry the cluster's value, control-plane machines their own,
  # which is the only one the dynamic group matches.
  node_defined_tags          = local.defined_tag == null ? {} : { (local.defined_tag_key) = local.name_identity }
  control_plane_defined_tags = local.defined_tag == null ? {} : { (local.defined_tag_key) = "${local.name_identity}/control-plane" }

  # The identity's credential files are mounted here; OCI_TENANCY_OCID is
  # the one the provider itself reads the tenancy from.
  tenancy_file = try(trimspace(file("/var/run/captf/credentials/OCI_TENANCY_OCID")), "")
  tenancy_id   = var.tenancy_id != null ? var.tenancy_id : (local.tenancy_file != "" ? local.tenancy_file : null)

  look_up_home_region = local.identity_enabled && var.home_region == null && local.tenancy_id != null
  found_home_region   = try(one([for r in data.oci_identity_region_subscriptions.tenancy_regions[0].region_subscriptions : r.region_name if r.is_home_region]), null)
  # Without node identity nothing goes through the home provider; it still
  # needs a region to start.
  home_region = coalesce(var.home_region, local.found_home_region, var.region)

  matching_rule = (
    local.defined_tag == null
    ? "ALL {instance.compartment.id = '${var.compartment_id}'}"
    : "ALL {instance.compartment.id = '${var.compartment_id}', tag.${local.defined_tag_key}.value = '${local.name_identity}/control-plane'}"
  )

  policy_compartment_id = coalesce(var.node_policy_compartment_id, var.compartment_id)
  # A statement about the root compartment must say "tenancy".
  in_cluster_compartment = startswith(var.compartment_id, "ocid1.tenancy.") ? "tenancy" : "compartment id ${var.compartment_id}"
  in_network_compartment = startswith(local.network_compartment_id, "ocid1.tenancy.") ? "tenancy" : "compartment id ${local.network_compartment_id}"
  dynamic_group_name     = "${local.name_prefix}-control-plane"
  node_policy_statements = concat(
    [
      for verb in ["read instance-family", "manage load-balancers", "manage network-load-balancers", "manage volume-family"] :
      "Allow dynamic-group ${local.dynamic_group_name} to ${verb} in ${local.in_cluster_compartment}"
    ],
    ["Allow dynamic-group ${local.dynamic_group_name} to use virtual-network-family in ${local.in_network_compartment}"],
  )

  identity_violations = concat(
    local.tenancy_id == null ? ["node_identity needs the tenancy: set tenancy_id, or give the identity an OCI_TENANCY_OCID key"] : [],
    local.look_up_home_region && local.found_home_region == null ? ["the tenancy's home region could not be found among its region subscriptions: set home_region"] : [],
  )
}

data "oci_identity_region_subscriptions" "tenancy_regions" {
  count = local.look_up_home_region ? 1 : 0

  tenancy_id = local.tenancy_id
}

resource "oci_identity_dynamic_group" "node_dynamic_group" {
  count    = local.identity_enabled ? 1 : 0
  provider = oci.home

  compartment_id = local.tenancy_id
  name           = local.dynamic_group_name
  description    = "Control-plane instances of cluster ${local.name_identity} (CAPTF)."
  matching_rule  = local.matching_rule
  freeform_tags  = local.freeform_tags

  lifecycle {
    precondition {
      condition     = length(local.identity_violations) == 0
      error_message = "The OCI cluster refuses this node identity: ${join("; ", local.identity_violations)}."
    }
  }
}

resource "oci_identity_policy" "node_policy" {
  count    = local.identity_enabled ? 1 : 0
  provider = oci.home

  compartment_id = local.policy_compartment_id
  name           = "${local.name_prefix}-control-plane"
  description    = "What the cloud controller manager and CSI controller of cluster ${local.name_identity} need (CAPTF)."
  statements     = local.node_policy_statements
  freeform_tags  = local.freeform_tags

  # The group must exist before a policy names it.
  depends_on = [oci_identity_dynamic_group.node_dynamic_group]
}
