terraform {
  required_version = ">= 1.5.0"

  required_providers {
    oci = {
      source = "oracle/oci"
      # 8.28.0 is the build the module images ship; 9.x is the reference's
      # line. Every resource and argument used here exists in both, so both
      # are accepted, and the next major, which may rename them, is not.
      version = ">= 8.28.0, < 10.0.0"
    }
  }
}
