variable "a" {
  default = "y"
}

locals {
  b = "${var.a}-z"
}
