//! The `authorizer` admission expressions see (webhook `matchConditions`,
//! validating and mutating policies), answered by this server's authorizer:
//! a SubjectAccessReview for the requesting user (or the service account an
//! expression names), through the same cache as every request's
//! authorization. An expression's checks are answered between evaluations
//! ([`crate::apimachinery::cel::authz`]): [`CelAuthorizer::settle`] evaluates
//! again until none is left unanswered.

use std::sync::Arc;

use crate::admission::Attributes;
use crate::apimachinery::cel::authz::{self, Check, Checks, Decision, Subject, Target};
use crate::apimachinery::cel::cel;
use crate::auth::authn::UserInfo;
use crate::auth::authz::{self as server_authz, Authorizer};

/// Evaluations of one expression (or policy) at most: each answers the
/// first unanswered check each of its expressions met, so a round is
/// needed per check along one expression's evaluation (where cel-go
/// would have asked them one after the other). Kube's costs bound those:
/// two per expression or variable within the per-call limit, about 28
/// within a policy's budget.
const MAX_ROUNDS: usize = 32;

/// Answers admission's authorization checks.
#[derive(Clone, Default)]
pub struct CelAuthorizer {
    /// The server's authorizer (or, when it authorizes nothing, one asking
    /// the cluster); None without a cluster, when admission has nothing to
    /// run anyway: every check is then allowed.
    authorizer: Option<Arc<Authorizer>>,
}

/// The checks of one write, and the `authorizer` value expressions see.
pub struct Session {
    pub checks: Arc<Checks>,
    pub value: cel::Value,
}

impl CelAuthorizer {
    pub fn new(authorizer: Option<Arc<Authorizer>>) -> Self {
        Self { authorizer }
    }

    /// A session for one write: `authorizer.requestResource` is its resource.
    pub fn session(&self, attributes: &Attributes<'_>) -> Session {
        let checks = Checks::new();
        let request = Target {
            group: attributes.names.group.to_string(),
            resource: attributes.names.plural.to_string(),
            subresource: attributes.subresource.to_string(),
            namespace: attributes.namespace.to_string(),
            name: attributes.name.to_string(),
            path: String::new(),
            resource_request: true,
        };
        Session { value: authz::authorizer(checks.clone(), request), checks }
    }

    /// Answers the checks an evaluation left pending; whether there were any.
    pub async fn answer(&self, user: &UserInfo, checks: &Checks) -> bool {
        let pending = checks.take_pending();
        if pending.is_empty() {
            return false;
        }
        for check in pending {
            let decision = self.decide(user, &check).await;
            checks.answer(check, decision);
        }
        true
    }

    /// Runs `evaluate` until it meets no unanswered check (or the rounds
    /// run out: the last evaluation's outcome stands, its unanswered checks
    /// as errors).
    pub async fn settle<T>(&self, user: &UserInfo, checks: &Checks, mut evaluate: impl FnMut() -> T) -> T {
        for _ in 1..MAX_ROUNDS {
            let outcome = evaluate();
            if !self.answer(user, checks).await {
                return outcome;
            }
        }
        evaluate()
    }

    /// kube's CEL authz check: the attributes with any API version.
    async fn decide(&self, user: &UserInfo, check: &Check) -> Decision {
        let Some(authorizer) = &self.authorizer else {
            return Decision { allowed: true, ..Default::default() };
        };
        let service_account;
        let subject = match &check.subject {
            Subject::Requester => user,
            Subject::ServiceAccount { namespace, name } => {
                service_account = UserInfo {
                    name: format!("system:serviceaccount:{namespace}:{name}"),
                    groups: vec![
                        "system:serviceaccounts".into(),
                        format!("system:serviceaccounts:{namespace}"),
                        "system:authenticated".into(),
                    ],
                    ..Default::default()
                };
                &service_account
            }
        };
        let t = &check.target;
        let attributes = server_authz::Attributes {
            verb: check.verb.clone(),
            api_group: t.group.clone(),
            api_version: if t.resource_request { "*".into() } else { String::new() },
            resource: t.resource.clone(),
            subresource: t.subresource.clone(),
            namespace: t.namespace.clone(),
            name: t.name.clone(),
            path: t.path.clone(),
            resource_request: t.resource_request,
        };
        match authorizer.authorize(subject, attributes.view()).await {
            server_authz::Decision::Allow { reason } => {
                Decision { allowed: true, reason: reason.to_string(), error: String::new() }
            }
            server_authz::Decision::Deny { reason } => Decision { allowed: false, reason, error: String::new() },
            server_authz::Decision::Error { message } => {
                Decision { allowed: false, reason: String::new(), error: message }
            }
        }
    }
}
