//! Who may read the diagnostics endpoint: the caller's bearer token is
//! checked with a TokenReview, then the user it names with a
//! SubjectAccessReview for `get` on the requested path. This module only
//! decides; the server performs the reviews it asks for.

/// The user a TokenReview authenticated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    pub username: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

/// What the TokenReview said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenOutcome {
    Authenticated(User),
    /// The token is not valid.
    Rejected,
    /// The review could not be made; treated as not authenticated.
    Failed,
}

/// What the SubjectAccessReview said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessOutcome {
    Allowed,
    Denied,
    /// The review could not be made.
    Failed,
}

/// The answer to the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessAnswer {
    Serve,
    /// 401: no usable token.
    Unauthorized,
    /// 403: authenticated but not allowed.
    Forbidden,
    /// 500: the authorization check itself failed.
    AuthorizationError,
}

impl AccessAnswer {
    pub fn status(self) -> u16 {
        match self {
            AccessAnswer::Serve => 200,
            AccessAnswer::Unauthorized => 401,
            AccessAnswer::Forbidden => 403,
            AccessAnswer::AuthorizationError => 500,
        }
    }
}

/// What to do next for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step<'a> {
    ReviewToken(&'a str),
    ReviewAccess(&'a User),
    Answer(AccessAnswer),
}

/// The bearer token of an `Authorization` header value: scheme matched
/// without regard to case, one token, nothing else.
pub fn bearer_token(header: Option<&str>) -> Option<&str> {
    let mut parts = header?.trim().split(' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && parts.next().is_none())
        .then_some(token)
}

/// The next step given what is known so far: the token from the request,
/// and the outcomes of the reviews made.
pub fn next_step<'a>(
    token: Option<&'a str>,
    token_review: Option<&'a TokenOutcome>,
    access_review: Option<AccessOutcome>,
) -> Step<'a> {
    let Some(token) = token else {
        return Step::Answer(AccessAnswer::Unauthorized);
    };
    let user = match token_review {
        None => return Step::ReviewToken(token),
        Some(TokenOutcome::Authenticated(user)) => user,
        Some(TokenOutcome::Rejected | TokenOutcome::Failed) => {
            return Step::Answer(AccessAnswer::Unauthorized);
        }
    };
    match access_review {
        None => Step::ReviewAccess(user),
        Some(AccessOutcome::Allowed) => Step::Answer(AccessAnswer::Serve),
        Some(AccessOutcome::Denied) => Step::Answer(AccessAnswer::Forbidden),
        Some(AccessOutcome::Failed) => Step::Answer(AccessAnswer::AuthorizationError),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_strictly() {
        let cases = [
            (None, None),
            (Some(""), None),
            (Some("Bearer abc"), Some("abc")),
            (Some("bearer abc"), Some("abc")),
            (Some("  BEARER abc  "), Some("abc")),
            (Some("Bearer"), None),
            (Some("Bearer "), None),
            (Some("Basic dXNlcjpwYXNz"), None),
            (Some("Bearer abc def"), None),
            (Some("Bearer  abc"), None),
        ];
        for (header, token) in cases {
            assert_eq!(bearer_token(header), token, "{header:?}");
        }
    }

    /// Token, token review, access review, and the step expected.
    type Case<'a> = (
        Option<&'a str>,
        Option<&'a TokenOutcome>,
        Option<AccessOutcome>,
        Step<'a>,
    );

    #[test]
    fn each_outcome_leads_to_its_step() {
        let user = User {
            username: "system:serviceaccount:ns:sa".into(),
            ..Default::default()
        };
        let ok = TokenOutcome::Authenticated(user.clone());
        let rejected = TokenOutcome::Rejected;
        let failed = TokenOutcome::Failed;
        let cases: Vec<Case<'_>> = vec![
            (None, None, None, Step::Answer(AccessAnswer::Unauthorized)),
            (Some("t"), None, None, Step::ReviewToken("t")),
            (
                Some("t"),
                Some(&rejected),
                None,
                Step::Answer(AccessAnswer::Unauthorized),
            ),
            (
                Some("t"),
                Some(&failed),
                None,
                Step::Answer(AccessAnswer::Unauthorized),
            ),
            (Some("t"), Some(&ok), None, Step::ReviewAccess(&user)),
            (
                Some("t"),
                Some(&ok),
                Some(AccessOutcome::Allowed),
                Step::Answer(AccessAnswer::Serve),
            ),
            (
                Some("t"),
                Some(&ok),
                Some(AccessOutcome::Denied),
                Step::Answer(AccessAnswer::Forbidden),
            ),
            (
                Some("t"),
                Some(&ok),
                Some(AccessOutcome::Failed),
                Step::Answer(AccessAnswer::AuthorizationError),
            ),
        ];
        for (token, review, access, want) in cases {
            assert_eq!(
                next_step(token, review, access),
                want,
                "{token:?} {review:?} {access:?}"
            );
        }
    }

    #[test]
    fn verdicts_map_to_http_statuses() {
        let got: Vec<u16> = [
            AccessAnswer::Serve,
            AccessAnswer::Unauthorized,
            AccessAnswer::Forbidden,
            AccessAnswer::AuthorizationError,
        ]
        .iter()
        .map(|v| v.status())
        .collect();
        assert_eq!(got, [200, 401, 403, 500]);
    }
}
