//! Retry delays and schedule jitter: pure arithmetic on durations.

use std::time::Duration;

/// First retry delay after a failure.
pub const RETRY_BASE: Duration = Duration::from_secs(60);
/// Longest retry delay, and the longest any approval wait requeues.
pub const RETRY_MAX: Duration = Duration::from_secs(600);
/// First delay of a health-pending refresh; doubles per pending refresh.
pub const REFRESH_PENDING_INTERVAL: Duration = Duration::from_secs(30);
/// Ceiling of the health-pending refresh delay.
pub const REFRESH_PENDING_CEILING: Duration = Duration::from_secs(300);
/// Spacing of refreshes while a pool's membership converges.
pub const MEMBERSHIP_CONVERGING_INTERVAL: Duration = Duration::from_secs(30);

/// Delay before retrying an op after `failures` consecutive failures since
/// its last success: 1m, 2m, 4m... capped at 10m, and 10m at once when the
/// failures reach the failed-Jobs history limit (a limit of 0 counts as 1).
pub fn retry_delay(failures: u32, failed_limit: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    if failures >= failed_limit.max(1) {
        return RETRY_MAX;
    }
    let doublings = (failures - 1).min(16);
    RETRY_BASE.saturating_mul(1 << doublings).min(RETRY_MAX)
}

/// Delay of the next refresh while health reads pending, after `pending`
/// such refreshes: 30s, 1m, 2m, 4m, then 5m.
pub fn pending_refresh_delay(pending: u32) -> Duration {
    REFRESH_PENDING_INTERVAL
        .saturating_mul(1 << pending.min(16))
        .min(REFRESH_PENDING_CEILING)
}

/// 64-bit FNV-1a.
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Deterministic per-object jitter below a tenth of `interval`, so objects
/// created together spread their periodic Jobs while each keeps a stable
/// rhythm. Zero for an empty UID.
pub fn jitter(uid: &str, interval: Duration) -> Duration {
    let span = (interval / 10).as_nanos();
    if uid.is_empty() || span == 0 {
        return Duration::ZERO;
    }
    let nanos = u128::from(fnv1a_64(uid.as_bytes())) % span;
    Duration::from_nanos(nanos as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: u64 = 60;

    #[test]
    fn retry_delays_follow_the_limit() {
        let cases: &[(u32, &[u64])] = &[
            (0, &[10 * M, 10 * M, 10 * M]),
            (1, &[10 * M, 10 * M, 10 * M]),
            (3, &[M, 2 * M, 10 * M, 10 * M]),
            (5, &[M, 2 * M, 4 * M, 8 * M, 10 * M, 10 * M]),
            (10, &[M, 2 * M, 4 * M, 8 * M, 10 * M, 10 * M]),
        ];
        for (limit, want) in cases {
            let got: Vec<u64> = (1..=want.len() as u32)
                .map(|n| retry_delay(n, *limit).as_secs())
                .collect();
            assert_eq!(&got, want, "limit {limit}");
        }
        assert_eq!(retry_delay(0, 3), Duration::ZERO);
        assert_eq!(retry_delay(u32::MAX, u32::MAX), RETRY_MAX);
    }

    #[test]
    fn pending_refresh_delay_doubles_to_five_minutes() {
        let got: Vec<u64> = (0..7).map(|n| pending_refresh_delay(n).as_secs()).collect();
        assert_eq!(got, [30, 60, 120, 240, 300, 300, 300]);
        assert_eq!(pending_refresh_delay(u32::MAX).as_secs(), 300);
    }

    #[test]
    fn fnv1a_matches_reference_vectors() {
        assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn jitter_is_stable_bounded_and_spread() {
        let interval = Duration::from_secs(3600);
        let uid = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
        assert_eq!(jitter(uid, interval), jitter(uid, interval));
        assert_eq!(jitter("", interval), Duration::ZERO);
        assert_eq!(jitter(uid, Duration::from_nanos(9)), Duration::ZERO);
        let values: std::collections::BTreeSet<Duration> = (0..50)
            .map(|i| jitter(&format!("uid-{i}"), interval))
            .inspect(|j| assert!(*j < interval / 10))
            .collect();
        assert!(
            values.len() > 45,
            "jitter should spread objects: {values:?}"
        );
        assert_eq!(
            jitter("a", Duration::from_secs(10)),
            Duration::from_nanos(0xaf63_dc4c_8601_ec8c % 1_000_000_000)
        );
    }
}
