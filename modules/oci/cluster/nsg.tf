# The nodes' and the load balancer's network security groups. Nodes of the
# cluster accept everything from each other (any CNI works without port
# lists); beyond that only what a variable opens. Security lists stay the
# operator's.

locals {
  # Once the network is gone a destroy still evaluates vcn_id; every other
  # plan stops at the network checks before this placeholder reaches OCI.
  nsg_vcn_id = coalesce(local.vcn_id, "ocid1.vcn.oc1..network-not-found")

  api_port = coalesce(try(var.cluster_network.api_server_port, null), 6443)
  # listener => where the load balancer listens and where it forwards. RKE2
  # serves the API on 6443 whatever the Cluster's port, plus its supervisor.
  listeners = merge(
    { kube_apiserver = { name = "kube-apiserver", port = local.api_port, backend_port = var.distribution == "rke2" ? 6443 : local.api_port } },
    var.distribution == "rke2" ? { rke2_supervisor = { name = "rke2-supervisor", port = 9345, backend_port = 9345 } } : {},
  )
  listener_ports = sort(distinct([for l in values(local.listeners) : l.port]))
  backend_ports  = sort(distinct([for l in values(local.listeners) : l.backend_port]))

  # Path MTU discovery: ICMP type 3 ("destination unreachable") code 4
  # ("fragmentation needed").
  icmp_mtu_rules = { for cidr in local.vcn_cidrs : "ingress-icmp-3.4-${cidr}" => { direction = "INGRESS", protocol = "1", peer = cidr, peer_type = "CIDR_BLOCK", ports = null, icmp = { type = 3, code = 4 } } }
  ssh_rules      = { for cidr in var.ssh_allowed_cidrs : "ingress-tcp-22-${cidr}" => { direction = "INGRESS", protocol = "6", peer = cidr, peer_type = "CIDR_BLOCK", ports = { min = 22, max = 22 }, icmp = null } }
  egress_all     = { "egress-all-all-0.0.0.0/0" = { direction = "EGRESS", protocol = "all", peer = "0.0.0.0/0", peer_type = "CIDR_BLOCK", ports = null, icmp = null } }
  from_nodes = {
    "ingress-all-all-control_plane_nsg" = { direction = "INGRESS", protocol = "all", peer = oci_core_network_security_group.control_plane_nsg.id, peer_type = "NETWORK_SECURITY_GROUP", ports = null, icmp = null }
    "ingress-all-all-worker_nsg"        = { direction = "INGRESS", protocol = "all", peer = oci_core_network_security_group.worker_nsg.id, peer_type = "NETWORK_SECURITY_GROUP", ports = null, icmp = null }
  }

  # The API backend ports reach the control plane from the load balancer
  # only; with a user endpoint, which reaches the nodes directly, from the
  # VCN and api_allowed_cidrs.
  api_sources = local.owns_endpoint ? {} : { for cidr in distinct(concat(local.vcn_cidrs, var.api_allowed_cidrs)) : cidr => "CIDR_BLOCK" }
  api_to_control_plane = merge(
    {
      for pair in setproduct(local.backend_ports, local.owns_endpoint ? ["api_load_balancer_nsg"] : []) : "ingress-tcp-${pair[0]}-${pair[1]}" => {
        direction = "INGRESS", protocol = "6", peer = oci_core_network_security_group.api_load_balancer_nsg[0].id, peer_type = "NETWORK_SECURITY_GROUP", ports = { min = pair[0], max = pair[0] }, icmp = null
      }
    },
    {
      for pair in setproduct(local.backend_ports, keys(local.api_sources)) : "ingress-tcp-${pair[0]}-${pair[1]}" => {
        direction = "INGRESS", protocol = "6", peer = pair[1], peer_type = "CIDR_BLOCK", ports = { min = pair[0], max = pair[0] }, icmp = null
      }
    },
  )

  control_plane_rules = merge(local.from_nodes, local.api_to_control_plane, local.icmp_mtu_rules, local.ssh_rules, local.egress_all)

  nodeport_rules = merge([
    for cidr in var.nodeport_allowed_cidrs : {
      "ingress-tcp-30000.32767-${cidr}" = { direction = "INGRESS", protocol = "6", peer = cidr, peer_type = "CIDR_BLOCK", ports = { min = 30000, max = 32767 }, icmp = null }
      "ingress-udp-30000.32767-${cidr}" = { direction = "INGRESS", protocol = "17", peer = cidr, peer_type = "CIDR_BLOCK", ports = { min = 30000, max = 32767 }, icmp = null }
    }
  ]...)
  worker_rules = merge(local.from_nodes, local.icmp_mtu_rules, local.nodeport_rules, local.ssh_rules, local.egress_all)

  # Clients on the listener ports from the VCN and api_allowed_cidrs; out
  # to the control plane's backend ports only.
  api_load_balancer_rules = local.owns_endpoint ? merge(
    {
      for pair in setproduct(local.listener_ports, distinct(concat(local.vcn_cidrs, var.api_allowed_cidrs))) : "ingress-tcp-${pair[0]}-${pair[1]}" => {
        direction = "INGRESS", protocol = "6", peer = pair[1], peer_type = "CIDR_BLOCK", ports = { min = pair[0], max = pair[0] }, icmp = null
      }
    },
    {
      for port in local.backend_ports : "egress-tcp-${port}-control_plane_nsg" => {
        direction = "EGRESS", protocol = "6", peer = oci_core_network_security_group.control_plane_nsg.id, peer_type = "NETWORK_SECURITY_GROUP", ports = { min = port, max = port }, icmp = null
      }
    },
  ) : {}
}

resource "oci_core_network_security_group" "control_plane_nsg" {
  compartment_id = var.compartment_id
  vcn_id         = local.nsg_vcn_id
  display_name   = "${local.name_prefix}-control-plane"
  freeform_tags  = local.freeform_tags

  lifecycle {
    # The operator's network is checked on every plan; a destroy skips
    # preconditions, so it finishes after the network is gone.
    precondition {
      condition     = length(local.network_violations) == 0
      error_message = "The OCI cluster refuses this network: ${join("; ", local.network_violations)}."
    }
  }
}

resource "oci_core_network_security_group" "worker_nsg" {
  compartment_id = var.compartment_id
  vcn_id         = local.nsg_vcn_id
  display_name   = "${local.name_prefix}-workers"
  freeform_tags  = local.freeform_tags
}

resource "oci_core_network_security_group" "api_load_balancer_nsg" {
  count = local.owns_endpoint ? 1 : 0

  compartment_id = var.compartment_id
  vcn_id         = local.nsg_vcn_id
  display_name   = "${local.name_prefix}-api-lb"
  freeform_tags  = local.freeform_tags
}

resource "oci_core_network_security_group_security_rule" "control_plane_nsg_rules" {
  for_each = local.control_plane_rules

  network_security_group_id = oci_core_network_security_group.control_plane_nsg.id
  description               = each.key
  direction                 = each.value.direction
  protocol                  = each.value.protocol
  source                    = each.value.direction == "INGRESS" ? each.value.peer : null
  source_type               = each.value.direction == "INGRESS" ? each.value.peer_type : null
  destination               = each.value.direction == "EGRESS" ? each.value.peer : null
  destination_type          = each.value.direction == "EGRESS" ? each.value.peer_type : null
  stateless                 = false

  dynamic "tcp_options" {
    for_each = each.value.protocol == "6" && each.value.ports != null ? [each.value.ports] : []
    content {
      destination_port_range {
        min = tcp_options.value.min
        max = tcp_options.value.max
      }
    }
  }

  dynamic "icmp_options" {
    for_each = each.value.icmp != null ? [each.value.icmp] : []
    content {
      type = icmp_options.value.type
      code = icmp_options.value.code
    }
  }
}

resource "oci_core_network_security_group_security_rule" "worker_nsg_rules" {
  for_each = local.worker_rules

  network_security_group_id = oci_core_network_security_group.worker_nsg.id
  description               = each.key
  direction                 = each.value.direction
  protocol                  = each.value.protocol
  source                    = each.value.direction == "INGRESS" ? each.value.peer : null
  source_type               = each.value.direction == "INGRESS" ? each.value.peer_type : null
  destination               = each.value.direction == "EGRESS" ? each.value.peer : null
  destination_type          = each.value.direction == "EGRESS" ? each.value.peer_type : null
  stateless                 = false

  dynamic "tcp_options" {
    for_each = each.value.protocol == "6" && each.value.ports != null ? [each.value.ports] : []
    content {
      destination_port_range {
        min = tcp_options.value.min
        max = tcp_options.value.max
      }
    }
  }

  dynamic "udp_options" {
    for_each = each.value.protocol == "17" && each.value.ports != null ? [each.value.ports] : []
    content {
      destination_port_range {
        min = udp_options.value.min
        max = udp_options.value.max
      }
    }
  }

  dynamic "icmp_options" {
    for_each = each.value.icmp != null ? [each.value.icmp] : []
    content {
      type = icmp_options.value.type
      code = icmp_options.value.code
    }
  }
}

resource "oci_core_network_security_group_security_rule" "api_load_balancer_nsg_rules" {
  for_each = local.api_load_balancer_rules

  network_security_group_id = oci_core_network_security_group.api_load_balancer_nsg[0].id
  description               = each.key
  direction                 = each.value.direction
  protocol                  = each.value.protocol
  source                    = each.value.direction == "INGRESS" ? each.value.peer : null
  source_type               = each.value.direction == "INGRESS" ? each.value.peer_type : null
  destination               = each.value.direction == "EGRESS" ? each.value.peer : null
  destination_type          = each.value.direction == "EGRESS" ? each.value.peer_type : null
  stateless                 = false

  dynamic "tcp_options" {
    for_each = each.value.ports != null ? [each.value.ports] : []
    content {
      destination_port_range {
        min = tcp_options.value.min
        max = tcp_options.value.max
      }
    }
  }
}
