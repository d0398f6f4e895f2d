# Which exports the machine is built from, and whether they are usable. A
# module of its own so its `region` output can refuse unusable exports
# before the parent's provider is configured: without a region the provider
# would fail first, with a client error instead of the reason.

terraform {
  required_version = ">= 1.5.0"

  # Nothing here uses a provider; declared so that the tests' mock of `oci`
  # means oracle/oci when they run this module on its own.
  required_providers {
    oci = {
      source = "oracle/oci"
    }
  }
}

variable "cluster_outputs" {
  description = "The cluster's exports as the controller passes them ({} or null for an externally managed cluster)."
  type        = any
}

variable "external_cluster_exports" {
  description = "Exports supplied by the user for an externally managed cluster."
  type        = any
}

variable "required_keys" {
  description = "Export keys the caller cannot do without."
  type        = list(string)
}

locals {
  schema = "captf.io/oci-cluster/v1"

  controller_exports_empty = var.cluster_outputs == null ? true : try(length(var.cluster_outputs) == 0, false)
  # Indexing a tuple picks one without unifying the two types.
  exports      = [var.cluster_outputs, var.external_cluster_exports][local.controller_exports_empty ? 1 : 0]
  source_name  = local.controller_exports_empty ? "external_cluster_exports" : "captf_cluster_outputs"
  empty        = local.exports == null ? true : try(length(local.exports) == 0, false)
  missing_keys = [for key in var.required_keys : key if try(local.exports[key], null) == null]

  violations = concat(
    local.empty ? ["the cluster's exports are empty (an externally managed TerraformCluster?): set external_cluster_exports"] : [],
    !local.empty && try(local.exports.schema, null) != local.schema ? ["${local.source_name} must carry schema \"${local.schema}\""] : [],
    !local.empty && length(local.missing_keys) > 0 ? ["${local.source_name} lacks ${join(", ", local.missing_keys)}"] : [],
  )
}

output "exports" {
  description = "The exports in use: the controller's, else the user's."
  value       = local.exports
}

output "region" {
  description = "The region the parent's provider is configured with; refuses unusable exports first."
  value       = try(local.exports.region, null)

  precondition {
    condition     = length(local.violations) == 0
    error_message = "The OCI machine refuses these inputs: ${join("; ", local.violations)}."
  }
}
