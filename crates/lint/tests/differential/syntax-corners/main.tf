terraform {
  required_version = ">= 1.6"
}

variable "items" {
  type = list(object({
    name = string
    size = optional(number, 1)
  }))
  default = []
}

locals {
  names    = [for i in var.items : upper(i.name) if i.size > 0]
  by_name  = { for i in var.items : i.name => i... }
  splat    = var.items[*].name
  legacy   = var.items.*.name
  heredoc  = <<-EOT
    hello ${length(var.items)}
    %{ for n in local.names ~}
    - ${n}
    %{ endfor ~}
  EOT
  cond     = length(var.items) > 0 ? "some" : "none"
  nested   = { a = { b = [1, 2, { c = "d" }] } }
  escaped  = "$${not_interpolated} %%{not_a_directive}"
  unicode  = "h\u00e9llo \U0001F600"
  math     = (1 + 2) * 3 / 4 % 5 - -1
  logic    = !true || (false && 1 != 2) && 3 >= 2
  index    = local.nested["a"].b[2].c
}

resource "terraform_data" "each" {
  for_each = { for i in var.items : i.name => i }

  input = each.value

  lifecycle {
    ignore_changes = [input]
  }
}

resource "terraform_data" "dynamic" {
  count = 0

  input = { for k, v in local.by_name : k => length(v) }
}

output "all" {
  value = {
    names   = local.names
    splat   = local.splat
    legacy  = local.legacy
    heredoc = local.heredoc
    cond    = local.cond
    escaped = local.escaped
    unicode = local.unicode
    math    = local.math
    logic   = local.logic
    index   = local.index
  }
}
