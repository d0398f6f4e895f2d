//! Names of the objects the `kubernetes` backend keeps for one state: the
//! base Secret, its chunks and its lock Lease. The manager grants a runner
//! exactly these names and the runner's state proxy serves exactly these, so
//! both read them from here.

/// The workspace every CAPTF root module uses.
pub const WORKSPACE: &str = "default";

/// Most Secrets one state may span, the base one included. Terraform's
/// backend splits the gzip-compressed state into 1 MiB chunks
/// (`<base>-part-N`); eight of them hold 8 MiB of compressed state, far
/// beyond any module's, and keep a runner's grant to a short, fixed list.
pub const STATE_SECRETS_MAX: usize = 8;

/// The base state Secret: `tfstate-default-<suffix>`.
pub fn state_secret(suffix: &str) -> String {
    format!("tfstate-{WORKSPACE}-{suffix}")
}

/// The Secret of chunk `index` (0 is the base Secret).
pub fn state_chunk(suffix: &str, index: usize) -> String {
    match index {
        0 => state_secret(suffix),
        n => format!("{}-part-{n}", state_secret(suffix)),
    }
}

/// Every Secret name the backend may write for the state, base first.
pub fn state_secrets(suffix: &str) -> Vec<String> {
    (0..STATE_SECRETS_MAX)
        .map(|i| state_chunk(suffix, i))
        .collect()
}

/// The lock Lease: `lock-tfstate-default-<suffix>`.
pub fn state_lock_lease(suffix: &str) -> String {
    format!("lock-{}", state_secret(suffix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_what_both_backends_write() {
        // OpenTofu's and Terraform's backend name the Secret
        // tfstate-<workspace>-<suffix>, Terraform's chunks <that>-part-N, and
        // the lock lock-<secret>.
        let s = "0123456789abcdef-mp";
        assert_eq!(state_secret(s), "tfstate-default-0123456789abcdef-mp");
        assert_eq!(
            state_chunk(s, 3),
            "tfstate-default-0123456789abcdef-mp-part-3"
        );
        assert_eq!(
            state_lock_lease(s),
            "lock-tfstate-default-0123456789abcdef-mp"
        );
        let all = state_secrets(s);
        assert_eq!(all.len(), STATE_SECRETS_MAX);
        assert_eq!(all[0], state_secret(s));
        assert_eq!(
            all.last().unwrap(),
            &format!("{}-part-{}", state_secret(s), STATE_SECRETS_MAX - 1)
        );
    }
}
