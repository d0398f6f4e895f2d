//! Redaction: no secret survives in any of its forms.

use base64::Engine;
use captf_runner::redact::{MASK, Redactor, env_secrets, variable_secrets};
use proptest::prelude::*;
use serde_json::json;

fn json_body(s: &str) -> String {
    let q = serde_json::to_string(s).unwrap();
    q[1..q.len() - 1].to_owned()
}

#[test]
fn env_values_that_look_like_credentials() {
    let env = [
        ("AWS_SECRET_ACCESS_KEY", "short"),
        ("OS_PASSWORD", "pw"),
        ("api_token", "t0k"),
        ("SOME_LONG_VALUE", "0123456789abcdef"),
        ("SHORT", "0123456789abcde"),
        ("HOME", "/captf/work/with/a/long/path"),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("KUBERNETES_SERVICE_HOST", "10.96.0.1.and.more.bytes"),
        ("KUBE_NAMESPACE", "a-very-long-namespace-name"),
        ("EMPTY_TOKEN", ""),
        ("AZURE_CLIENT_CERTIFICATE", "cert"),
        ("GOOGLE_AUTH", "a"),
        ("SESSION_ID", "s"),
        ("MY_PRIVATE", "p"),
        ("CREDENTIALS", "c"),
    ];
    let mut got = env_secrets(env);
    got.sort();
    let mut want = vec![
        "short",
        "pw",
        "t0k",
        "0123456789abcdef",
        "cert",
        "a",
        "s",
        "p",
        "c",
    ];
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn sensitive_variables_and_bootstrap_data() {
    let cloud_init = "#cloud-config\nwrite_files:\n  - content: super-secret-join-token-123\n";
    let b64 = base64::engine::general_purpose::STANDARD.encode(cloud_init);
    let main = json!({"variable": {
        "bootstrap_data": {"type": "string", "sensitive": true},
        "db": {"sensitive": true},
        "region": {}
    }});
    let vars = json!({
        "bootstrap_data": b64,
        "db": {"user": "admin", "passwords": ["p1", "p2"], "port": 5432},
        "region": "eu-frankfurt-1"
    });
    let secrets = variable_secrets(&main, &vars);
    for s in [b64.as_str(), cloud_init, "admin", "p1", "p2"] {
        assert!(secrets.iter().any(|x| x == s), "{s:?} missing");
    }
    assert!(!secrets.iter().any(|x| x == "eu-frankfurt-1"));
    let r = Redactor::new(&secrets);
    // Lines of the decoded data long enough to be specific are hidden one by one.
    let out =
        r.redact("Error: bad line   - content: super-secret-join-token-123\nin eu-frankfurt-1");
    assert_eq!(out, format!("Error: bad line {MASK}\nin eu-frankfurt-1"));
    assert_eq!(r.redact(&b64), MASK);
}

#[test]
fn every_form_is_masked() {
    let secret = "line one <is> long enough\nline two & also long enough";
    let r = Redactor::new([secret]);
    let html = json_body(secret)
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    for text in [
        secret.to_owned(),
        json_body(secret),
        html,
        "line two & also long enough".to_owned(),
    ] {
        let out = r.redact(&format!("before {text} after"));
        assert_eq!(out, format!("before {MASK} after"), "form {text:?}");
    }
}

#[test]
fn overlapping_secrets_leave_nothing_whole() {
    let r = Redactor::new(["abcdef", "defghi"]);
    let out = r.redact("xxabcdefghixx");
    assert!(!out.contains("abcdef") && !out.contains("defghi"), "{out}");
}

#[test]
fn no_secrets_means_no_change() {
    assert_eq!(Redactor::default().redact("hello"), "hello");
    assert_eq!(Redactor::new([""]).redact("hello"), "hello");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn nothing_leaks(
        secrets in prop::collection::vec("[a-zA-Z0-9<>&\"\\\\ \n\t/+=é-]{1,40}", 1..4),
        noise in "[a-zA-Z0-9 \n:{}\"]{0,60}",
        picks in prop::collection::vec((0usize..4, 0usize..4), 1..6),
    ) {
        let r = Redactor::new(&secrets);
        let mut text = noise.clone();
        for (which, form) in &picks {
            let s = &secrets[which % secrets.len()];
            let piece = match form {
                0 => s.clone(),
                1 => json_body(s),
                2 => json_body(s).replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026"),
                _ => s.lines().next().unwrap_or("").to_owned(),
            };
            text.push_str(&piece);
            text.push_str(&noise);
        }
        let out = r.redact(&text);
        for s in &secrets {
            prop_assert!(!out.contains(s.as_str()), "raw {:?} leaked in {:?}", s, out);
            let j = json_body(s);
            prop_assert!(!out.contains(j.as_str()), "json {:?} leaked in {:?}", j, out);
            for line in s.lines().filter(|l| l.trim().len() >= 16) {
                prop_assert!(!out.contains(line), "line {:?} leaked in {:?}", line, out);
            }
        }
    }
}
