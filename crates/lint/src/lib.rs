//! `tfcapi-lint`: checks a module directory or an image against the module
//! contract. Built by the linter issue; this crate holds nothing that runs yet.
