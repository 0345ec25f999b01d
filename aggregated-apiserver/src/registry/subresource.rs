//! Subresources a kind serves with its own code, beyond status and scale: a
//! read that streams, as `pods/log` does. The library routes, authorizes (as
//! `<plural>/<name>`), audits and lists them in discovery; the kind's
//! function answers.
//!
//! A stream is long-running, as a watch is: no request deadline, a slot of
//! the watches' cap instead of the in-flight limits, and it ends when the
//! server shuts down.

use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;

use k8s_openapi::api::authentication::v1::UserInfo;

use crate::apimachinery::resource::Verb;

/// What a streaming subresource's function answers: a body of this content
/// type, sent as it comes (chunked), or a `Status` refusing the request.
pub type StreamResult = Result<Streamed, kube::core::Status>;

/// The function that serves a streaming subresource.
pub type StreamFn = dyn Fn(SubresourceRequest) -> BoxFuture<'static, StreamResult> + Send + Sync;

/// A subresource a kind serves with its own function.
///
/// ```
/// use aggregated_apiserver::{Streamed, Subresource};
/// use futures::StreamExt as _;
///
/// // `<plural>/<name>/hello` streams a greeting, line by line.
/// let hello = Subresource::stream("hello", |request| async move {
///     let lines = ["hello\n".to_string(), format!("{}\n", request.object["metadata"]["name"])];
///     let body = futures::stream::iter(lines).map(|line| Ok(line.into()));
///     Ok(Streamed { content_type: "text/plain".into(), body: body.boxed() })
/// });
/// assert_eq!(hello.name, "hello");
/// ```
#[derive(Clone)]
pub struct Subresource {
    /// Its name in a path: `<plural>/<name>/<subresource>`.
    pub name: &'static str,
    /// The kind discovery says it answers with (`group`, `version`, `kind`):
    /// the kind's own unless said otherwise (`pods/log` names Pod).
    pub response_kind: Option<(&'static str, &'static str, &'static str)>,
    pub(crate) verbs: &'static [Verb],
    pub(crate) serve: Arc<StreamFn>,
}

impl Subresource {
    /// A read that streams (verb `get`), answered by `serve`.
    pub fn stream<F, Fut>(name: &'static str, serve: F) -> Self
    where
        F: Fn(SubresourceRequest) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = StreamResult> + Send + 'static,
    {
        let serve: Arc<StreamFn> = Arc::new(move |request| Box::pin(serve(request)));
        Self { name, response_kind: None, verbs: &[Verb::Get], serve }
    }

    /// Discovery names `kind` of `group`/`version` as what it answers with.
    pub fn answering(mut self, group: &'static str, version: &'static str, kind: &'static str) -> Self {
        self.response_kind = Some((group, version, kind));
        self
    }
}

/// One request to a kind's subresource, as its function receives it.
#[derive(Debug, Clone)]
pub struct SubresourceRequest {
    /// The object's namespace (empty for a cluster-scoped kind).
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The object, as it is stored now (in the request's version): a
    /// subresource of an object that does not exist is the kind's 404.
    pub object: serde_json::Value,
    /// The query's parameters, decoded, in the order sent.
    pub query: Vec<(String, String)>,
    /// Who asks: the user the request was authenticated (and authorized)
    /// as; no name without authentication.
    pub user: UserInfo,
}

impl SubresourceRequest {
    /// The first value of the query parameter `key`.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// A streamed answer: its content type, and the body as it comes.
pub struct Streamed {
    /// The answer's Content-Type (`text/plain` for a log).
    pub content_type: String,
    /// The body's chunks; an error ends the answer where it stands.
    pub body: BoxStream<'static, Result<Bytes, std::io::Error>>,
}
