# ---------------------------------------------------------------------------
# Names and tags
# ---------------------------------------------------------------------------

locals {
  name_identity = "${var.namespace}/${var.cluster_name}/${var.pool_name}"
  # OCI display names stay readable; the hash keeps two long names apart.
  name_prefix = format("%s-%s",
    replace(substr(lower("captf-${var.namespace}-${var.cluster_name}-${var.pool_name}"), 0, 54), "/-+$/", ""),
    substr(sha256(local.name_identity), 0, 8),
  )

  # OCI free-form tag keys may not hold '.' or spaces.
  mapped_captf_tags = { for key, value in var.captf_tags : replace(replace(key, ".", "_"), " ", "_") => value }
  # The contract's tags win over the user's.
  freeform_tags     = merge(var.additional_tags, local.mapped_captf_tags)
  max_freeform_tags = 10
}

# ---------------------------------------------------------------------------
# Cluster exports
# ---------------------------------------------------------------------------

locals {
  exports_schema = "captf.io/oci-cluster/v1"

  # The controller passes {} for an externally managed cluster; the user then
  # supplies the exports. Indexing a tuple picks one without unifying types.
  controller_exports_empty = var.cluster_outputs == null ? true : try(length(var.cluster_outputs) == 0, false)
  exports                  = [var.cluster_outputs, var.external_cluster_exports][local.controller_exports_empty ? 1 : 0]
  exports_source           = local.controller_exports_empty ? "external_cluster_exports" : "captf_cluster_outputs"

  required_export_keys = ["compartment_id", "region", "worker_nsg_id", "worker_subnet_id"]
  missing_export_keys  = [for key in local.required_export_keys : key if try(local.exports[key], null) == null]
  exports_schema_ok    = try(local.exports.schema, null) == local.exports_schema

  # name => {availability_domain, fault_domain or null}
  exported_failure_domains = try({
    for name, fd in local.exports.failure_domains : name => {
      availability_domain = try(fd.availability_domain, null)
      fault_domain        = try(fd.fault_domain, "") == "" ? null : fd.fault_domain
    }
  }, {})
  exported_failure_domain_names = sort(keys(local.exported_failure_domains))

  node_defined_tags = try(length(local.exports.node_defined_tags) > 0, false) ? local.exports.node_defined_tags : null
}

# ---------------------------------------------------------------------------
# Placement: failure domains in, OCI placement configurations out
# ---------------------------------------------------------------------------

locals {
  # The cluster's zones as it reports them now: its failure_domains output,
  # else every exported name; each with its placement (a name the exports
  # do not place is left out here and refused below if it is ever used).
  current_cluster_zone_names = length(var.cluster_failure_domains) > 0 ? var.cluster_failure_domains : local.exported_failure_domain_names
  current_cluster_zones = {
    for name in distinct(local.current_cluster_zone_names) : name => local.exported_failure_domains[name]
    if contains(local.exported_failure_domain_names, name)
  }
  # A pool without failure domains of its own keeps the cluster's zones as
  # they were at its first apply (recorded by the parent), so a later change
  # of the cluster's zones never moves its instances.
  kept_cluster_zones = var.kept_cluster_zones == null ? null : {
    for name, fd in var.kept_cluster_zones : name => {
      availability_domain = try(fd.availability_domain, null)
      fault_domain        = try(fd.fault_domain, "") == "" ? null : fd.fault_domain
    }
  }
  own_failure_domains = length(var.failure_domains) > 0
  # name => placement the requested names are resolved against.
  placement_domains = (
    local.own_failure_domains || local.kept_cluster_zones == null
    ? local.exported_failure_domains
    : local.kept_cluster_zones
  )
  requested_failure_domains = (
    local.own_failure_domains ? var.failure_domains :
    local.kept_cluster_zones != null ? keys(local.kept_cluster_zones) :
    local.current_cluster_zone_names
  )
  selected_failure_domains = sort(distinct(local.requested_failure_domains))
  unknown_failure_domains = [
    for name in local.selected_failure_domains : name
    if !contains(keys(local.placement_domains), name) || try(local.placement_domains[name].availability_domain, null) == null
  ]
  placed_failure_domains = [
    for name in local.selected_failure_domains : local.placement_domains[name]
    if !contains(local.unknown_failure_domains, name)
  ]
  placement_ads = sort(distinct([for fd in local.placed_failure_domains : fd.availability_domain]))

  # One placement per availability domain. A domain that names no fault
  # domain lets OCI spread over all of them in that availability domain:
  # fault_domains is then left unset, the provider's own default, rather
  # than an empty list.
  placements = [
    for ad in local.placement_ads : {
      availability_domain = ad
      fault_domains = (
        anytrue([for fd in local.placed_failure_domains : fd.availability_domain == ad && fd.fault_domain == null])
        ? null
        : sort(distinct([for fd in local.placed_failure_domains : fd.fault_domain if fd.availability_domain == ad]))
      )
    }
  ]

  # Where an instance landed, back to a failure-domain name: an exact
  # "<AD>/<FD>" match first, else a name for the whole availability domain.
  # Several names for one location resolve to the first in sort order.
  location_domains = merge(local.exported_failure_domains, local.kept_cluster_zones == null ? {} : local.kept_cluster_zones)
  failure_domain_by_location = merge(
    { for name, fd in local.location_domains : fd.availability_domain => name... if fd.availability_domain != null && fd.fault_domain == null },
    { for name, fd in local.location_domains : "${fd.availability_domain}/${fd.fault_domain}" => name... if fd.availability_domain != null && fd.fault_domain != null },
  )
}

# ---------------------------------------------------------------------------
# Node labels
# ---------------------------------------------------------------------------

locals {
  # Labels a kubelet may set on its own Node under NodeRestriction.
  kubelet_settable_labels = [
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "kubernetes.io/arch",
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
  ]
  label_prefixes = { for key in keys(var.node_labels) : key => length(split("/", key)) > 1 ? split("/", key)[0] : "" }
  dropped_node_labels = sort([
    for key, prefix in local.label_prefixes : key
    if can(regex("(^|\\.)(kubernetes|k8s)\\.io$", prefix))
    && !contains(local.kubelet_settable_labels, key)
    && !can(regex("(^|\\.)(kubelet|node)\\.kubernetes\\.io$", prefix))
  ])
  kept_node_labels = { for key, value in var.node_labels : key => value if !contains(local.dropped_node_labels, key) }
  node_label_list  = [for key in sort(keys(local.kept_node_labels)) : "${key}=${local.kept_node_labels[key]}"]
}

# ---------------------------------------------------------------------------
# Bootstrap delivery
# ---------------------------------------------------------------------------

locals {
  cloud_config = var.bootstrap_format == "cloud-config"
  # Base64 of a gzip stream always starts with these four characters.
  bootstrap_gzipped = nonsensitive(substr(var.bootstrap_data, 0, 4) == "H4sI")

  boothook = templatefile("${path.module}/node-labels.sh.tftpl", {
    labels     = replace(join(",", local.node_label_list), "'", "'\\''")
    label_list = local.node_label_list
  })

  mime_boundary = "==CAPTF-BOUNDARY=="
  payload_content_type = (
    local.bootstrap_gzipped ? "application/x-gzip" : "text/plain; charset=\"utf-8\""
  )
  # The payload stays opaque: its base64 is re-wrapped, never decoded, so
  # cloud-init sniffs cloud-config or a Jinja header itself.
  mime_message = join("\n", [
    "Content-Type: multipart/mixed; boundary=\"${local.mime_boundary}\"",
    "MIME-Version: 1.0",
    "",
    "--${local.mime_boundary}",
    "Content-Type: text/cloud-boothook; charset=\"utf-8\"",
    "Content-Disposition: attachment; filename=\"captf-boothook.sh\"",
    "Content-Transfer-Encoding: 7bit",
    "",
    trimsuffix(local.boothook, "\n"),
    "",
    "--${local.mime_boundary}",
    "Content-Type: ${local.payload_content_type}",
    "Content-Disposition: attachment; filename=\"bootstrap\"",
    "Content-Transfer-Encoding: base64",
    "",
    join("\n", regexall(".{1,76}", var.bootstrap_data)),
    "",
    "--${local.mime_boundary}--",
    "",
  ])

  # Ignition is handed over untouched.
  user_data = local.cloud_config ? base64encode(local.mime_message) : var.bootstrap_data

  ssh_metadata = {
    for key in(length(var.ssh_authorized_keys) > 0 ? ["ssh_authorized_keys"] : []) :
    key => join("\n", var.ssh_authorized_keys)
  }
  metadata           = merge({ user_data = local.user_data }, local.ssh_metadata)
  metadata_bytes     = nonsensitive(length(jsonencode(local.metadata)))
  max_metadata_bytes = 32000
}

# ---------------------------------------------------------------------------
# Members and health
# ---------------------------------------------------------------------------

locals {
  # OCI instance states to contract states and reasons. The pool's member
  # list spells states in CamelCase ("CreatingImage") where the instance API
  # says CREATING_IMAGE: both are compared upper-cased without separators.
  member_states = {
    PROVISIONING  = { state = "pending", reason = "InstanceProvisioning" }
    STARTING      = { state = "pending", reason = "InstanceStarting" }
    RUNNING       = { state = "running", reason = null }
    MOVING        = { state = "running", reason = null }
    CREATINGIMAGE = { state = "unknown", reason = "InstanceCreatingImage" }
    STOPPING      = { state = "stopped", reason = "InstanceStopping" }
    STOPPED       = { state = "stopped", reason = "InstanceStopped" }
  }
  other_member_state = { state = "unknown", reason = "UnknownState" }
  # An instance on its way out is no longer a member.
  departed_states = ["TERMINATING", "TERMINATED"]

  listed_by_id = { for m in var.members : m.id => m... }
  members = [
    for id in sort(keys(local.listed_by_id)) : {
      id                  = id
      provider_id         = "oci://${id}"
      oci_state           = upper(replace(coalesce(local.listed_by_id[id][0].state, "-"), "/[_ -]/", ""))
      availability_domain = local.listed_by_id[id][0].availability_domain
      fault_domain        = local.listed_by_id[id][0].fault_domain
    }
    if !contains(local.departed_states, upper(coalesce(local.listed_by_id[id][0].state, "-")))
  ]
  classified_members = [
    for m in local.members : merge(m, lookup(local.member_states, m.oci_state, local.other_member_state), {
      failure_domain = try(
        local.failure_domain_by_location["${m.availability_domain}/${m.fault_domain}"][0],
        local.failure_domain_by_location[m.availability_domain][0],
        null,
      )
    })
  ]

  pool_state  = var.pool == null ? "" : upper(coalesce(var.pool.state, "-"))
  pool_gone   = var.pool == null || contains(["TERMINATING", "TERMINATED"], local.pool_state)
  actual_size = var.pool == null ? 0 : coalesce(var.pool.actual_size, var.pool.size, 0)

  # Worst first.
  problem_states   = ["degraded", "stopped", "unknown"]
  problem_members  = [for m in local.classified_members : m if contains(local.problem_states, m.state)]
  worst_state      = try([for s in local.problem_states : s if contains(local.problem_members[*].state, s)][0], null)
  starting_members = [for m in local.classified_members : m if m.state == "pending"]
  running_count    = length([for m in local.classified_members : m if m.state == "running"])
  size_mismatch    = length(local.classified_members) != local.actual_size

  health_message = local.pool_gone ? "instance pool not found" : "instance pool is ${local.pool_state}; ${local.running_count} of ${local.actual_size} instances running"

  # The shared precedence: the first case that holds decides.
  health_cases = [
    {
      holds   = local.pool_gone
      state   = "terminated"
      healthy = false
      reasons = ["PoolNotFound"]
    },
    {
      holds   = local.actual_size == 0
      state   = "running"
      healthy = true
      reasons = []
    },
    {
      holds   = length(local.classified_members) == 0
      state   = "pending"
      healthy = false
      reasons = ["NoMembers"]
    },
    {
      holds   = local.worst_state != null
      state   = local.worst_state
      healthy = false
      reasons = [for m in local.problem_members : "${m.reason}:${m.id}"]
    },
    {
      holds   = true
      state   = "running"
      healthy = !local.size_mismatch && length(local.starting_members) == 0
      reasons = concat(local.size_mismatch ? ["ScalingInProgress"] : [], [for m in local.starting_members : "${m.reason}:${m.id}"])
    },
  ]
  health_case = [for c in local.health_cases : c if c.holds][0]
  health = {
    state   = local.health_case.state
    healthy = local.health_case.healthy
    message = local.health_message
    reasons = tolist(local.health_case.reasons)
  }
}

# ---------------------------------------------------------------------------
# What refuses an apply
# ---------------------------------------------------------------------------

locals {
  # Unusable exports leave the provider without a region: these are refused
  # by the `region` output, before the provider is configured.
  export_violations = concat(
    local.exports == null || try(length(local.exports) == 0, false) ? [
      "the cluster's exports are empty (an externally managed TerraformCluster?): set external_cluster_exports",
    ] : [],
    local.exports != null && !try(length(local.exports) == 0, false) && !local.exports_schema_ok ? [
      "${local.exports_source} must carry schema \"${local.exports_schema}\"",
    ] : [],
    local.exports != null && !try(length(local.exports) == 0, false) && length(local.missing_export_keys) > 0 ? [
      "${local.exports_source} lacks ${join(", ", local.missing_export_keys)}",
    ] : [],
  )

  violations = concat(
    local.export_violations,
    var.autoscaled != var.autoscaling_enabled ? [
      "autoscaled is ${var.autoscaled} but the MachinePool's autoscaling is ${var.autoscaling_enabled ? "on" : "off"}: set autoscaled = ${var.autoscaling_enabled} to switch modes, which replaces the pool and every instance",
    ] : [],
    length(local.unknown_failure_domains) > 0 ? [
      "unknown failure domains ${join(", ", local.unknown_failure_domains)}; the cluster exports ${length(local.exported_failure_domain_names) > 0 ? join(", ", local.exported_failure_domain_names) : "none"}",
    ] : [],
    length(local.unknown_failure_domains) == 0 && length(local.placements) == 0 ? [
      "no failure domain to place the pool in: the cluster exports none",
    ] : [],
    !contains(["cloud-config", "ignition"], var.bootstrap_format) ? [
      "bootstrap_format must be cloud-config or ignition",
    ] : [],
    !local.cloud_config && length(local.node_label_list) > 0 ? [
      "node labels need a cloud-config bootstrap: Ignition cannot carry them (${join(", ", sort(keys(local.kept_node_labels)))})",
    ] : [],
    !local.cloud_config && local.bootstrap_gzipped ? [
      "a gzipped Ignition payload cannot be delivered",
    ] : [],
    local.metadata_bytes > local.max_metadata_bytes ? [
      "instance metadata is ${local.metadata_bytes} bytes, over OCI's ${local.max_metadata_bytes}",
    ] : [],
    var.autoscaling_enabled && var.autoscaling_min < 1 ? [
      "the autoscaler's minimum must be at least 1: scaling an OCI pool to 0 is not supported by this module",
    ] : [],
    var.autoscaling_enabled && var.scale_in_cpu_percent >= var.scale_out_cpu_percent ? [
      "autoscaling_scale_in_cpu_percent (${var.scale_in_cpu_percent}) must be below autoscaling_scale_out_cpu_percent (${var.scale_out_cpu_percent})",
    ] : [],
    length(local.freeform_tags) > local.max_freeform_tags ? [
      "${length(local.freeform_tags)} free-form tags, over OCI's ${local.max_freeform_tags} per resource",
    ] : [],
  )
}
