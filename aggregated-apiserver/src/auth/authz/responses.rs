//! What kube-apiserver answers when authorization refuses (403) or fails (500).

use super::{Attributes, User};
use crate::apimachinery::errors::{self, ApiError, Reason};
use crate::apimachinery::gofmt::go_quote;

/// Go's `sanitizer` in responsewriters: nothing in the message may look like HTML.
fn sanitize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// The 500 kube-apiserver sends when authorization fails with an error
/// (`WithAuthorization` -> `responsewriters.InternalError`): `Internal Server
/// Error: "<request URI>": <error>`, sanitized like every message. kube writes
/// it as plain text; here it is the message of a Status with reason
/// InternalError, as every failure of ours is.
pub fn internal_error(request_uri: &str, message: &str) -> ApiError {
    ApiError::new(
        500,
        Reason::InternalError,
        sanitize(&format!("Internal Server Error: {}: {message}", go_quote(request_uri))),
    )
}

/// responsewriters.forbiddenMessage.
fn forbidden_message(user: &User, attrs: &Attributes) -> String {
    let username = go_quote(&user.name);
    if !attrs.resource_request {
        return format!("User {username} cannot {} path {}", attrs.verb, go_quote(&attrs.path));
    }
    let mut resource = attrs.resource.clone();
    if !attrs.subresource.is_empty() {
        resource.push('/');
        resource.push_str(&attrs.subresource);
    }
    let (resource, group) = (go_quote(&resource), go_quote(&attrs.api_group));
    if attrs.namespace.is_empty() {
        format!("User {username} cannot {} resource {resource} in API group {group} at the cluster scope", attrs.verb)
    } else {
        format!(
            "User {username} cannot {} resource {resource} in API group {group} in the namespace {}",
            attrs.verb,
            go_quote(&attrs.namespace)
        )
    }
}

/// The 403 kube-apiserver sends (responsewriters.Forbidden, then
/// apierrors.NewForbidden): e.g. `widgets.example.com "x" is forbidden:
/// User "u" cannot delete resource "widgets" in API group "example.com" in
/// the namespace "ns"`, with `: <reason>` appended when there is a reason.
/// Details carry name, group and kind (the resource), each left out when empty.
pub fn forbidden(user: &User, attrs: &Attributes, reason: &str) -> ApiError {
    let msg = sanitize(&forbidden_message(user, attrs));
    let err = if reason.is_empty() { msg } else { format!("{msg}: {reason}") };
    let (group, resource, name) = (&attrs.api_group, &attrs.resource, &attrs.name);
    let qualified = if group.is_empty() { resource.clone() } else { format!("{resource}.{group}") };
    let message = if group.is_empty() && resource.is_empty() {
        format!("forbidden: {err}")
    } else if name.is_empty() {
        format!("{qualified} is forbidden: {err}")
    } else {
        format!("{qualified} {} is forbidden: {err}", go_quote(name))
    };
    ApiError::new(403, Reason::Forbidden, message).with_details(errors::details(group, resource, name))
}
#[cfg(test)]
mod tests {
    use super::super::tests::{non_res, res, user, GROUP};
    use super::*;
    use serde_json::json;

    // ---- forbidden() ----

    #[test]
    fn forbidden_named_resource_in_namespace() {
        let e = forbidden(&user("u"), &res("delete", "widgets", "", "ns", "x"), "");
        assert_eq!(e.code, 403);
        assert_eq!(e.reason, Reason::Forbidden);
        assert_eq!(
            e.message,
            r#"widgets.example.com "x" is forbidden: User "u" cannot delete resource "widgets" in API group "example.com" in the namespace "ns""#
        );
        assert_eq!(e.status_body()["details"], json!({"name": "x", "group": GROUP, "kind": "widgets"}));
        let body = e.status_body();
        assert_eq!(body["reason"], "Forbidden");
        assert_eq!(body["code"], 403);
    }

    #[test]
    fn forbidden_list_has_no_name() {
        let e = forbidden(&user("u"), &res("list", "widgets", "", "ns", ""), "");
        assert_eq!(
            e.message,
            r#"widgets.example.com is forbidden: User "u" cannot list resource "widgets" in API group "example.com" in the namespace "ns""#
        );
        assert_eq!(e.status_body()["details"], json!({"group": GROUP, "kind": "widgets"}));
    }

    #[test]
    fn forbidden_cluster_scope() {
        let e = forbidden(&user("u"), &res("watch", "widgets", "", "", ""), "");
        assert_eq!(
            e.message,
            r#"widgets.example.com is forbidden: User "u" cannot watch resource "widgets" in API group "example.com" at the cluster scope"#
        );
    }

    #[test]
    fn forbidden_subresource() {
        let e = forbidden(&user("u"), &res("update", "widgets", "status", "ns", "x"), "");
        assert_eq!(
            e.message,
            r#"widgets.example.com "x" is forbidden: User "u" cannot update resource "widgets/status" in API group "example.com" in the namespace "ns""#
        );
        // details name the resource, not the subresource
        assert_eq!(e.status_body()["details"], json!({"name": "x", "group": GROUP, "kind": "widgets"}));
    }

    #[test]
    fn forbidden_core_group() {
        let attrs = res("get", "widgets", "", "ns", "x").view().for_resource("", "pods");
        let e = forbidden(&user("system:serviceaccount:ns:sa"), &attrs, "");
        assert_eq!(
            e.message,
            r#"pods "x" is forbidden: User "system:serviceaccount:ns:sa" cannot get resource "pods" in API group "" in the namespace "ns""#
        );
        assert_eq!(e.status_body()["details"], json!({"name": "x", "kind": "pods"}));
    }

    #[test]
    fn forbidden_non_resource_path() {
        let e = forbidden(&user("u"), &non_res("get", "/apis"), "");
        assert_eq!(e.message, r#"forbidden: User "u" cannot get path "/apis""#);
        assert_eq!(e.status_body()["details"], json!({}));
        assert_eq!(e.status_body()["details"], json!({}));
    }

    #[test]
    fn forbidden_appends_reason() {
        let e = forbidden(&user("u"), &res("list", "widgets", "", "ns", ""), "no RBAC policy matched");
        assert_eq!(
            e.message,
            r#"widgets.example.com is forbidden: User "u" cannot list resource "widgets" in API group "example.com" in the namespace "ns": no RBAC policy matched"#
        );
        let e = forbidden(&user("u"), &non_res("get", "/apis"), "nope");
        assert_eq!(e.message, r#"forbidden: User "u" cannot get path "/apis": nope"#);
    }

    #[test]
    fn forbidden_quotes_and_sanitizes_like_go() {
        // %q escapes quotes; the sanitizer turns &, <, > into entities (not in the reason).
        let e = forbidden(&user("a\"b<c>&"), &non_res("get", "/x\ty"), "<r>");
        assert_eq!(e.message, r#"forbidden: User "a\"b&lt;c&gt;&amp;" cannot get path "/x\ty": <r>"#);
        // an empty user name is quoted as ""
        let e = forbidden(&User::default(), &non_res("get", "/"), "");
        assert_eq!(e.message, r#"forbidden: User "" cannot get path "/""#);
    }

    #[test]
    fn internal_error_in_kubes_words() {
        let e = internal_error(
            "/apis/example.com/v1alpha/namespaces/ns/widgets?limit=5",
            r#"subjectaccessreviews.authorization.k8s.io is forbidden: User "x<y>" cannot create"#,
        );
        assert_eq!(e.code, 500);
        assert_eq!(e.reason, Reason::InternalError);
        assert_eq!(
            e.message,
            r#"Internal Server Error: "/apis/example.com/v1alpha/namespaces/ns/widgets?limit=5": subjectaccessreviews.authorization.k8s.io is forbidden: User "x&lt;y&gt;" cannot create"#
        );
        let body = e.status_body();
        assert_eq!((body["code"].clone(), body["reason"].clone()), (json!(500), json!("InternalError")));
    }
}
