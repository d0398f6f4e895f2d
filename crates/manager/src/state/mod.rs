//! Terraform state as the `kubernetes` backend stores it.

pub mod backups;
pub mod reader;
