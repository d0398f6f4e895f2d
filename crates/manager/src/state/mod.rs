//! Terraform state as the `kubernetes` backend stores it.

pub mod reader;
