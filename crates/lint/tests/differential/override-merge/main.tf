variable "a" {
  type    = string
  default = "x"
}

locals {
  b = var.a
}

output "b" {
  value = local.b
}
