//! Readers of single flag values in the forms Kubernetes components take
//! (Go's `strconv.ParseBool` and `time.ParseDuration`, resource quantities,
//! feature gate maps, klog's `--vmodule`), so manifests written for Go
//! managers start this one. Each returns a message clap prints after the
//! flag's name.

use std::time::Duration;

use crate::jobs::args::RunnerEvents;

/// Go's `strconv.ParseBool`.
pub fn go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("{s:?} is not a boolean (true or false)")),
    }
}

/// `--runner-events`: a Go boolean, or `all`.
pub fn runner_events(s: &str) -> Result<RunnerEvents, String> {
    match s {
        "all" => Ok(RunnerEvents::All),
        _ => match go_bool(s) {
            Ok(true) => Ok(RunnerEvents::Notable),
            Ok(false) => Ok(RunnerEvents::Off),
            Err(_) => Err(format!("{s:?} is not true, false or all")),
        },
    }
}

/// Go's `time.ParseDuration` (`90s`, `1h30m`, `1.5h`, `500ms`, `0`), in
/// whole nanoseconds. A negative duration is refused: no flag here means
/// anything by one.
pub fn go_duration(s: &str) -> Result<Duration, String> {
    let bad = |why: &str| format!("invalid duration {s:?}: {why}");
    let unsigned = s.strip_prefix('+').unwrap_or(s);
    if unsigned.starts_with('-') {
        return Err(bad("must not be negative"));
    }
    if unsigned == "0" {
        return Ok(Duration::ZERO);
    }
    if unsigned.is_empty() {
        return Err(bad("empty"));
    }
    let mut rest = unsigned;
    let mut nanos: u128 = 0;
    while !rest.is_empty() {
        let (segment, tail) = duration_segment(rest).map_err(bad)?;
        nanos = nanos.checked_add(segment).ok_or_else(|| bad("too large"))?;
        rest = tail;
    }
    u64::try_from(nanos)
        .map(Duration::from_nanos)
        .map_err(|_| bad("too large"))
}

/// One `<number><unit>` of a Go duration, in nanoseconds, and what follows.
fn duration_segment(s: &str) -> Result<(u128, &str), &'static str> {
    let number_len = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or("missing unit (ns, us, ms, s, m or h)")?;
    let (number, rest) = s.split_at(number_len);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return Err("expected a number before the unit");
    }
    let unit_len = rest
        .find(|c: char| c.is_ascii_digit() || c == '.')
        .unwrap_or(rest.len());
    let (unit, rest) = rest.split_at(unit_len);
    let scale: u128 = match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return Err("unknown unit: use ns, us, ms, s, m or h"),
    };
    let digits = |d: &str| -> Result<u128, &'static str> {
        if d.is_empty() {
            Ok(0)
        } else {
            d.parse::<u128>().map_err(|_| "too large")
        }
    };
    let mut nanos = digits(whole)?.checked_mul(scale).ok_or("too large")?;
    // Fraction digits beyond what the unit can hold in nanoseconds are
    // dropped, as Go drops them.
    let kept = &fraction[..fraction.len().min(20)];
    if !kept.is_empty() {
        let denominator = 10u128.pow(kept.len() as u32);
        nanos += digits(kept)?.saturating_mul(scale) / denominator;
    }
    Ok((nanos, rest))
}

/// A [`go_duration`] that must be greater than zero.
pub fn positive_duration(s: &str) -> Result<Duration, String> {
    match go_duration(s)? {
        d if d.is_zero() => Err(format!("duration {s:?} must be greater than zero")),
        d => Ok(d),
    }
}

/// A Kubernetes resource quantity (`0`, `64Ki`, `1M`, `1.5e3`), not
/// negative. Kept as written: the flags that take one change nothing here.
pub fn quantity(s: &str) -> Result<String, String> {
    let bad = || format!("{s:?} is not a quantity (for example 0, 64Ki or 1M)");
    let unsigned = s.strip_prefix('+').unwrap_or(s);
    if unsigned.starts_with('-') {
        return Err(format!("quantity {s:?} must not be negative"));
    }
    let number_len = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_len);
    let fraction = number.split_once('.').map_or("", |(_, f)| f);
    let number_ok = !matches!(number, "" | ".") && !fraction.contains('.');
    let suffix_ok = match suffix {
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => true,
        "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E" => true,
        exponent => exponent
            .strip_prefix(['e', 'E'])
            .map(|e| e.strip_prefix(['+', '-']).unwrap_or(e))
            .is_some_and(|e| !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())),
    };
    if number_ok && suffix_ok {
        Ok(s.to_owned())
    } else {
        Err(bad())
    }
}

/// The feature gates `--feature-gates` takes: the component-base logging
/// gates and their defaults. Nothing else in the manager is gated.
pub const FEATURE_GATES: [(&str, bool); 5] = [
    ("AllAlpha", false),
    ("AllBeta", false),
    ("ContextualLogging", true),
    ("LoggingAlphaOptions", false),
    ("LoggingBetaOptions", true),
];

/// One `--feature-gates` value: `Name=bool,...`, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureGates(pub Vec<(String, bool)>);

pub fn feature_gates(s: &str) -> Result<FeatureGates, String> {
    let mut gates = Vec::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("missing bool value for {pair}"))?;
        let (name, value) = (name.trim(), value.trim());
        if !FEATURE_GATES.iter().any(|(known, _)| *known == name) {
            return Err(format!("unrecognized feature gate: {name}"));
        }
        let enabled = go_bool(value)
            .map_err(|_| format!("invalid value of {name}: {value}, err: not a boolean"))?;
        gates.push((name.to_owned(), enabled));
    }
    Ok(FeatureGates(gates))
}

/// klog's `--vmodule`: `pattern=N,...` with a non-empty pattern and a
/// level of 0 or more.
pub fn vmodule(s: &str) -> Result<String, String> {
    for entry in s.split(',').filter(|e| !e.is_empty()) {
        let syntax = || format!("{entry:?} is not pattern=N");
        let (pattern, level) = entry.split_once('=').ok_or_else(syntax)?;
        if pattern.is_empty() || level.contains('=') {
            return Err(syntax());
        }
        level
            .parse::<i32>()
            .ok()
            .filter(|l| *l >= 0)
            .ok_or_else(|| format!("{entry:?}: the level must be a number of 0 or more"))?;
    }
    Ok(s.to_owned())
}

/// The value of `--version`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum VersionFlag {
    #[default]
    False,
    True,
    /// Every build detail, as JSON.
    Raw,
    /// `vX.Y.Z[-pre][+build]`: print this version instead of the built one.
    Literal(String),
}

pub fn version_flag(s: &str) -> Result<VersionFlag, String> {
    if s == "raw" {
        return Ok(VersionFlag::Raw);
    }
    if let Some(version) = s.strip_prefix('v') {
        let core = version.split(['-', '+']).next().unwrap_or_default();
        let parts: Vec<&str> = core.split('.').collect();
        let numeric = |p: &&str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit());
        return if parts.len() == 3 && parts.iter().all(numeric) {
            Ok(VersionFlag::Literal(s.to_owned()))
        } else {
            Err(format!("{s:?} is not a version of the form vX.Y.Z"))
        };
    }
    match go_bool(s) {
        Ok(true) => Ok(VersionFlag::True),
        Ok(false) => Ok(VersionFlag::False),
        Err(_) => Err(format!("{s:?}: want true, false, raw or vX.Y.Z")),
    }
}

/// A `host[:port]` entry of `--image-inspect-allowed-registries`.
pub fn registry_host(s: &str) -> Result<String, String> {
    let (host, port) = match s.rsplit_once(':') {
        Some((h, _)) if !h.ends_with(']') && h.contains(':') => (s, None),
        Some((h, p)) => (h, Some(p)),
        None => (s, None),
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-[]:".contains(c));
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|n| n > 0));
    if host_ok && port_ok && !s.contains('/') {
        Ok(s.to_owned())
    } else {
        Err(format!("{s:?} is not a registry host[:port]"))
    }
}

pub fn non_negative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{s:?} is not a number of 0 or more")),
    }
}

/// A file name inside `--webhook-cert-dir`.
pub fn file_name(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        Err("must name a file".to_owned())
    } else {
        Ok(s.to_owned())
    }
}

/// A label value (`--watch-filter`): the controllers select on it, and a
/// value the apiserver refuses would fail every list.
pub fn label_value(s: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    let edges_ok = s.is_empty()
        || (s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric()));
    if s.len() <= 63 && s.chars().all(allowed) && edges_ok {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "{s:?} is not a label value (at most 63 letters, digits, '-', '_' or '.', \
             beginning and ending with a letter or digit)"
        ))
    }
}

/// The cipher suite names of `--tls-cipher-suites`, each one known to Go
/// and offered by rustls.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CipherSuites(pub Vec<String>);

pub fn cipher_suites(s: &str) -> Result<CipherSuites, String> {
    let provider = crate::tls::base_provider();
    let mut names = Vec::new();
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        crate::tls::cipher_suite(&provider, name).map_err(|e| e.to_string())?;
        names.push(name.to_owned());
    }
    Ok(CipherSuites(names))
}

/// The curve IDs of `--tls-curve-preferences`, each one offered by rustls.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CurveIds(pub Vec<u16>);

pub fn curve_ids(s: &str) -> Result<CurveIds, String> {
    let provider = crate::tls::base_provider();
    let mut ids = Vec::new();
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let id = crate::tls::parse_curve(entry).map_err(|e| e.to_string())?;
        crate::tls::curve(&provider, id).map_err(|e| e.to_string())?;
        ids.push(id);
    }
    Ok(CurveIds(ids))
}

pub fn min_version(s: &str) -> Result<crate::tls::MinVersion, String> {
    crate::tls::MinVersion::parse(s).map_err(|e| e.to_string())
}

/// klog's `-v`: 0 or more (an `int32` in Go).
pub fn verbosity(s: &str) -> Result<u32, String> {
    s.parse::<u32>()
        .ok()
        .filter(|v| *v <= i32::MAX as u32)
        .ok_or_else(|| format!("{s:?} is not a verbosity level (a number of 0 or more)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_like_go() {
        let ms = Duration::from_millis;
        let cases = [
            ("0", Duration::ZERO),
            ("90s", ms(90_000)),
            ("10m", ms(600_000)),
            ("10m0s", ms(600_000)),
            ("1h30m", ms(5_400_000)),
            ("1.5h", ms(5_400_000)),
            ("500ms", ms(500)),
            ("1.5s", ms(1_500)),
            ("+2s", ms(2_000)),
            (".5s", ms(500)),
            ("1h0m0s", ms(3_600_000)),
            ("250us", Duration::from_micros(250)),
            ("1.25µs", Duration::from_nanos(1_250)),
            ("3ns", Duration::from_nanos(3)),
            ("2h45m30.5s", ms(9_930_500)),
        ];
        for (text, want) in cases {
            assert_eq!(go_duration(text), Ok(want), "{text}");
        }
        for bad in [
            "",
            "10",
            "-1s",
            "1d",
            "s",
            "1.2.3s",
            "1 s",
            "1s ",
            "ten",
            "..s",
            "99999999999999h",
        ] {
            assert!(go_duration(bad).is_err(), "{bad:?}");
        }
        assert!(positive_duration("0s").is_err());
        assert!(positive_duration("0").is_err());
        assert_eq!(positive_duration("1ns"), Ok(Duration::from_nanos(1)));
    }

    #[test]
    fn booleans_take_go_spellings() {
        for t in ["1", "t", "T", "true", "TRUE", "True"] {
            assert_eq!(go_bool(t), Ok(true), "{t}");
        }
        for f in ["0", "f", "F", "false", "FALSE", "False"] {
            assert_eq!(go_bool(f), Ok(false), "{f}");
        }
        for bad in ["", "yes", "on", "tRuE", "2"] {
            assert!(go_bool(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn quantities_take_kubernetes_forms() {
        for ok in [
            "0", "64Ki", "1M", "1.5Gi", "100m", "1e3", "2E6", "+5k", "1E", ".5",
        ] {
            assert_eq!(quantity(ok).as_deref(), Ok(ok), "{ok}");
        }
        for bad in ["", "-1", "1KB", "Ki", "1.2.3", "1 Mi", "1e", "ten", "1ki"] {
            assert!(quantity(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn feature_gates_accept_only_the_logging_gates_with_bools() {
        assert_eq!(
            feature_gates("AllAlpha=true, ContextualLogging=false").unwrap(),
            FeatureGates(vec![
                ("AllAlpha".into(), true),
                ("ContextualLogging".into(), false)
            ])
        );
        assert_eq!(feature_gates("").unwrap(), FeatureGates(vec![]));
        for (bad, named) in [
            ("MachinePool=true", "unrecognized feature gate: MachinePool"),
            ("AllBeta=maybe", "AllBeta"),
            ("AllBeta", "missing bool value for AllBeta"),
            ("allalpha=true", "allalpha"),
        ] {
            let err = feature_gates(bad).unwrap_err();
            assert!(err.contains(named), "{bad}: {err}");
        }
    }

    #[test]
    fn vmodule_takes_pattern_equals_level() {
        for ok in ["", "reconcile*=4", "a=1,b/c=2,", "*=0"] {
            assert!(vmodule(ok).is_ok(), "{ok}");
        }
        for bad in ["a", "=2", "a=", "a=-1", "a=x", "a=1=2", "a=1,b"] {
            assert!(vmodule(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn version_values() {
        let cases = [
            ("true", VersionFlag::True),
            ("false", VersionFlag::False),
            ("1", VersionFlag::True),
            ("raw", VersionFlag::Raw),
            ("v1.2.3", VersionFlag::Literal("v1.2.3".into())),
            (
                "v0.1.0-rc.1+abc",
                VersionFlag::Literal("v0.1.0-rc.1+abc".into()),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(version_flag(text), Ok(want), "{text}");
        }
        for bad in ["", "v", "v1.2", "v1.x.3", "1.2.3", "json"] {
            assert!(version_flag(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn label_values_for_the_watch_filter() {
        for ok in ["", "a", "team-1", "a.b_c", &"x".repeat(63)] {
            assert!(label_value(ok).is_ok(), "{ok}");
        }
        for bad in ["-a", "a-", "a b", "a/b", &"x".repeat(64)] {
            assert!(label_value(bad).is_err(), "{bad}");
        }
    }
}
