//! `tfcapi-lint`: checks a module directory or a module image against the
//! CAPTF module contract and reports findings with stable ids (as text, JSON
//! or SARIF); prints the JSON Schema of a module's user variables.

pub mod checks;
pub mod cli;
pub mod config;
pub mod contract;
pub mod image;

pub mod report;
pub mod sarif;
pub mod types;
pub mod varschema;
