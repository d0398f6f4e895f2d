//! `tfcapi-lint`: checks a module directory or a module image against the
//! CAPTF module contract and reports findings with stable ids.

pub mod checks;
pub mod cli;
pub mod config;
pub mod contract;
pub mod image;

pub mod report;
pub mod types;
