//! Container image reference syntax, as the distribution reference grammar
//! defines it (after normalising a Docker Hub short name). Only syntax is
//! checked, never the registry or the image.

use std::sync::LazyLock;

use regex::Regex;

use super::{ViolationKind, Violations};

const MAX_NAME_LENGTH: usize = 255;

static REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    let alnum = "[a-z0-9]+";
    let separator = "(?:[._]|__|[-]+)";
    let component = format!("{alnum}(?:{separator}{alnum})*");
    let domain_component = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
    let ipv6 = r"\[(?:[a-fA-F0-9:]+)\]";
    let host = format!("(?:{domain_component}(?:\\.{domain_component})*|{ipv6})");
    let domain = format!("{host}(?::[0-9]+)?");
    let name = format!("(?:{domain}/)?{component}(?:/{component})*");
    let tag = r"[\w][\w.-]{0,127}";
    let digest = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}";
    Regex::new(&format!("^({name})(?::({tag}))?(?:@({digest}))?$")).expect("valid regex")
});

static HEX64: LazyLock<Regex> =
    LazyLock::new(|| Regex::new("^[a-f0-9]{64}$").expect("valid regex"));

/// Why `image` is not a valid reference, or `None` when it is.
pub fn image_reference_problem(image: &str) -> Option<&'static str> {
    if image.is_empty() {
        return Some("must be set");
    }
    let Some(captures) = REFERENCE.captures(image) else {
        if image.chars().any(|c| c.is_ascii_uppercase()) {
            return Some("must be a container image reference; repository names must be lowercase");
        }
        return Some(
            "must be a container image reference such as registry/repository:tag or registry/repository@sha256:<digest>",
        );
    };
    let name = captures.get(1).map_or("", |m| m.as_str());
    if name.len() > MAX_NAME_LENGTH {
        return Some("repository name must not be longer than 255 characters");
    }
    if HEX64.is_match(name) {
        return Some("repository name cannot be a 64-character hexadecimal string");
    }
    None
}

pub fn is_image_reference(image: &str) -> bool {
    image_reference_problem(image).is_none()
}

/// Adds a violation at `field` when `image` is missing or malformed.
pub fn check_image_reference(field: &str, image: &str) -> Option<super::Violation> {
    image_reference_problem(image).map(|detail| {
        let kind = if image.is_empty() {
            ViolationKind::Required
        } else {
            ViolationKind::Invalid
        };
        super::Violation::new(field, kind, detail)
    })
}

pub(crate) fn check(v: &mut Violations, field: &str, image: &str) {
    if let Some(violation) = check_image_reference(field, image) {
        v.0.push(violation);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_reference_forms() {
        for ok in [
            "ghcr.io/captf-io/aws-machinepool:v0.1.0-opentofu",
            "busybox",
            "library/busybox:1.36",
            "localhost:5000/team/module:v1",
            "registry.example.com/a/b/c@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "registry.example.com/a:v1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "[::1]:5000/module:v1",
            "a__b/c-d--e.f:tag_1.2-x",
        ] {
            assert!(is_image_reference(ok), "{ok}");
        }
    }

    #[test]
    fn refuses_malformed_references() {
        for bad in [
            "",
            "Ghcr.io/Team/Module:v1",
            "ghcr.io/team/Module:v1",
            "ghcr.io/team/module:",
            "ghcr.io/team/module:-tag",
            "ghcr.io/team/module@sha256:short",
            "ghcr.io//module",
            "ghcr.io/team/module:v1 ",
            "https://ghcr.io/team/module:v1",
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert!(!is_image_reference(bad), "{bad}");
        }
    }

    #[test]
    fn messages_never_repeat_the_reference() {
        let bad = "Weird/IMAGE:::";
        let violation = check_image_reference("spec.source.image", bad).unwrap();
        assert!(!violation.to_string().contains(bad));
        assert_eq!(violation.kind, ViolationKind::Invalid);
        assert_eq!(
            check_image_reference("spec.source.image", "").unwrap().kind,
            ViolationKind::Required
        );
    }
}

/// The repository of an image reference: the reference without its tag or
/// digest (a colon before the last slash is a registry port, not a tag).
pub fn repository(reference: &str) -> &str {
    let without_digest = reference.split('@').next().unwrap_or(reference);
    match without_digest.rfind(':') {
        Some(i) if !without_digest[i..].contains('/') => &without_digest[..i],
        _ => without_digest,
    }
}

#[cfg(test)]
mod repository_tests {
    use super::repository;

    #[test]
    fn repository_drops_tag_and_digest_but_keeps_ports() {
        let cases = [
            ("ghcr.io/captf/noop:v1", "ghcr.io/captf/noop"),
            ("ghcr.io/captf/noop@sha256:ab", "ghcr.io/captf/noop"),
            ("ghcr.io/captf/noop:v1@sha256:ab", "ghcr.io/captf/noop"),
            ("localhost:5000/noop", "localhost:5000/noop"),
            ("localhost:5000/noop:v2", "localhost:5000/noop"),
            ("noop", "noop"),
        ];
        for (reference, want) in cases {
            assert_eq!(repository(reference), want, "{reference}");
        }
    }
}
