//! Reading modules the way Terraform and OpenTofu do.

pub mod expr;
pub mod ir;
pub mod json;
pub mod load;
pub mod model;
