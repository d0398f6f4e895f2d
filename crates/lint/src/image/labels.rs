//! Validation of the machine capacity labels: `io.captf.capacity` (resource
//! name → quantity) and `io.captf.node-info` (architecture, OS).

fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A Kubernetes qualified name: `[prefix/]name`.
pub fn resource_name(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix
        && (p.is_empty() || p.len() > 253 || !p.split('.').all(dns_label))
    {
        return false;
    }
    !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// A Kubernetes quantity: sign, decimal number, optional suffix (binary
/// `Ki`…`Ei`, decimal `n u m k M G T P E`, or an exponent).
pub fn quantity(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let num_len = s
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.'))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(num_len);
    let digits = num.chars().filter(char::is_ascii_digit).count();
    if digits == 0 || num.matches('.').count() > 1 {
        return false;
    }
    match suffix {
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "n" | "u" | "m" | "k" | "M" | "G" | "T"
        | "P" | "E" => true,
        s if s.starts_with(['e', 'E']) => {
            let e = s[1..].strip_prefix(['+', '-']).unwrap_or(&s[1..]);
            !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())
        }
        _ => false,
    }
}

pub fn capacity(value: &str) -> Result<(), String> {
    let v: serde_json::Value = serde_json::from_str(value).map_err(|e| format!("not JSON: {e}"))?;
    let obj = v.as_object().ok_or("not a JSON object")?;
    for (k, v) in obj {
        if !resource_name(k) {
            return Err(format!("{k:?} is not a valid resource name"));
        }
        match v.as_str() {
            Some(q) if quantity(q) => {}
            _ => return Err(format!("the value of {k:?} is not a quantity string")),
        }
    }
    Ok(())
}

const ARCHITECTURES: &[&str] = &["amd64", "arm64", "s390x", "ppc64le"];

pub fn node_info(value: &str) -> Result<(), String> {
    let v: serde_json::Value = serde_json::from_str(value).map_err(|e| format!("not JSON: {e}"))?;
    let obj = v.as_object().ok_or("not a JSON object")?;
    if obj.is_empty() {
        return Err("needs architecture or operatingSystem".into());
    }
    for (k, v) in obj {
        match k.as_str() {
            "architecture" => match v.as_str() {
                Some(a) if ARCHITECTURES.contains(&a) => {}
                _ => {
                    return Err(format!(
                        "architecture must be one of {}",
                        ARCHITECTURES.join(", ")
                    ));
                }
            },
            "operatingSystem" => {
                if v.as_str().is_none_or(|s| s.is_empty()) {
                    return Err("operatingSystem must be a non-empty string".into());
                }
            }
            other => return Err(format!("unknown key {other:?}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_values() {
        assert!(capacity(r#"{"cpu":"4","memory":"16Gi","nvidia.com/gpu":"1"}"#).is_ok());
        assert!(capacity(r#"{"cpu":"500m","ephemeral-storage":"1e3"}"#).is_ok());
        assert!(capacity(r#"{"cpu":4}"#).is_err());
        assert!(capacity(r#"{"cpu":"four"}"#).is_err());
        assert!(capacity(r#"{"Bad Name":"1"}"#).is_err());
        assert!(capacity("[]").is_err());
        assert!(capacity("{").is_err());
        for q in ["1", "1.5", ".5", "+2Gi", "100M", "1e-3"] {
            assert!(quantity(q), "{q}");
        }
        for q in ["", "Gi", "1.2.3", "1GB", "1e"] {
            assert!(!quantity(q), "{q}");
        }
    }

    #[test]
    fn node_info_values() {
        assert!(node_info(r#"{"architecture":"arm64"}"#).is_ok());
        assert!(node_info(r#"{"operatingSystem":"linux","architecture":"amd64"}"#).is_ok());
        assert!(node_info("{}").is_err());
        assert!(node_info(r#"{"architecture":"x86"}"#).is_err());
        assert!(node_info(r#"{"arch":"amd64"}"#).is_err());
    }
}
