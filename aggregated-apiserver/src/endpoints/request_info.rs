//! Classifies a request the way kube-apiserver's RequestInfoFactory does: the
//! verb, group, version, resource, subresource, namespace and name. Routing,
//! metrics and authorization all read this one description.

use std::borrow::Cow;

use http::Method;

use crate::registry::kind::Verb;

/// What a request asks to do: one of the resource verbs, or, for a
/// non-resource request (and a resource path with a method kube gives no
/// verb, such as OPTIONS), its HTTP method in lower case, as kube's
/// RequestInfoFactory names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestVerb {
    Resource(Verb),
    Method(Cow<'static, str>),
}

impl RequestVerb {
    pub fn as_str(&self) -> &str {
        match self {
            Self::Resource(verb) => verb.as_str(),
            Self::Method(method) => method,
        }
    }

    fn of_method(method: &Method) -> Self {
        let lower = match *method {
            Method::GET => "get",
            Method::HEAD => "head",
            Method::POST => "post",
            Method::PUT => "put",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            Method::OPTIONS => "options",
            Method::CONNECT => "connect",
            Method::TRACE => "trace",
            _ => return Self::Method(Cow::Owned(method.as_str().to_ascii_lowercase())),
        };
        Self::Method(Cow::Borrowed(lower))
    }
}

impl Default for RequestVerb {
    fn default() -> Self {
        Self::Method(Cow::Borrowed(""))
    }
}

impl PartialEq<&str> for RequestVerb {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestInfo {
    /// False for discovery, OpenAPI, health and other non-resource paths.
    pub is_resource_request: bool,
    pub verb: RequestVerb,
    pub path: String,
    pub api_group: String,
    pub api_version: String,
    pub namespace: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    /// The path has more segments than any resource path.
    pub extra_segments: bool,
}

fn non_resource(method: &Method, path: &str) -> RequestInfo {
    RequestInfo { verb: RequestVerb::of_method(method), path: path.to_string(), ..Default::default() }
}

/// Whether the query asks for a watch: its first `watch` value read as the
/// parameter codec reads booleans (only "0" and any case of "false" are
/// false; `TRUE`, `T`, `yes` and an empty value are true). The handler decodes
/// ListOptions with the same function, so the verb authorized is the verb
/// served.
pub fn query_watch(query: Option<&str>) -> bool {
    // An unparsable query is refused later by the handler; kube's request-info
    // step then still looks at `watch` alone, and so does this.
    let query = crate::apimachinery::options::Query::parse(query).unwrap_or_default();
    query.bool("watch").unwrap_or(false)
}

pub fn classify(method: &Method, path: &str, query: Option<&str>) -> RequestInfo {
    let mut parts: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    // Resource paths are /apis/{group}/{version}/... (the core /api/v1 is not served here).
    if parts.len() < 4 || parts[0] != "apis" {
        return non_resource(method, path);
    }
    let mut info = RequestInfo {
        is_resource_request: true,
        path: path.to_string(),
        api_group: parts[1].to_string(),
        api_version: parts[2].to_string(),
        ..Default::default()
    };
    parts.drain(..3);
    let mut is_watch_path = false;
    if parts.first() == Some(&"watch") {
        is_watch_path = true;
        parts.remove(0);
    }
    if parts.first() == Some(&"namespaces") && parts.len() >= 3 {
        info.namespace = parts[1].to_string();
        parts.drain(..2);
    } else if parts.first() == Some(&"namespaces") && parts.len() == 2 {
        // /namespaces/{name}: the namespace object itself, not served here.
        info.namespace = parts[1].to_string();
    }
    info.resource = parts.first().map(|s| s.to_string()).unwrap_or_default();
    info.name = parts.get(1).map(|s| s.to_string()).unwrap_or_default();
    info.subresource = parts.get(2).map(|s| s.to_string()).unwrap_or_default();
    info.extra_segments = parts.len() > 3;
    let collection = info.name.is_empty();
    info.verb = match *method {
        Method::GET | Method::HEAD if is_watch_path => RequestVerb::Resource(Verb::Watch),
        // Only a collection GET can become a watch through the query
        // (requestinfo.go): a GET of one object with `?watch=true` is a get.
        Method::GET | Method::HEAD if collection && query_watch(query) => RequestVerb::Resource(Verb::Watch),
        Method::GET | Method::HEAD if collection => RequestVerb::Resource(Verb::List),
        Method::GET | Method::HEAD => RequestVerb::Resource(Verb::Get),
        Method::POST => RequestVerb::Resource(Verb::Create),
        Method::PUT => RequestVerb::Resource(Verb::Update),
        Method::PATCH => RequestVerb::Resource(Verb::Patch),
        Method::DELETE if collection => RequestVerb::Resource(Verb::DeleteCollection),
        Method::DELETE => RequestVerb::Resource(Verb::Delete),
        _ => RequestVerb::of_method(method),
    };
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_like_kube() {
        let i = classify(&Method::GET, "/apis/farm.example.com/v1alpha/namespaces/ns/llamas", Some("watch=true"));
        assert_eq!((i.verb.as_str(), i.namespace.as_str(), i.resource.as_str()), ("watch", "ns", "llamas"));
        let i = classify(&Method::PUT, "/apis/farm.example.com/v1alpha/namespaces/ns/llamas/a/status", None);
        assert_eq!((i.verb.as_str(), i.name.as_str(), i.subresource.as_str()), ("update", "a", "status"));
        let i = classify(&Method::DELETE, "/apis/farm.example.com/v1alpha/namespaces/ns/llamas", None);
        assert_eq!(i.verb, "deletecollection");
        let i = classify(&Method::GET, "/apis/farm.example.com/v1alpha/llamas", None);
        assert_eq!((i.verb.as_str(), i.namespace.as_str()), ("list", ""));
        let i = classify(&Method::GET, "/apis/farm.example.com/v1alpha", None);
        assert!(!i.is_resource_request);
        assert!(!classify(&Method::GET, "/healthz", None).is_resource_request);
    }

    #[test]
    fn watch_in_the_query_reads_like_the_parameter_codec() {
        let verb = |q: &str| classify(&Method::GET, "/apis/farm.example.com/v1alpha/llamas", Some(q)).verb;
        for q in ["watch=true", "watch=TRUE", "watch=T", "watch=yes", "watch=", "watch", "watch=1&watch=0"] {
            assert_eq!(verb(q), "watch", "{q}");
        }
        for q in ["watch=false", "watch=FALSE", "watch=False", "watch=0", "watch=0&watch=1", "limit=1"] {
            assert_eq!(verb(q), "list", "{q}");
        }
        let named = classify(&Method::GET, "/apis/farm.example.com/v1alpha/namespaces/n/llamas/a", Some("watch=true"));
        assert_eq!(named.verb, "get");
        let path = classify(&Method::GET, "/apis/farm.example.com/v1alpha/watch/namespaces/n/llamas/a", None);
        assert_eq!((path.verb.as_str(), path.name.as_str()), ("watch", "a"));
    }
}
