//! The state proxy's routes, selectors and lists.

use super::*;

fn scope() -> Scope {
    Scope::of_state("team-a", "0123456789abcdef-mp")
}

#[test]
fn only_plain_lists_of_the_namespaces_secrets_are_answered_here() {
    let s = scope();
    let list = |m: Method, p: &str, q: Option<&str>| route(&m, p, q, &s);
    let cases = [
        (
            list(
                Method::GET,
                "/api/v1/namespaces/team-a/secrets",
                Some("labelSelector=tfstate%3Dtrue"),
            ),
            Route::ListState {
                selector: "tfstate=true".into(),
            },
        ),
        (
            list(
                Method::GET,
                "/api/v1/namespaces/team-a/secrets",
                Some("labelSelector=a%3Db%2Cc%3Dd&limit=500"),
            ),
            Route::ListState {
                selector: "a=b,c=d".into(),
            },
        ),
        (
            list(Method::GET, "/api/v1/namespaces/team-a/secrets", None),
            Route::ListState {
                selector: String::new(),
            },
        ),
        // A watch, a single Secret, another namespace, a write, a lease.
        (
            list(
                Method::GET,
                "/api/v1/namespaces/team-a/secrets",
                Some("watch=true"),
            ),
            Route::Forward,
        ),
        (
            list(
                Method::GET,
                "/api/v1/namespaces/team-a/secrets/tfstate-default-x",
                None,
            ),
            Route::Forward,
        ),
        (
            list(Method::GET, "/api/v1/namespaces/team-b/secrets", None),
            Route::Forward,
        ),
        (
            list(Method::POST, "/api/v1/namespaces/team-a/secrets", None),
            Route::Forward,
        ),
        (
            list(
                Method::GET,
                "/apis/coordination.k8s.io/v1/namespaces/team-a/leases",
                None,
            ),
            Route::Forward,
        ),
    ];
    for (i, (got, want)) in cases.into_iter().enumerate() {
        assert_eq!(got, want, "case {i}");
    }
}

#[test]
fn the_base_secret_is_kept_and_its_renumbering_left_out_only_for_routine_runs() {
    let routine = Scope {
        skip_renumbering: true,
        ..scope()
    };
    let base = "/api/v1/namespaces/team-a/secrets/tfstate-default-0123456789abcdef-mp";
    let cases = [
        (&routine, Method::GET, base, None, Route::GetBase),
        (&routine, Method::PUT, base, None, Route::UpdateBase),
        (
            &routine,
            Method::GET,
            base,
            Some("watch=true"),
            Route::Forward,
        ),
        (&routine, Method::DELETE, base, None, Route::Forward),
        // A chunk, and the same Secret for any other run.
        (
            &routine,
            Method::PUT,
            "/api/v1/namespaces/team-a/secrets/tfstate-default-0123456789abcdef-mp-part-1",
            None,
            Route::Forward,
        ),
        (&scope(), Method::PUT, base, None, Route::Forward),
        (&scope(), Method::GET, base, None, Route::Forward),
    ];
    for (i, (s, method, path, query, want)) in cases.into_iter().enumerate() {
        assert_eq!(route(&method, path, query, s), want, "case {i}");
    }
}

#[test]
fn selectors_match_as_the_apiserver_matches_them() {
    let labels: BTreeMap<String, String> = [
        ("tfstate", "true"),
        ("tfstateWorkspace", "default"),
        ("app.kubernetes.io/managed-by", "terraform"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let table = [
        ("", true),
        ("tfstate=true", true),
        ("tfstate==true", true),
        ("tfstate=false", false),
        ("tfstate!=false", true),
        ("tfstate=true,tfstateWorkspace=default", true),
        ("tfstate=true,tfstateWorkspace=other", false),
        ("app.kubernetes.io/managed-by=terraform", true),
        ("tfstate", true),
        ("!tfstate", false),
        ("missing", false),
        ("!missing", true),
    ];
    for (text, want) in table {
        let sel = Selector::parse(text).unwrap();
        assert_eq!(sel.matches(&labels), want, "{text:?}");
    }
    assert!(Selector::parse("env in (a,b)").is_err());
}

#[test]
fn a_list_holds_the_found_secrets_the_selector_accepts() {
    let secret = |name: &str, ws: &str| {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": name, "labels": {"tfstate": "true", "tfstateWorkspace": ws}}})
    };
    let found = vec![
        secret("tfstate-default-x", "default"),
        secret("tfstate-default-x-part-1", "default"),
    ];
    let all = secret_list(found.clone(), &Selector::parse("tfstate=true").unwrap());
    assert_eq!(all["kind"], "SecretList");
    assert_eq!(all["items"].as_array().unwrap().len(), 2);
    assert_eq!(
        all["items"][1]["metadata"]["name"],
        "tfstate-default-x-part-1"
    );
    let none = secret_list(
        found.clone(),
        &Selector::parse("tfstateWorkspace=other").unwrap(),
    );
    assert_eq!(none["items"], json!([]));
    // An unlabeled chunk ends the state: what follows it is not listed.
    let mut broken = found;
    broken.insert(1, json!({"metadata": {"name": "tfstate-default-x-part-1"}}));
    broken[2]["metadata"]["name"] = json!("tfstate-default-x-part-2");
    let listed = secret_list(broken, &Selector::parse("tfstate=true").unwrap());
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
    assert_eq!(listed["items"][0]["metadata"]["name"], "tfstate-default-x");
}

#[test]
fn percent_decoding_reads_what_go_encodes() {
    assert_eq!(percent_decode("a%3Db%2Cc+d"), "a=b,c d");
    assert_eq!(percent_decode("100%"), "100%");
    assert_eq!(percent_decode("%zz"), "%zz");
}
