//! The benchmark's arithmetic, without any I/O: reading Prometheus text,
//! differences between two scrapes, percentiles, and the report.

use std::collections::BTreeMap;
use std::time::Duration;

/// The requests a refresh Job needs of the manager over the two passes
/// that start it and bookkeep it (see `crates/manager/tests/integration/scale.rs`,
/// where each of them is listed): 13 to start, 11 to bookkeep (a refresh
/// that found nothing writes no new serial, so there is no backup).
pub const REQUESTS_PER_JOB: u64 = 24;

/// One scrape: every sample of the named families, keyed by their labels.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    samples: BTreeMap<String, BTreeMap<String, f64>>,
}

/// Splits `name{labels} value` (labels optional); `None` for comments and
/// lines that do not parse.
fn sample(line: &str) -> Option<(&str, &str, f64)> {
    if line.starts_with('#') || line.trim().is_empty() {
        return None;
    }
    let (head, value) = line.rsplit_once(' ')?;
    let value: f64 = value.trim().parse().ok()?;
    match head.split_once('{') {
        Some((name, labels)) => Some((name, labels.strip_suffix('}')?, value)),
        None => Some((head, "", value)),
    }
}

impl Scrape {
    /// Keeps the samples of `families` from a metrics text.
    pub fn parse(text: &str, families: &[&str]) -> Scrape {
        let mut samples: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
        for (name, labels, value) in text.lines().filter_map(sample) {
            if families.contains(&name) {
                *samples
                    .entry(name.to_owned())
                    .or_default()
                    .entry(labels.to_owned())
                    .or_default() += value;
            }
        }
        Scrape { samples }
    }

    /// The sum of a family's samples whose labels contain every `filter`
    /// (`key="value"` pairs).
    pub fn sum(&self, family: &str, filter: &[&str]) -> f64 {
        self.samples
            .get(family)
            .into_iter()
            .flatten()
            .filter(|(labels, _)| filter.iter().all(|f| labels.contains(f)))
            .map(|(_, v)| v)
            .sum()
    }

    /// A family summed by the values of `keys` (`verb`, `resource`), each
    /// group named `v1 v2`.
    pub fn by(&self, family: &str, keys: &[&str]) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for (labels, v) in self.samples.get(family).into_iter().flatten() {
            let name: Vec<String> = keys.iter().map(|k| label(labels, k)).collect();
            *out.entry(name.join(" ")).or_default() += v;
        }
        out
    }
}

/// The value of `key` in a label set `a="x",b="y"` (empty when absent).
fn label(labels: &str, key: &str) -> String {
    let needle = format!("{key}=\"");
    labels
        .split(',')
        .find_map(|kv| kv.strip_prefix(&needle))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or_default()
        .to_owned()
}

/// `after - before` per group, dropping groups that did not move.
pub fn delta(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, d)| *d > 0.0)
        .collect()
}

/// The `p`-th percentile (0..=100) by nearest rank; `None` when empty.
pub fn percentile(values: &[Duration], p: f64) -> Option<Duration> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort();
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

/// Groups as `name: n` lines, largest first, at most `top` of them.
pub fn top_lines(groups: &BTreeMap<String, f64>, top: usize) -> Vec<String> {
    let mut v: Vec<(&String, &f64)> = groups.iter().collect();
    v.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
    v.into_iter()
        .take(top)
        .map(|(k, n)| format!("{k}: {n:.0}"))
        .collect()
}

/// The converged figures: requests per pool-minute next to the minimum
/// the scheduled Jobs need.
#[derive(Debug, Clone, PartialEq)]
pub struct Converged {
    pub pools: u64,
    pub window: Duration,
    pub requests: f64,
    pub jobs: f64,
}

impl Converged {
    pub fn per_pool_minute(&self) -> f64 {
        (self.requests / self.pools as f64 / (self.window.as_secs_f64() / 60.0)).max(0.0)
    }

    pub fn minimum_per_pool_minute(&self) -> f64 {
        self.jobs * REQUESTS_PER_JOB as f64 / self.pools as f64 / (self.window.as_secs_f64() / 60.0)
    }

    /// Requests over the minimum (1.0 is the minimum itself).
    pub fn ratio(&self) -> f64 {
        let min = self.jobs * REQUESTS_PER_JOB as f64;
        if min == 0.0 {
            if self.requests == 0.0 {
                1.0
            } else {
                f64::INFINITY
            }
        } else {
            self.requests / min
        }
    }
}

/// Kibibytes from a `/proc/<pid>/status` line such as `VmRSS:  4096 kB`.
pub fn status_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP captf_api_requests_total x
# TYPE captf_api_requests_total counter
captf_api_requests_total{verb="LIST",resource="secrets"} 10
captf_api_requests_total{verb="GET",resource="secrets"} 4
captf_api_requests_total{verb="WATCH",resource="jobs"} 2
captf_jobs_total{kind="TerraformMachinePool",op="refresh",result="succeeded"} 7
apiserver_request_total{code="200",resource="secrets",verb="LIST"} 3
apiserver_request_total{code="201",resource="secrets",verb="LIST"} 1
other 5
# EOF
"#;

    #[test]
    fn scrapes_sum_and_group_the_families_asked_for() {
        let s = Scrape::parse(
            TEXT,
            &[
                "captf_api_requests_total",
                "captf_jobs_total",
                "apiserver_request_total",
            ],
        );
        assert_eq!(s.sum("captf_api_requests_total", &[]), 16.0);
        assert_eq!(
            s.sum("captf_api_requests_total", &[r#"resource="secrets""#]),
            14.0
        );
        assert_eq!(s.sum("other", &[]), 0.0, "not asked for");
        let by = s.by("apiserver_request_total", &["verb", "resource"]);
        assert_eq!(by.get("LIST secrets"), Some(&4.0), "codes summed");
        let before = s.by("captf_api_requests_total", &["verb", "resource"]);
        let mut after = before.clone();
        *after.get_mut("LIST secrets").unwrap() += 5.0;
        assert_eq!(
            delta(&before, &after),
            BTreeMap::from([("LIST secrets".to_owned(), 5.0)])
        );
        assert_eq!(
            top_lines(&before, 2),
            vec!["LIST secrets: 10", "GET secrets: 4"]
        );
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let ms = |v: &[u64]| {
            v.iter()
                .map(|m| Duration::from_millis(*m))
                .collect::<Vec<_>>()
        };
        let v = ms(&[50, 10, 40, 20, 30]);
        assert_eq!(percentile(&v, 50.0), Some(Duration::from_millis(30)));
        assert_eq!(percentile(&v, 99.0), Some(Duration::from_millis(50)));
        assert_eq!(percentile(&v, 0.0), Some(Duration::from_millis(10)));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn converged_figures_compare_with_the_jobs_minimum() {
        let c = Converged {
            pools: 10,
            window: Duration::from_secs(120),
            requests: 600.0,
            jobs: 20.0,
        };
        assert_eq!(c.per_pool_minute(), 30.0);
        assert_eq!(c.minimum_per_pool_minute(), 24.0);
        assert!((c.ratio() - 600.0 / 480.0).abs() < 1e-12);
        let idle = Converged {
            requests: 0.0,
            jobs: 0.0,
            ..c.clone()
        };
        assert_eq!(idle.ratio(), 1.0);
    }

    #[test]
    fn memory_from_proc_status() {
        let status = "Name:\tmanager\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\n";
        assert_eq!(status_kib(status, "VmRSS"), Some(40960));
        assert_eq!(status_kib(status, "VmHWM"), Some(51200));
        assert_eq!(status_kib(status, "VmSwap"), None);
    }
}
