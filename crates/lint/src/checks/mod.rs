//! The checks: module checks over a loaded module tree, image checks over a
//! reconstructed image file system.

pub mod module;
pub mod shadow;
pub mod shape;
