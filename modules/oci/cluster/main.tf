# The cluster-wide pieces of one TerraformCluster on a VCN the operator
# brings: node network security groups (nsg.tf), the API network load
# balancer and its endpoint guard (api.tf), the control-plane nodes'
# instance-principal identity (identity.tf), and the exports machines and
# pools are built from (outputs.tf). This file reads the network and the
# region and decides names, tags and failure domains.

provider "oci" {
  region = var.region
  # Tag defaults stamped by OCI would otherwise show as drift on every plan.
  ignore_defined_tags = local.ignored_defined_tags
}

# IAM writes (the dynamic group and its policy) are accepted in the
# tenancy's home region only.
provider "oci" {
  alias               = "home"
  region              = local.home_region
  ignore_defined_tags = local.ignored_defined_tags
}

# ---------------------------------------------------------------------------
# Names and tags
# ---------------------------------------------------------------------------

locals {
  name_identity = "${var.captf_cluster.namespace}/${var.captf_cluster.name}"
  # Readable in the console; the hash keeps two long names apart.
  name_prefix = format("%s-%s",
    replace(substr(lower("captf-${var.captf_cluster.namespace}-${var.captf_cluster.name}"), 0, 54), "/-+$/", ""),
    substr(sha256(local.name_identity), 0, 8),
  )

  # OCI free-form tag keys may not hold '.' or spaces; the contract's tags
  # win over the user's.
  freeform_tags     = merge(var.additional_tags, { for key, value in var.captf_tags : replace(replace(key, ".", "_"), " ", "_") => value })
  max_freeform_tags = 10

  ignored_defined_tags = concat(["Oracle-Tags.CreatedBy", "Oracle-Tags.CreatedOn"], var.ignore_defined_tags)
}

# ---------------------------------------------------------------------------
# The operator's network, read by listing so a destroy after the network is
# gone still finds "nothing" instead of failing on a missing OCID.
# ---------------------------------------------------------------------------

locals {
  network_compartment_id = coalesce(var.network_compartment_id, var.compartment_id)
  worker_subnet_id       = coalesce(var.worker_subnet_id, var.control_plane_subnet_id)
  lb_subnet_id           = coalesce(var.api_load_balancer_subnet_id, var.control_plane_subnet_id)

  # role => subnet OCID; the load balancer's only while the module owns the
  # endpoint.
  subnet_ids = merge(
    { control_plane = var.control_plane_subnet_id, worker = local.worker_subnet_id },
    local.owns_endpoint ? { api_load_balancer = local.lb_subnet_id } : {},
  )
}

data "oci_core_subnets" "network_subnets" {
  compartment_id = local.network_compartment_id
}

data "oci_core_vcns" "network_vcns" {
  compartment_id = local.network_compartment_id
}

locals {
  listed_subnets = { for s in data.oci_core_subnets.network_subnets.subnets : s.id => s }
  subnets        = { for role, id in local.subnet_ids : role => try(local.listed_subnets[id], null) }

  control_plane_subnet = local.subnets.control_plane
  # The control-plane subnet's VCN is the cluster's.
  vcn_id = try(local.control_plane_subnet.vcn_id, null)
  vcn    = one([for v in data.oci_core_vcns.network_vcns.virtual_networks : v if v.id == local.vcn_id])
  vcn_cidrs = sort(distinct(compact(concat(
    try(local.vcn.cidr_blocks, []),
    [try(local.vcn.cidr_block, "")],
  ))))

  # "" (the listing's value for a regional subnet) and null both mean
  # regional.
  control_plane_subnet_ad = try(local.control_plane_subnet.availability_domain, "") == "" ? null : local.control_plane_subnet.availability_domain

  network_violations = concat(
    [for role, subnet in local.subnets : "the ${role} subnet ${local.subnet_ids[role]} is not in compartment ${local.network_compartment_id}" if subnet == null],
    [for role, subnet in local.subnets : "the ${role} subnet ${subnet.id} is ${subnet.state}, not AVAILABLE" if subnet != null && try(subnet.state, "") != "AVAILABLE"],
    [for role, subnet in local.subnets : "the ${role} subnet ${subnet.id} is in VCN ${subnet.vcn_id}, not the control-plane subnet's ${local.vcn_id}" if subnet != null && local.vcn_id != null && try(subnet.vcn_id, "") != local.vcn_id],
    [
      for role, subnet in local.subnets : "the ${role} subnet ${subnet.id} is in ${subnet.availability_domain}, outside the control-plane subnet's availability domain"
      if subnet != null && try(subnet.availability_domain, "") != "" && local.control_plane_subnet_ad != null && try(subnet.availability_domain, "") != local.control_plane_subnet_ad
    ],
    [
      for role, subnet in local.subnets : "the ${role} subnet ${subnet.id} is confined to ${subnet.availability_domain} while the control-plane subnet is regional"
      if subnet != null && try(subnet.availability_domain, "") != "" && local.control_plane_subnet != null && local.control_plane_subnet_ad == null
    ],
    local.vcn_id != null && local.vcn == null ? ["the VCN ${local.vcn_id} is not in compartment ${local.network_compartment_id}"] : [],
    length(local.freeform_tags) > local.max_freeform_tags ? ["${length(local.freeform_tags)} free-form tags, over OCI's ${local.max_freeform_tags} per resource"] : [],
  )
}

# ---------------------------------------------------------------------------
# Failure domains: availability domains where there are several, else the
# fault domains of the one availability domain. A name is the zone the OCI
# cloud controller manager reports: the AD without its tenancy prefix, or
# OCI's fault-domain name.
# ---------------------------------------------------------------------------

data "oci_identity_availability_domains" "region_ads" {
  compartment_id = var.compartment_id
}

locals {
  region_ads = sort([for ad in data.oci_identity_availability_domains.region_ads.availability_domains : ad.name])
  # An AD-specific control-plane subnet confines the cluster to its AD.
  usable_ads = local.control_plane_subnet_ad != null ? [local.control_plane_subnet_ad] : local.region_ads
  failure_domain_mode = (
    var.failure_domain_mode != "auto" ? var.failure_domain_mode :
    length(local.usable_ads) > 1 ? "availability_domain" : "fault_domain"
  )
  # In fault-domain mode of a multi-AD region, the first AD in sort order.
  fault_domain_ad = try(local.usable_ads[0], null)
}

data "oci_identity_fault_domains" "cluster_fault_domains" {
  count = local.failure_domain_mode == "fault_domain" && local.fault_domain_ad != null ? 1 : 0

  availability_domain = local.fault_domain_ad
  compartment_id      = var.compartment_id
}

locals {
  ad_failure_domains = {
    for ad in local.usable_ads : element(split(":", ad), length(split(":", ad)) - 1) => { availability_domain = ad }
  }
  fd_failure_domains = {
    for fd in try(data.oci_identity_fault_domains.cluster_fault_domains[0].fault_domains, []) :
    fd.name => { availability_domain = local.fault_domain_ad, fault_domain = fd.name }
  }
  # Picked by index so the two shapes never need a common type.
  failure_domains = [local.ad_failure_domains, local.fd_failure_domains][local.failure_domain_mode == "fault_domain" ? 1 : 0]
}
