//! Impersonation (k8s.io/apiserver `WithImpersonation`): a caller may act as
//! another user with `Impersonate-User`, `Impersonate-Group` (repeatable),
//! `Impersonate-Uid` and `Impersonate-Extra-<key>` headers. Each requested
//! identity is its own SubjectAccessReview for the verb `impersonate` (on
//! `users`, `serviceaccounts`, `groups`, `uids` or `userextras/<key>`); any
//! refusal is kube's 403. Through the aggregator the headers never arrive:
//! kube-apiserver resolves impersonation itself and forwards the result.

use std::collections::BTreeMap;
use std::future::Future;

use super::{answered, passed, waiting, Next, Request};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderName};

use crate::apimachinery::errors::ApiError;
use crate::apimachinery::gofmt::go_struct;
use crate::apimachinery::names::{validate_dns1123_label, validate_dns1123_subdomain};
use crate::auth::authn::{
    request_user, set_request_user, unescape_extra_key, UserInfo, ANONYMOUS_USER, AUTHENTICATED_GROUP,
    UNAUTHENTICATED_GROUP,
};
use crate::auth::authz::{forbidden, Attributes, Authorizer, Decision};

const USER_HEADER: &str = "impersonate-user";
const GROUP_HEADER: &str = "impersonate-group";
const UID_HEADER: &str = "impersonate-uid";
const EXTRA_HEADER_PREFIX: &str = "impersonate-extra-";
/// What every impersonation header's name begins with.
const HEADER_PREFIX: &str = "impersonate-";
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// One identity the caller asks to take on (kube's `ObjectReference` per request).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wanted {
    User(String),
    ServiceAccount { namespace: String, name: String },
    Group(String),
    Extra { key: String, value: String },
    Uid(String),
}

impl Wanted {
    /// The attributes reviewed for it: verb `impersonate` on the identity.
    fn attributes(&self) -> Attributes {
        let (group, version, resource, subresource, namespace, name) = match self {
            Wanted::User(name) => ("", "", "users", "", "", name.as_str()),
            Wanted::ServiceAccount { namespace, name } => {
                ("", "", "serviceaccounts", "", namespace.as_str(), name.as_str())
            }
            Wanted::Group(name) => ("", "", "groups", "", "", name.as_str()),
            Wanted::Extra { key, value } => {
                ("authentication.k8s.io", "v1", "userextras", key.as_str(), "", value.as_str())
            }
            Wanted::Uid(uid) => ("authentication.k8s.io", "v1", "uids", "", "", uid.as_str()),
        };
        Attributes {
            verb: "impersonate".to_string(),
            api_group: group.to_string(),
            api_version: version.to_string(),
            resource: resource.to_string(),
            subresource: subresource.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            path: String::new(),
            resource_request: true,
        }
    }

    /// How Go prints the `ObjectReference` (`%v`), for kube's 400 wording:
    /// `{Kind Namespace Name UID APIVersion ResourceVersion FieldPath}`.
    fn go_object_reference(&self) -> String {
        let (kind, namespace, name, api_version, field_path) = match self {
            Wanted::User(name) => ("User", "", name.as_str(), "", ""),
            Wanted::ServiceAccount { namespace, name } => ("ServiceAccount", namespace.as_str(), name.as_str(), "", ""),
            Wanted::Group(name) => ("Group", "", name.as_str(), "", ""),
            Wanted::Extra { key, value } => ("UserExtra", "", value.as_str(), "authentication.k8s.io/v1", key.as_str()),
            Wanted::Uid(uid) => ("UID", "", uid.as_str(), "authentication.k8s.io/v1", ""),
        };
        // UID and ResourceVersion are always empty here.
        go_struct(&[kind, namespace, name, "", api_version, "", field_path])
    }
}

/// kube's `serviceaccount.SplitUsername`: `system:serviceaccount:<ns>:<name>`
/// with a valid namespace and service account name.
fn service_account(username: &str) -> Option<(String, String)> {
    let rest = username.strip_prefix(SERVICE_ACCOUNT_PREFIX)?;
    let mut parts = rest.split(':');
    let (namespace, name) = (parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let valid = validate_dns1123_label(namespace).is_empty() && validate_dns1123_subdomain(name).is_empty();
    valid.then(|| (namespace.to_string(), name.to_string()))
}

fn header_values<'a>(headers: &'a HeaderMap, name: &str) -> impl Iterator<Item = &'a str> + 'a {
    headers.get_all(name).iter().filter_map(|v| v.to_str().ok())
}

/// kube's `buildImpersonationRequests`: what the headers ask for, in kube's
/// order (user, groups, extras, uid); a 400 when groups, extras or a UID are
/// asked for without a user.
fn wanted(headers: &HeaderMap) -> Result<Vec<Wanted>, ApiError> {
    let mut wanted = Vec::new();
    // Hardly any request impersonates: one pass over the header names tells,
    // where looking each header up costs a hash of its name.
    if !headers.keys().any(|name| name.as_str().starts_with(HEADER_PREFIX)) {
        return Ok(wanted);
    }
    let user = header_values(headers, USER_HEADER).next().filter(|u| !u.is_empty());
    if let Some(user) = user {
        wanted.push(match service_account(user) {
            Some((namespace, name)) => Wanted::ServiceAccount { namespace, name },
            None => Wanted::User(user.to_string()),
        });
    }
    let groups: Vec<Wanted> = header_values(headers, GROUP_HEADER).map(|g| Wanted::Group(g.to_string())).collect();
    let has_groups = !groups.is_empty();
    wanted.extend(groups);
    let mut has_extra = false;
    for name in headers.keys() {
        let Some(raw_key) = name.as_str().strip_prefix(EXTRA_HEADER_PREFIX) else { continue };
        has_extra = true;
        let key = unescape_extra_key(raw_key);
        wanted.extend(
            header_values(headers, name.as_str())
                .map(|value| Wanted::Extra { key: key.clone(), value: value.to_string() }),
        );
    }
    let uid = header_values(headers, UID_HEADER).next().filter(|u| !u.is_empty());
    if let Some(uid) = uid {
        wanted.push(Wanted::Uid(uid.to_string()));
    }
    if (has_groups || has_extra || uid.is_some()) && user.is_none() {
        let list: Vec<String> = wanted.iter().map(Wanted::go_object_reference).collect();
        return Err(ApiError::bad_request(format!("requested [{}] without impersonating a user", list.join(" "))));
    }
    Ok(wanted)
}

/// The user the request continues as (kube's rules for the implied groups).
fn impersonated_user(wanted: &[Wanted], groups_specified: bool) -> UserInfo {
    let mut user = UserInfo::default();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for w in wanted {
        match w {
            Wanted::User(name) => user.name = name.clone(),
            Wanted::ServiceAccount { namespace, name } => {
                user.name = format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}");
                if !groups_specified {
                    user.groups =
                        vec!["system:serviceaccounts".to_string(), format!("system:serviceaccounts:{namespace}")];
                }
            }
            Wanted::Group(group) => user.groups.push(group.clone()),
            Wanted::Extra { key, value } => extra.entry(key.clone()).or_default().push(value.clone()),
            Wanted::Uid(uid) => user.uid = uid.clone(),
        }
    }
    user.extra = extra;
    if user.name != ANONYMOUS_USER {
        if !user.groups.iter().any(|g| g == AUTHENTICATED_GROUP || g == UNAUTHENTICATED_GROUP) {
            user.groups.push(AUTHENTICATED_GROUP.to_string());
        }
    } else if !user.groups.iter().any(|g| g == UNAUTHENTICATED_GROUP) {
        user.groups.push(UNAUTHENTICATED_GROUP.to_string());
    }
    user
}

fn remove_impersonation_headers(headers: &mut HeaderMap) {
    let names: Vec<HeaderName> = headers
        .keys()
        .filter(|n| {
            let n = n.as_str();
            n == USER_HEADER || n == GROUP_HEADER || n == UID_HEADER || n.starts_with(EXTRA_HEADER_PREFIX)
        })
        .cloned()
        .collect();
    for name in names {
        headers.remove(&name);
    }
}

pub fn impersonate<'a, N: Next + 'a>(
    authorizer: &'a Authorizer,
    req: Request,
    next: N,
) -> impl Future<Output = Response> + Send + 'a {
    match wanted(req.headers()) {
        Ok(wanted) if wanted.is_empty() => passed(next.run(req)),
        Ok(wanted) => waiting(async move {
            match impersonated(authorizer, req, wanted).await {
                Ok(req) => next.run(req).await,
                Err(refused) => refused,
            }
        }),
        Err(refused) => answered(refused.into_response()),
    }
}

/// The request as the user it impersonates (`wanted`, from its headers), or the refusal.
async fn impersonated(authorizer: &Authorizer, mut req: Request, wanted: Vec<Wanted>) -> Result<Request, Response> {
    let Some(requestor) = request_user(req.extensions()).cloned() else {
        return Err(ApiError::internal_error("no user found for request").into_response());
    };
    for w in &wanted {
        let attrs = w.attributes();
        // As kube: a review that fails refuses the impersonation like a denial.
        let reason = match authorizer.authorize(&requestor, attrs.view()).await {
            Decision::Allow { .. } => continue,
            Decision::Deny { reason } => reason,
            Decision::Error { message } => {
                tracing::warn!(requestor = %requestor.name, error = %message, "impersonation review failed");
                String::new()
            }
        };
        tracing::debug!(requestor = %requestor.name, wanted = ?w, "impersonation refused");
        return Err(forbidden(&requestor, &attrs, &reason).into_response());
    }
    let groups_specified = req.headers().contains_key(GROUP_HEADER);
    let user = impersonated_user(&wanted, groups_specified);
    tracing::debug!(requestor = %requestor.name, user = %user.name, groups = ?user.groups, "impersonating");
    remove_impersonation_headers(req.headers_mut());
    if let Some(audit) = req.extensions().get::<crate::audit::AuditContext>() {
        audit.set_impersonated_user(&user);
    }
    set_request_user(req.extensions_mut(), std::sync::Arc::new(user));
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn headers_become_one_review_each_in_kubes_order() {
        let h = headers(&[
            ("Impersonate-User", "system:serviceaccount:ns1:robot"),
            ("Impersonate-Group", "devs"),
            ("Impersonate-Group", "ops"),
            ("Impersonate-Extra-Scopes", "a"),
            ("Impersonate-Extra-Scopes", "b"),
            ("Impersonate-Uid", "1234"),
        ]);
        let w = wanted(&h).unwrap();
        assert_eq!(
            w,
            vec![
                Wanted::ServiceAccount { namespace: "ns1".into(), name: "robot".into() },
                Wanted::Group("devs".into()),
                Wanted::Group("ops".into()),
                Wanted::Extra { key: "scopes".into(), value: "a".into() },
                Wanted::Extra { key: "scopes".into(), value: "b".into() },
                Wanted::Uid("1234".into()),
            ]
        );
        let extra = w[3].attributes();
        assert_eq!((extra.resource.as_str(), extra.subresource.as_str()), ("userextras", "scopes"));
        assert_eq!(extra.api_group, "authentication.k8s.io");
        let sa = w[0].attributes();
        assert_eq!(
            (sa.resource.as_str(), sa.namespace.as_str(), sa.name.as_str()),
            ("serviceaccounts", "ns1", "robot")
        );
        let user = impersonated_user(&w, true);
        assert_eq!(user.name, "system:serviceaccount:ns1:robot");
        assert_eq!(user.groups, ["devs", "ops", "system:authenticated"], "given groups replace the SA's own");
        assert_eq!(user.extra["scopes"], ["a", "b"]);
        assert_eq!(user.uid, "1234");
    }

    #[test]
    fn implied_groups_follow_kube() {
        let sa = impersonated_user(&[Wanted::ServiceAccount { namespace: "n".into(), name: "s".into() }], false);
        assert_eq!(sa.groups, ["system:serviceaccounts", "system:serviceaccounts:n", "system:authenticated"]);
        let anon = impersonated_user(&[Wanted::User(ANONYMOUS_USER.into())], false);
        assert_eq!(anon.groups, ["system:unauthenticated"]);
        let explicit =
            impersonated_user(&[Wanted::User("bob".into()), Wanted::Group(UNAUTHENTICATED_GROUP.into())], true);
        assert_eq!(explicit.groups, [UNAUTHENTICATED_GROUP], "no system:authenticated beside system:unauthenticated");
        assert_eq!(
            impersonated_user(&[Wanted::User("system:serviceaccount:UPPER:x".into())], false).name,
            "system:serviceaccount:UPPER:x"
        );
        assert!(service_account("system:serviceaccount:UPPER:x").is_none(), "an invalid namespace is a plain user");
        assert!(service_account("system:serviceaccount:a:b:c").is_none());
    }

    #[test]
    fn groups_without_a_user_are_kubes_400() {
        let err = wanted(&headers(&[("Impersonate-Group", "devs"), ("Impersonate-Uid", "7")])).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "requested [{Group  devs    } {UID  7  authentication.k8s.io/v1  }] without impersonating a user"
        );
        assert!(wanted(&HeaderMap::new()).unwrap().is_empty());
    }
}
