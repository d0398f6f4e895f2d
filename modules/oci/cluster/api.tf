# The control-plane endpoint: a network load balancer, which forwards TCP
# without terminating TLS and, with source preservation off, lets a
# control-plane node reach itself through it (hairpin) while it joins.

locals {
  owns_endpoint = var.control_plane_endpoint == null

  endpoint_violations = concat(
    var.api_load_balancer_public && length(var.api_allowed_cidrs) == 0 ? ["a public API load balancer needs api_allowed_cidrs (the addresses that may reach the API, the nodes' NAT egress included)"] : [],
    !var.api_load_balancer_public && var.api_load_balancer_reserved_public_ip_id != null ? ["api_load_balancer_reserved_public_ip_id needs api_load_balancer_public = true"] : [],
    var.api_load_balancer_private_ip != null && !can(cidrnetmask("${coalesce(var.api_load_balancer_private_ip, "0.0.0.0")}/32")) ? ["api_load_balancer_private_ip ${var.api_load_balancer_private_ip} is not an IPv4 address"] : [],
  )

  api_load_balancer = one(oci_network_load_balancer_network_load_balancer.api_load_balancer)
  # The address clients use: the public one of a public load balancer.
  api_host = try(one([
    for ip in local.api_load_balancer.ip_addresses : ip.ip_address
    if ip.is_public == var.api_load_balancer_public && try(ip.ip_version, "IPV4") != "IPV6"
  ]), null)

  # What decides the endpoint, known at plan time.
  endpoint_inputs = {
    public                = var.api_load_balancer_public
    subnet_id             = local.lb_subnet_id
    private_ip            = var.api_load_balancer_private_ip
    reserved_public_ip_id = var.api_load_balancer_reserved_public_ip_id
    port                  = local.api_port
  }
}

resource "oci_network_load_balancer_network_load_balancer" "api_load_balancer" {
  count = local.owns_endpoint ? 1 : 0

  compartment_id             = var.compartment_id
  display_name               = "${local.name_prefix}-api"
  subnet_id                  = local.lb_subnet_id
  is_private                 = !var.api_load_balancer_public
  assigned_private_ipv4      = var.api_load_balancer_private_ip
  network_security_group_ids = [oci_core_network_security_group.api_load_balancer_nsg[0].id]
  # Backends see the load balancer as the client, so a node reaches itself.
  is_preserve_source_destination = false
  freeform_tags                  = local.freeform_tags

  dynamic "reserved_ips" {
    for_each = var.api_load_balancer_reserved_public_ip_id != null ? [var.api_load_balancer_reserved_public_ip_id] : []
    content {
      id = reserved_ips.value
    }
  }

  lifecycle {
    precondition {
      condition     = length(local.endpoint_violations) == 0
      error_message = "The OCI cluster refuses this endpoint: ${join("; ", local.endpoint_violations)}."
    }
  }
}

resource "oci_network_load_balancer_backend_set" "api_backend_sets" {
  for_each = local.owns_endpoint ? local.listeners : {}

  network_load_balancer_id = oci_network_load_balancer_network_load_balancer.api_load_balancer[0].id
  name                     = each.value.name
  policy                   = "FIVE_TUPLE"
  is_preserve_source       = false

  # TCP only: a node's API server answers TLS, which a plain connect proves
  # listening without credentials.
  health_checker {
    protocol           = "TCP"
    port               = each.value.backend_port
    interval_in_millis = 10000
    timeout_in_millis  = 3000
    retries            = 3
  }
}

resource "oci_network_load_balancer_listener" "api_listeners" {
  for_each = local.owns_endpoint ? local.listeners : {}

  network_load_balancer_id = oci_network_load_balancer_network_load_balancer.api_load_balancer[0].id
  name                     = each.value.name
  default_backend_set_name = oci_network_load_balancer_backend_set.api_backend_sets[each.key].name
  port                     = each.value.port
  protocol                 = "TCP"
}

# Cluster API copies the first endpoint it sees and never updates it, so a
# moved endpoint breaks every kubeconfig and certificate. The guard records,
# with the load balancer, what decides the endpoint (ignore_changes keeps the
# first record) and fails any later plan that would change it: a port change
# would only update the listener in place, which the destructive-plan guard
# does not see.
resource "terraform_data" "api_endpoint_guard" {
  count = local.owns_endpoint ? 1 : 0

  input = merge(local.endpoint_inputs, { address = local.api_host })

  lifecycle {
    ignore_changes = [input]

    postcondition {
      condition = alltrue([for key, value in local.endpoint_inputs : self.output[key] == value])
      error_message = format(
        "The API endpoint of this cluster is fixed once its load balancer exists: %s. Revert the change, or create a new cluster.",
        join("; ", [
          for key, value in local.endpoint_inputs : "${key} was ${jsonencode(self.output[key])}, the inputs now ask for ${jsonencode(value)}"
          if self.output[key] != value
        ]),
      )
    }

    # The address only once both sides are known: an address of a load
    # balancer being replaced is unknown until apply, and the replacement
    # is the destructive-plan guard's to hold.
    postcondition {
      condition     = self.output.address == null || local.api_host == null || self.output.address == local.api_host
      error_message = "The API endpoint of this cluster is fixed once its load balancer exists: its address was ${jsonencode(self.output.address)}, the load balancer now has ${jsonencode(local.api_host)}."
    }
  }
}
