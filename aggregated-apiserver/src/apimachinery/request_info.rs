//! Classifies a request the way kube-apiserver's RequestInfoFactory does: the
//! verb, group, version, resource, subresource, namespace and name. Routing,
//! metrics and authorization all read this one description.

use std::borrow::Cow;

use http::Method;

use crate::apimachinery::resource::Verb;

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

/// A request as kube's RequestInfoFactory describes it. Its path and parts
/// are pieces of one string, so describing a request (every request is
/// described) makes one allocation, not one a part.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestInfo {
    /// False for discovery, OpenAPI, health and other non-resource paths.
    pub is_resource_request: bool,
    pub verb: RequestVerb,
    /// The path, then any part that is not a piece of it.
    text: String,
    /// Where the path and each part lie in `text` ([`PATH`] and the others).
    spans: [Span; 7],
    /// The path has more segments than any resource path.
    pub extra_segments: bool,
}

/// A part's start and end in [`RequestInfo::text`].
type Span = (u32, u32);

const PATH: usize = 0;
const GROUP: usize = 1;
const VERSION: usize = 2;
const NAMESPACE: usize = 3;
const RESOURCE: usize = 4;
const SUBRESOURCE: usize = 5;
const NAME: usize = 6;

impl RequestInfo {
    fn part(&self, which: usize) -> &str {
        let (start, end) = self.spans[which];
        self.text.get(start as usize..end as usize).unwrap_or_default()
    }

    pub fn path(&self) -> &str {
        self.part(PATH)
    }

    pub fn api_group(&self) -> &str {
        self.part(GROUP)
    }

    pub fn api_version(&self) -> &str {
        self.part(VERSION)
    }

    pub fn namespace(&self) -> &str {
        self.part(NAMESPACE)
    }

    pub fn resource(&self) -> &str {
        self.part(RESOURCE)
    }

    pub fn subresource(&self) -> &str {
        self.part(SUBRESOURCE)
    }

    pub fn name(&self) -> &str {
        self.part(NAME)
    }

    /// A non-resource request for `path`.
    pub fn non_resource(verb: RequestVerb, path: &str) -> Self {
        let mut spans = [(0, 0); 7];
        spans[PATH] = (0, span_end(path.len()));
        Self { verb, text: path.to_string(), spans, ..Default::default() }
    }

    /// A resource request described by its parts (group, version,
    /// namespace, resource, subresource, name), as a record keeps them.
    pub fn resource_request(verb: RequestVerb, path: &str, parts: [&str; 6]) -> Self {
        let mut text = String::with_capacity(path.len() + parts.iter().map(|p| p.len()).sum::<usize>());
        let mut spans = [(0, 0); 7];
        for (span, part) in spans.iter_mut().zip(std::iter::once(path).chain(parts)) {
            let start = span_end(text.len());
            text.push_str(part);
            *span = (start, span_end(text.len()));
        }
        Self { is_resource_request: true, verb, text, spans, extra_segments: false }
    }
}

/// An offset in a request's text as a span holds it. A path longer than 4
/// GiB never reaches here (hyper refuses a head that large).
fn span_end(offset: usize) -> u32 {
    u32::try_from(offset).unwrap_or(u32::MAX)
}

fn non_resource(method: &Method, path: &str) -> RequestInfo {
    RequestInfo::non_resource(RequestVerb::of_method(method), path)
}

/// Whether `path` is a health probe or one of its checks (`/readyz/etcd`):
/// those are never refused for load.
pub fn is_probe_path(path: &str) -> bool {
    ["/healthz", "/livez", "/readyz"]
        .iter()
        .any(|probe| path.strip_prefix(probe).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')))
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

/// The most segments of a path looked at: /apis/{group}/{version}/watch/
/// namespaces/{namespace}/{resource}/{name}/{subresource}, and one more to
/// know there are extra ones.
const MAX_SEGMENTS: usize = 10;

pub fn classify(method: &Method, path: &str, query: Option<&str>) -> RequestInfo {
    // The path's non-empty segments, as spans of it (the first MAX_SEGMENTS;
    // `count` counts them all).
    // A byte loop rather than `split('/')`, whose search for each of a
    // path's eight slashes cost more than the loop does for all of them.
    let mut segments = [(0usize, 0usize); MAX_SEGMENTS];
    let mut count = 0;
    let mut start = 0;
    let slashes = path.bytes().enumerate().filter(|&(_, b)| b == b'/').map(|(i, _)| i);
    for end in slashes.chain(std::iter::once(path.len())) {
        if end > start {
            if let Some(slot) = segments.get_mut(count) {
                *slot = (start, end);
            }
            count += 1;
        }
        start = end + 1;
    }
    let segment = |i: usize| segments.get(i).filter(|_| i < count).and_then(|&(s, e)| path.get(s..e));
    // Resource paths are /apis/{group}/{version}/... (the core /api/v1 is not served here).
    if count < 4 || segment(0) != Some("apis") {
        return non_resource(method, path);
    }
    let mut spans = [(0, 0); 7];
    spans[PATH] = (0, span_end(path.len()));
    let mut take = |which: usize, i: usize| {
        if let Some(&(s, e)) = segments.get(i).filter(|_| i < count) {
            spans[which] = (span_end(s), span_end(e));
        }
    };
    take(GROUP, 1);
    take(VERSION, 2);
    let mut next = 3;
    let is_watch_path = segment(next) == Some("watch");
    if is_watch_path {
        next += 1;
    }
    let left = count - next;
    if segment(next) == Some("namespaces") && left >= 3 {
        take(NAMESPACE, next + 1);
        next += 2;
    } else if segment(next) == Some("namespaces") && left == 2 {
        // /namespaces/{name}: the namespace object itself, not served here.
        take(NAMESPACE, next + 1);
    }
    take(RESOURCE, next);
    take(NAME, next + 1);
    take(SUBRESOURCE, next + 2);
    let info = RequestInfo {
        is_resource_request: true,
        verb: RequestVerb::default(),
        text: path.to_string(),
        spans,
        extra_segments: count - next > 3,
    };
    let collection = info.name().is_empty();
    let verb = match *method {
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
    RequestInfo { verb, ..info }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_like_kube() {
        let i = classify(&Method::GET, "/apis/example.com/v1alpha/namespaces/ns/widgets", Some("watch=true"));
        assert_eq!((i.verb.as_str(), i.namespace(), i.resource()), ("watch", "ns", "widgets"));
        let i = classify(&Method::PUT, "/apis/example.com/v1alpha/namespaces/ns/widgets/a/status", None);
        assert_eq!((i.verb.as_str(), i.name(), i.subresource()), ("update", "a", "status"));
        let i = classify(&Method::DELETE, "/apis/example.com/v1alpha/namespaces/ns/widgets", None);
        assert_eq!(i.verb, "deletecollection");
        let i = classify(&Method::GET, "/apis/example.com/v1alpha/widgets", None);
        assert_eq!((i.verb.as_str(), i.namespace()), ("list", ""));
        let i = classify(&Method::GET, "/apis/example.com/v1alpha", None);
        assert!(!i.is_resource_request);
        assert!(!classify(&Method::GET, "/healthz", None).is_resource_request);
    }

    #[test]
    fn every_part_is_read_from_the_path() {
        fn parts(i: &RequestInfo) -> [&str; 7] {
            [i.path(), i.api_group(), i.api_version(), i.namespace(), i.resource(), i.name(), i.subresource()]
        }
        let path = "/apis/example.com/v1alpha/watch/namespaces/ns/widgets/a/status";
        let i = classify(&Method::GET, path, None);
        assert_eq!(parts(&i), [path, "example.com", "v1alpha", "ns", "widgets", "a", "status"]);
        assert!(!i.extra_segments);
        // Empty segments are skipped.
        let i = classify(&Method::GET, "//apis//g/v1/namespaces/ns/widgets/a/", None);
        assert_eq!(parts(&i)[1..], ["g", "v1", "ns", "widgets", "a", ""]);
        let i = classify(&Method::GET, "/apis/g/v1/namespaces/ns/widgets/a/status/more/and/more/still", None);
        assert_eq!(parts(&i)[3..], ["ns", "widgets", "a", "status"]);
        assert!(i.extra_segments);
        // /namespaces/{name}: the namespace object, with its name as the namespace.
        let i = classify(&Method::GET, "/apis/g/v1/namespaces/ns", None);
        assert_eq!(parts(&i)[3..], ["ns", "namespaces", "ns", ""]);
        let i = classify(&Method::GET, "/apis/g/v1/widgets/\u{e9}t\u{e9}", None);
        assert_eq!(i.name(), "\u{e9}t\u{e9}");
        let i = classify(&Method::GET, "/apis/g", None);
        assert_eq!((i.is_resource_request, i.path(), i.resource()), (false, "/apis/g", ""));
        let rebuilt = RequestInfo::resource_request(
            RequestVerb::Resource(Verb::Get),
            "/apis/g/v1/namespaces/ns/widgets/a",
            ["g", "v1", "ns", "widgets", "", "a"],
        );
        let i = classify(&Method::GET, "/apis/g/v1/namespaces/ns/widgets/a", None);
        assert_eq!(parts(&rebuilt), parts(&i));
        assert_eq!(parts(&RequestInfo::default()), [""; 7]);
    }

    #[test]
    fn watch_in_the_query_reads_like_the_parameter_codec() {
        let verb = |q: &str| classify(&Method::GET, "/apis/example.com/v1alpha/widgets", Some(q)).verb;
        for q in ["watch=true", "watch=TRUE", "watch=T", "watch=yes", "watch=", "watch", "watch=1&watch=0"] {
            assert_eq!(verb(q), "watch", "{q}");
        }
        for q in ["watch=false", "watch=FALSE", "watch=False", "watch=0", "watch=0&watch=1", "limit=1"] {
            assert_eq!(verb(q), "list", "{q}");
        }
        let named = classify(&Method::GET, "/apis/example.com/v1alpha/namespaces/n/widgets/a", Some("watch=true"));
        assert_eq!(named.verb, "get");
        let path = classify(&Method::GET, "/apis/example.com/v1alpha/watch/namespaces/n/widgets/a", None);
        assert_eq!((path.verb.as_str(), path.name()), ("watch", "a"));
    }
}
