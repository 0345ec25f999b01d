//! gzip for large answers, as kube-apiserver does (the APIResponseCompression
//! feature, on by default; k8s.io/apiserver `responsewriters`): when the
//! client accepts gzip and an answer is over 128 KiB, it goes out compressed
//! at level 1, the least CPU for a ratio within 1.1–1.3× of the best, with
//! `Content-Encoding: gzip` and `Vary: Accept-Encoding`. client-go (kubectl,
//! controllers, and the aggregator passing a client's request through) asks
//! for gzip by default, so a large list crosses the network at a fraction
//! of its JSON size.
//!
//! `Vary: Accept-Encoding` is sent with compressed answers only, as kube
//! does: an answer that went out plain to a client that did not ask for gzip
//! says nothing a cache needs (the compression layer itself adds it to every
//! answer it could have compressed).
//!
//! Only answers whose whole length is known are compressed: lists, objects,
//! discovery and OpenAPI. A watch never is; its length is unknown, and every
//! event must reach the client when it happens, not when a compressor has
//! filled a block.

use std::convert::Infallible;

use axum::body::Body;
use axum::response::Response;
use futures::future::{BoxFuture, Either};
use futures::FutureExt;
use http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, VARY};
use http::HeaderValue;
use tower::{Layer, Service};
use tower_http::compression::predicate::Predicate;
use tower_http::compression::{CompressionLayer, CompressionLevel};

use super::Request;

/// kube-apiserver's `defaultGzipThresholdBytes`: smaller answers are sent as
/// they are (compressing them costs more time than it saves).
pub const THRESHOLD_BYTES: u64 = 128 * 1024;

/// An endpoint whose answers are compressed as above: gzip only, level 1,
/// for [`LargeAnswer`]s, `Vary` only on what was compressed.
#[derive(Clone)]
pub struct Compression<E> {
    endpoint: E,
    layer: CompressionLayer<LargeAnswer>,
}

impl<E: Clone> Compression<E> {
    pub fn new(endpoint: E) -> Self {
        let layer = CompressionLayer::new().quality(CompressionLevel::Fastest).compress_when(LargeAnswer);
        Self { endpoint, layer }
    }
}

impl<E> Compression<E>
where
    E: Service<Request, Response = Response, Error = Infallible> + Clone,
{
    /// The endpoint's answer, compressed when it is large and the client
    /// accepts gzip. The answer is made first and only a large one goes
    /// through the compression layer: nearly every client sends
    /// `Accept-Encoding: gzip` (Go's HTTP client does, so the aggregator
    /// does), and the layer wraps every answer's body it is given and boxes
    /// it again.
    ///
    /// The endpoint's future is boxed, the one allocation of the chain's own:
    /// a handler's future nests deep, and inside the chain's it would make
    /// the compiler's layout of the whole go past its default recursion
    /// limit, for every crate that serves with it.
    pub fn serve(&self, req: Request) -> BoxFuture<'static, Response>
    where
        E: Send + 'static,
        E::Future: Send + 'static,
    {
        let accepted = req.headers().get(ACCEPT_ENCODING).cloned();
        let answer = super::infallible(self.endpoint.clone(), req);
        let Some(accepted) = accepted else { return Box::pin(answer) };
        let layer = self.layer.clone();
        // A combinator, not an `async` block: awaiting the answer inside
        // one would hold its future twice, and it is moved into this box on
        // every request (measured: docs/performance.md, "The filter chain and
        // the handler's futures").
        Box::pin(answer.then(move |response| match LargeAnswer.should_compress(&response) {
            false => Either::Left(std::future::ready(response)),
            true => Either::Right(compressed(layer, accepted, response)),
        }))
    }
}

/// `response` through the compression layer, which reads what the client
/// accepts from a request carrying `accepted` alone.
async fn compressed(layer: CompressionLayer<LargeAnswer>, accepted: HeaderValue, response: Response) -> Response {
    let mut response = Some(response);
    // Called once: the layer passes its one request through.
    let answered = tower::service_fn(move |_: Request| {
        std::future::ready(Ok::<_, Infallible>(response.take().unwrap_or_default()))
    });
    let mut request = Request::new(Body::empty());
    request.headers_mut().insert(ACCEPT_ENCODING, accepted);
    vary_only_when_compressed(super::infallible(layer.layer(answered), request).await.map(Body::new))
}

fn vary_only_when_compressed(mut response: Response) -> Response {
    if response.headers().contains_key(CONTENT_ENCODING) {
        return response;
    }
    let headers = response.headers_mut();
    let kept: Vec<HeaderValue> = headers
        .get_all(VARY)
        .iter()
        .filter(|v| !v.as_bytes().eq_ignore_ascii_case(ACCEPT_ENCODING.as_str().as_bytes()))
        .cloned()
        .collect();
    headers.remove(VARY);
    for value in kept {
        headers.append(VARY, value);
    }
    response
}

/// An answer of known length over [`THRESHOLD_BYTES`].
#[derive(Clone, Copy, Debug, Default)]
pub struct LargeAnswer;

impl Predicate for LargeAnswer {
    fn should_compress<B: http_body::Body>(&self, response: &http::Response<B>) -> bool {
        response.body().size_hint().exact().is_some_and(|len| len > THRESHOLD_BYTES)
    }
}
