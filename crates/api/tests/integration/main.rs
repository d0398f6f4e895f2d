//! The API crate's integration tests, one binary: the CRDs on the real
//! apiserver and their descriptions.

mod crd_descriptions;
mod crds;
mod events_documented;
