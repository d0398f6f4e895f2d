//! The provider's container images, built as OCI image layouts without a
//! container engine: `layout` writes any image, `recipes` says what the
//! manager image and the no-op module images hold.

pub mod layout;
pub mod recipes;
