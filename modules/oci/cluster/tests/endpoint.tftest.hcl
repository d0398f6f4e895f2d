# The API endpoint: the network load balancer, its listeners and backend
# sets, a user's own endpoint, and the guard that fails any plan moving the
# endpoint once the load balancer exists.

# The operator's network as the listings report it (every attribute of the
# provider's schema, as a mock requires). Subnets: cp, workers and lb are
# regional in VCN v; ad2, ad2-workers and ad3 are confined to one
# availability domain; elsewhere is in another VCN; terminating is not
# AVAILABLE. The region has three availability domains; the tenancy's home
# region is us-phoenix-1.
mock_provider "oci" {
  mock_data "oci_core_subnets" {
    defaults = {
      subnets = [
        { availability_domain = "", cidr_block = "10.0.0.0/24", compartment_id = "ocid1.compartment.oc1..net", defined_tags = {}, dhcp_options_id = "", display_name = "cp", dns_label = "", freeform_tags = {}, id = "ocid1.subnet.oc1..cp", ipv4cidr_blocks = ["10.0.0.0/24"], ipv6cidr_block = "", ipv6cidr_blocks = [], ipv6virtual_router_ip = "", prohibit_internet_ingress = true, prohibit_public_ip_on_vnic = true, route_table_id = "", security_list_ids = [], state = "AVAILABLE", subnet_domain_name = "", time_created = "", vcn_id = "ocid1.vcn.oc1..v", virtual_router_ip = "", virtual_router_mac = "" },
        { availability_domain = "", cidr_block = "10.0.0.0/24", compartment_id = "ocid1.compartment.oc1..net", defined_tags = {}, dhcp_options_id = "", display_name = "workers", dns_label = "", freeform_tags = {}, id = "ocid1.subnet.oc1..workers", ipv4cidr_blocks = ["10.0.0.0/24"], ipv6cidr_block = "", ipv6cidr_blocks = [], ipv6virtual_router_ip = "", prohibit_internet_ingress = true, prohibit_public_ip_on_vnic = true, route_table_id = "", security_list_ids = [], state = "AVAILABLE", subnet_domain_name = "", time_created = "", vcn_id = "ocid1.vcn.oc1..v", virtual_router_ip = "", virtual_router_mac = "" },
        { availability_domain = "", cidr_block = "10.0.0.0/24", compartment_id = "ocid1.compartment.oc1..net", defined_tags = {}, dhcp_options_id = "", display_name = "lb", dns_label = "", freeform_tags = {}, id = "ocid1.subnet.oc1..lb", ipv4cidr_blocks = ["10.0.0.0/24"], ipv6cidr_block = "", ipv6cidr_blocks = [], ipv6virtual_router_ip = "", prohibit_internet_ingress = true, prohibit_public_ip_on_vnic = true, route_table_id = "", security_list_ids = [], state = "AVAILABLE", subnet_domain_name = "", time_created = "", vcn_id = "ocid1.vcn.oc1..v", virtual_router_ip = "", virtual_router_mac = "" },
        { availability_domain = "Uocm:IAD-AD-2", cidr_block = "10.0.0.0/24", compartment_id = "ocid1.compartment.oc1..net", defined_tags = {}, dhcp_options_id = "", display_name = "ad2", dns_label = "", freeform_tags = {}, id = "ocid1.subnet.oc1..ad2", ipv4cidr_blocks = ["10.0.0.0/24"], ipv6cidr_block = "", ipv6cidr_blocks = [], ipv6virtual_router_ip = "", prohibit_internet_ingress = true, prohibit_public_ip_on_vnic = true, route_table_id = "", security_list_ids = [], state = "AVAILABLE", subnet_domain_name = "", time_created = "", vcn_id = "ocid1.vcn.oc1..v", virtual_router_ip = "", virtual_router_mac = "" },
        { availability_domain = "Uocm:IAD-AD-2", cidr_block = "10.0.0.0/24", compartment_id = "ocid1.compartment.oc1..net", defined_tags = {}, dhcp_options_id = "", display_name = "ad2-workers", dns_label = "", freeform_tags = {}, id = "ocid1.subnet.oc1..ad2-workers", ipv4cidr_blocks = ["10.0.0.0/24"], ipv6cidr_block = "", ipv6cidr_blocks = [], ipv6virtual_router_ip = "", prohibit_internet_ingress = true, prohibit_public_ip_on_vnic = true, route_table_id = "", security_list_ids = [], state = "AVAILABLE", subnet_domain_name = "", time_created = "", vcn_id = "ocid1.vcn.oc1..v", virtual_router_ip = "", virtual_router_mac = "" },
        { availability_domain = "Uocm:IAD-AD-3", cidr_block = "10.0.0.0/24", compartment_id = "ocid1.compartment.oc1..net", defined_tags = {}, dhcp_options_id = "", display_name = "ad3", dns_label = "", freeform_tags = {}, id = "ocid1.subnet.oc1..ad3", ipv4cidr_blocks = ["10.0.0.0/24"], ipv6cidr_block = "", ipv6cidr_blocks = [], ipv6virtual_router_ip = "", prohibit_internet_ingress = true, prohibit_public_ip_on_vnic = true, route_table_id = "", security_list_ids = [], state = "AVAILABLE", subnet_domain_name = "", time_created = "", vcn_id = "ocid1.vcn.oc1..v", virtual_router_ip = "", virtual_router_mac = "" },
        { availability_domain = "", cidr_block = "10.0.0.0/24", compartment_id = "ocid1.compartment.oc1..net", defined_tags = {}, dhcp_options_id = "", display_name = "elsewhere", dns_label = "", freeform_tags = {}, id = "ocid1.subnet.oc1..elsewhere", ipv4cidr_blocks = ["10.0.0.0/24"], ipv6cidr_block = "", ipv6cidr_blocks = [], ipv6virtual_router_ip = "", prohibit_internet_ingress = true, prohibit_public_ip_on_vnic = true, route_table_id = "", security_list_ids = [], state = "AVAILABLE", subnet_domain_name = "", time_created = "", vcn_id = "ocid1.vcn.oc1..other", virtual_router_ip = "", virtual_router_mac = "" },
        { availability_domain = "", cidr_block = "10.0.0.0/24", compartment_id = "ocid1.compartment.oc1..net", defined_tags = {}, dhcp_options_id = "", display_name = "terminating", dns_label = "", freeform_tags = {}, id = "ocid1.subnet.oc1..terminating", ipv4cidr_blocks = ["10.0.0.0/24"], ipv6cidr_block = "", ipv6cidr_blocks = [], ipv6virtual_router_ip = "", prohibit_internet_ingress = true, prohibit_public_ip_on_vnic = true, route_table_id = "", security_list_ids = [], state = "TERMINATING", subnet_domain_name = "", time_created = "", vcn_id = "ocid1.vcn.oc1..v", virtual_router_ip = "", virtual_router_mac = "" },
      ]
    }
  }
  mock_data "oci_core_vcns" {
    defaults = {
      virtual_networks = [
        { byoipv6cidr_blocks = [], byoipv6cidr_details = [], cidr_block = "10.0.0.0/16", cidr_blocks = ["10.0.0.0/16", "10.1.0.0/16"], compartment_id = "ocid1.compartment.oc1..net", default_dhcp_options_id = "", default_route_table_id = "", default_security_list_id = "", defined_tags = {}, display_name = "", dns_label = "", freeform_tags = {}, id = "ocid1.vcn.oc1..v", ipv6cidr_blocks = [], ipv6private_cidr_blocks = [], is_ipv6enabled = false, is_oracle_gua_allocation_enabled = false, security_attributes = {}, state = "AVAILABLE", time_created = "", vcn_domain_name = "" },
        { byoipv6cidr_blocks = [], byoipv6cidr_details = [], cidr_block = "192.168.0.0/16", cidr_blocks = ["192.168.0.0/16"], compartment_id = "ocid1.compartment.oc1..net", default_dhcp_options_id = "", default_route_table_id = "", default_security_list_id = "", defined_tags = {}, display_name = "", dns_label = "", freeform_tags = {}, id = "ocid1.vcn.oc1..other", ipv6cidr_blocks = [], ipv6private_cidr_blocks = [], is_ipv6enabled = false, is_oracle_gua_allocation_enabled = false, security_attributes = {}, state = "AVAILABLE", time_created = "", vcn_domain_name = "" },
      ]
    }
  }
  mock_data "oci_identity_availability_domains" {
    defaults = {
      availability_domains = [
        { compartment_id = "ocid1.tenancy.oc1..t", id = "ad1", name = "Uocm:IAD-AD-1" },
        { compartment_id = "ocid1.tenancy.oc1..t", id = "ad2", name = "Uocm:IAD-AD-2" },
        { compartment_id = "ocid1.tenancy.oc1..t", id = "ad3", name = "Uocm:IAD-AD-3" },
      ]
    }
  }
  mock_data "oci_identity_fault_domains" {
    defaults = {
      fault_domains = [
        { availability_domain = "-", compartment_id = "ocid1.tenancy.oc1..t", id = "fd1", name = "FAULT-DOMAIN-1" },
        { availability_domain = "-", compartment_id = "ocid1.tenancy.oc1..t", id = "fd2", name = "FAULT-DOMAIN-2" },
        { availability_domain = "-", compartment_id = "ocid1.tenancy.oc1..t", id = "fd3", name = "FAULT-DOMAIN-3" },
      ]
    }
  }
  mock_data "oci_identity_region_subscriptions" {
    defaults = {
      region_subscriptions = [
        { is_home_region = false, region_key = "IAD", region_name = "us-ashburn-1", state = "READY", tenancy_id = "ocid1.tenancy.oc1..t" },
        { is_home_region = true, region_key = "PHX", region_name = "us-phoenix-1", state = "READY", tenancy_id = "ocid1.tenancy.oc1..t" },
      ]
    }
  }
}

mock_provider "oci" {
  alias = "home"
}

variables {
  captf_contract            = "v1alpha1"
  captf_cluster             = { name = "prod", namespace = "team-a" }
  captf_object              = { kind = "TerraformCluster", name = "prod", namespace = "team-a" }
  captf_tags                = { "captf.io/cluster" = "prod", "captf.io/kind" = "TerraformCluster" }
  control_plane_endpoint    = null
  kubernetes_version        = null
  control_plane_initialized = false
  cluster_network           = null
  compartment_id            = "ocid1.compartment.oc1..c"
  network_compartment_id    = "ocid1.compartment.oc1..net"
  region                    = "us-ashburn-1"
  control_plane_subnet_id   = "ocid1.subnet.oc1..cp"
  worker_subnet_id          = "ocid1.subnet.oc1..workers"
  tenancy_id                = "ocid1.tenancy.oc1..t"
  node_identity             = { defined_tag = { namespace = "captf", key = "cluster" } }
}

# What OCI reports for the load balancer once created.
override_resource {
  target = oci_network_load_balancer_network_load_balancer.api_load_balancer
  values = {
    id    = "ocid1.networkloadbalancer.oc1..api"
    state = "ACTIVE"
    ip_addresses = [
      { ip_address = "10.0.0.10", ip_version = "IPV4", is_public = false, reserved_ip = [] },
    ]
  }
}

run "a_private_load_balancer_by_default" {
  command = plan

  assert {
    condition = (
      oci_network_load_balancer_network_load_balancer.api_load_balancer[0].is_private
      && oci_network_load_balancer_network_load_balancer.api_load_balancer[0].is_preserve_source_destination == false
      && length(oci_network_load_balancer_network_load_balancer.api_load_balancer[0].reserved_ips) == 0
    )
    error_message = "private, without source preservation (hairpin), no reserved IP"
  }
  assert {
    condition     = oci_network_load_balancer_network_load_balancer.api_load_balancer[0].network_security_group_ids == toset([oci_core_network_security_group.api_load_balancer_nsg[0].id])
    error_message = "the load balancer sits in its own NSG"
  }
  assert {
    condition = {
      for k, l in oci_network_load_balancer_listener.api_listeners : k => [l.name, l.port, l.protocol, l.default_backend_set_name]
    } == { kube_apiserver = ["kube-apiserver", 6443, "TCP", "kube-apiserver"] }
    error_message = "one TCP listener on 6443"
  }
  assert {
    condition = (
      oci_network_load_balancer_backend_set.api_backend_sets["kube_apiserver"].is_preserve_source == false
      && oci_network_load_balancer_backend_set.api_backend_sets["kube_apiserver"].health_checker[0].protocol == "TCP"
      && oci_network_load_balancer_backend_set.api_backend_sets["kube_apiserver"].health_checker[0].port == 6443
    )
    error_message = "TCP health checks on the backend port, no source preservation"
  }
  assert {
    condition     = toset(keys(oci_core_network_security_group_security_rule.api_load_balancer_nsg_rules)) == toset(["ingress-tcp-6443-10.0.0.0/16", "ingress-tcp-6443-10.1.0.0/16", "egress-tcp-6443-control_plane_nsg"])
    error_message = "clients from the VCN on the listener port, out to the control plane only; got ${jsonencode(keys(oci_core_network_security_group_security_rule.api_load_balancer_nsg_rules))}"
  }
}

run "the_node_rules" {
  command = plan

  variables {
    ssh_allowed_cidrs      = ["192.0.2.0/24"]
    nodeport_allowed_cidrs = ["198.51.100.0/24"]
  }

  assert {
    condition = toset(keys(oci_core_network_security_group_security_rule.control_plane_nsg_rules)) == toset([
      "ingress-all-all-control_plane_nsg", "ingress-all-all-worker_nsg", "ingress-tcp-6443-api_load_balancer_nsg",
      "ingress-icmp-3.4-10.0.0.0/16", "ingress-icmp-3.4-10.1.0.0/16", "ingress-tcp-22-192.0.2.0/24", "egress-all-all-0.0.0.0/0",
    ])
    error_message = "got ${jsonencode(keys(oci_core_network_security_group_security_rule.control_plane_nsg_rules))}"
  }
  assert {
    condition = toset(keys(oci_core_network_security_group_security_rule.worker_nsg_rules)) == toset([
      "ingress-all-all-control_plane_nsg", "ingress-all-all-worker_nsg", "ingress-icmp-3.4-10.0.0.0/16", "ingress-icmp-3.4-10.1.0.0/16",
      "ingress-tcp-30000.32767-198.51.100.0/24", "ingress-udp-30000.32767-198.51.100.0/24", "ingress-tcp-22-192.0.2.0/24", "egress-all-all-0.0.0.0/0",
    ])
    error_message = "got ${jsonencode(keys(oci_core_network_security_group_security_rule.worker_nsg_rules))}"
  }
  assert {
    condition = (
      oci_core_network_security_group_security_rule.worker_nsg_rules["ingress-udp-30000.32767-198.51.100.0/24"].protocol == "17"
      && oci_core_network_security_group_security_rule.worker_nsg_rules["ingress-udp-30000.32767-198.51.100.0/24"].udp_options[0].destination_port_range[0].max == 32767
      && oci_core_network_security_group_security_rule.control_plane_nsg_rules["ingress-icmp-3.4-10.0.0.0/16"].icmp_options[0].code == 4
      && oci_core_network_security_group_security_rule.control_plane_nsg_rules["ingress-tcp-6443-api_load_balancer_nsg"].source_type == "NETWORK_SECURITY_GROUP"
    )
    error_message = "NodePorts over UDP too, path MTU ICMP 3/4, the API port from the load balancer's NSG"
  }
}

run "rke2_adds_the_supervisor_and_keeps_the_api_backends_on_6443" {
  command = plan

  variables {
    distribution    = "rke2"
    cluster_network = { api_server_port = 443 }
  }

  assert {
    condition = {
      for k, l in oci_network_load_balancer_listener.api_listeners : k => [l.name, l.port]
    } == { kube_apiserver = ["kube-apiserver", 443], rke2_supervisor = ["rke2-supervisor", 9345] }
    error_message = "the API on the Cluster's port, the supervisor on 9345"
  }
  assert {
    condition     = oci_network_load_balancer_backend_set.api_backend_sets["kube_apiserver"].health_checker[0].port == 6443
    error_message = "RKE2 serves the API on 6443"
  }
}

run "a_public_load_balancer_needs_allowed_cidrs" {
  command = plan

  variables {
    api_load_balancer_public = true
  }

  expect_failures = [oci_network_load_balancer_network_load_balancer.api_load_balancer]
}

run "a_user_endpoint_replaces_the_load_balancer" {
  command = plan

  variables {
    control_plane_endpoint = { host = "api.example.com", port = 6443 }
    api_allowed_cidrs      = ["203.0.113.0/24"]
  }

  assert {
    condition = (
      length(oci_network_load_balancer_network_load_balancer.api_load_balancer) == 0
      && length(oci_core_network_security_group.api_load_balancer_nsg) == 0
      && length(terraform_data.api_endpoint_guard) == 0
      && length(oci_network_load_balancer_listener.api_listeners) == 0
    )
    error_message = "no load balancer, NSG, listener or guard"
  }
  assert {
    condition     = output.control_plane_endpoint == { host = "api.example.com", port = 6443 } && output.exports.api == null
    error_message = "the user's endpoint, published unchanged; nothing for machines to register in"
  }
  assert {
    condition     = contains(keys(oci_core_network_security_group_security_rule.control_plane_nsg_rules), "ingress-tcp-6443-203.0.113.0/24") && contains(keys(oci_core_network_security_group_security_rule.control_plane_nsg_rules), "ingress-tcp-6443-10.0.0.0/16")
    error_message = "the endpoint reaches the nodes directly: the API port from the VCN and api_allowed_cidrs"
  }
  assert {
    condition     = output.health.state == "running" && output.health.healthy
    error_message = "nothing to observe: running"
  }
}

run "the_load_balancer_is_created" {
  assert {
    condition     = output.control_plane_endpoint == { host = "10.0.0.10", port = 6443 }
    error_message = "got ${jsonencode(output.control_plane_endpoint)}"
  }
  assert {
    condition     = jsonencode(terraform_data.api_endpoint_guard[0].output) == jsonencode({ address = "10.0.0.10", port = 6443, private_ip = null, public = false, reserved_public_ip_id = null, subnet_id = "ocid1.subnet.oc1..cp" })
    error_message = "the guard records what decides the endpoint; got ${jsonencode(terraform_data.api_endpoint_guard[0].output)}"
  }
}

run "an_unchanged_plan_passes_the_guard" {
  command = plan

  variables {
    ssh_allowed_cidrs = ["192.0.2.0/24"]
  }

  assert {
    condition     = output.control_plane_endpoint == { host = "10.0.0.10", port = 6443 }
    error_message = "the endpoint stays"
  }
}

run "the_guard_refuses_a_new_port" {
  command = plan

  variables {
    cluster_network = { api_server_port = 443 }
  }

  expect_failures = [terraform_data.api_endpoint_guard]
}

run "the_guard_refuses_a_new_visibility" {
  command = plan

  variables {
    api_load_balancer_public = true
    api_allowed_cidrs        = ["203.0.113.0/24"]
  }

  expect_failures = [terraform_data.api_endpoint_guard]
}

run "the_guard_refuses_a_new_subnet_or_address" {
  command = plan

  variables {
    api_load_balancer_subnet_id  = "ocid1.subnet.oc1..lb"
    api_load_balancer_private_ip = "10.0.0.20"
  }

  expect_failures = [terraform_data.api_endpoint_guard]
}

run "the_guard_still_holds_the_first_record" {
  command = plan

  assert {
    condition     = terraform_data.api_endpoint_guard[0].output.port == 6443 && terraform_data.api_endpoint_guard[0].output.public == false
    error_message = "refused plans changed nothing"
  }
}
