//! Auditing on the request path, split where k8s.io/apiserver splits it
//! (`DefaultBuildHandlerChain`):
//!
//! - [`audit`], early in the chain (kube's `WithAuditInit` with the response
//!   half of `WithAudit`): takes the request's audit ID from the aggregator's
//!   `Audit-ID` header (or makes one), echoes it on the response, starts the
//!   request's [`AuditContext`], and records how the request ended: the code,
//!   ResponseStarted for watches, ResponseComplete when the handler answers
//!   with a body that is all there (once the last byte of a streamed body is
//!   handed on), Panic when the handler panicked. A request refused
//!   before the policy was evaluated (failed authentication, a bad
//!   `?timeout=`) is recorded as kube's `withFailedRequestAudit` records it:
//!   the policy evaluated without a user, one ResponseStarted event.
//! - [`evaluate_policy`], right after authentication, where kube's `WithAudit`
//!   sits: the policy is evaluated for the authenticated user (before
//!   impersonation), RequestReceived is written, and the request body is
//!   kept as the handler reads it when the event records it.
//!
//! Deadlines (504) and the filters' refusals are inside [`audit`], so their
//! answers are recorded like any other. Without an auditor neither is in the
//! chain: the request-info filter echoes an `Audit-ID` the request carried
//! ([`echo`]) and that is all, no ID is made, nothing allocated or locked.
//! kube makes an ID for every request even with auditing off; nobody can
//! join logs that are not written.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use chrono::Utc;
use futures::future::{BoxFuture, Either, Ready};
use futures::FutureExt;
use http::{header, HeaderName, HeaderValue};
use http_body::{Body as _, Frame, SizeHint};

use crate::apimachinery::errors::ApiError;
use crate::apimachinery::request_info::{RequestInfo, RequestVerb};
use crate::apimachinery::resource::Verb;
use crate::apimachinery::uid::new_uid;
use crate::audit::context::{Arrival, Captured, Pending};
use crate::audit::ticket::Ticket;
use crate::audit::{AuditContext, Auditor, Level, Stage, HEADER_AUDIT_ID};
use crate::auth::authn::peer::Peer;
use crate::auth::authn::shared_request_user;

use super::{answered, passed, waiting, Next, Request};

/// Largest answer read whole to record a refusal made before the policy was evaluated.
const MAX_REFUSAL_BYTES: usize = 1 << 20;

/// The `Audit-ID` a request came with, if any.
pub fn sent_audit_id(req: &Request) -> Option<HeaderValue> {
    req.headers().get(AUDIT_ID).filter(|v| !v.is_empty()).cloned()
}

/// The header by its parsed name: looked up by a string, the name would be
/// parsed again for each lookup.
const AUDIT_ID: HeaderName = HeaderName::from_static(HEADER_AUDIT_ID);

/// The [`audit`](self) filter: the request's record started, the rest of
/// the chain run, its answer recorded.
///
/// Not an `async fn`, as the other filters ([`super::Filtered`]): as one,
/// its future would hold the request beside the chain's future it is moved
/// into, and its answer's states beside both, boxed for every audited
/// request at a size past glibc's per-thread cache (measured:
/// docs/performance.md, "The audit filter").
pub fn audit<'a, N: Next + 'a>(
    auditor: &'a Arc<Auditor>,
    mut req: Request,
    next: N,
) -> impl Future<Output = Response> + Send + 'a {
    // Kept as sent (kube neither checks nor shortens it).
    let id = sent_audit_id(&req).unwrap_or_else(new_audit_id);
    let record = started(auditor, &mut req, &id);
    // Dropped before the answer (the client went away), the request is
    // recorded as closed early.
    let unanswered = Unanswered(record.as_ref().map(|(ctx, _)| ctx.clone()));
    // The filters inside run their first steps as the chain is built: a
    // panic there is the request's too.
    let handling = match std::panic::catch_unwind(AssertUnwindSafe(move || next.run(req))) {
        Ok(handling) => Either::Left(AssertUnwindSafe(handling).catch_unwind()),
        Err(panic) => Either::Right(futures::future::ready(Err(panic))),
    };
    handling.then(move |answer| {
        unanswered.answered();
        match answer {
            Ok(resp) => recorded(resp, record, id),
            Err(panic) => {
                if let Some((ctx, _)) = record {
                    if let Some(pending) = ctx.panicked_now(&super::recovery::panic_message(&*panic)) {
                        spawn(async move {
                            pending.process().await;
                        });
                    }
                }
                // The recovery filter outside answers it, as kube's re-panics to its own.
                std::panic::resume_unwind(panic)
            }
        }
    })
}

/// The answer, recorded and carrying the request's audit ID; what has to
/// wait for a backend as a future.
fn recorded(
    resp: Response,
    record: Option<(AuditContext, bool)>,
    id: HeaderValue,
) -> Either<Ready<Response>, BoxFuture<'static, Response>> {
    let echoed = move |mut resp: Response| {
        echo(&mut resp, id);
        resp
    };
    let Some((ctx, long_running)) = record else {
        return Either::Left(futures::future::ready(echoed(resp)));
    };
    let Some(received) = ctx.take_received_unwritten() else {
        return match record_now(ctx, resp, long_running) {
            Ok(resp) => Either::Left(futures::future::ready(echoed(resp))),
            Err(recording) => Either::Right(Box::pin(recording.map(echoed))),
        };
    };
    // A read whose RequestReceived waited for its answer ([`evaluate_policy`]):
    // the two events are awaited together, RequestReceived first (should
    // it be its group's writer).
    let refusal = ctx.clone();
    let recording = record_now(ctx, resp, long_running);
    Either::Right(Box::pin(async move {
        let stored = received.wait().await;
        let resp = match recording {
            Ok(resp) => resp,
            Err(recording) => recording.await,
        };
        echoed(if stored { resp } else { unstored(&refusal) })
    }))
}

/// The request's record, started and put in its extensions, and whether
/// the request is long-running; None when the policy records nothing of it
/// whoever asks.
fn started(auditor: &Arc<Auditor>, req: &mut Request, id: &HeaderValue) -> Option<(AuditContext, bool)> {
    let unknown = RequestInfo::default();
    let info = req.extensions().get::<RequestInfo>().unwrap_or(&unknown);
    let config = auditor.evaluate_early(info);
    if config.is_some_and(|c| c.level == Level::None) {
        auditor.metrics().level(Level::None);
        return None;
    }
    let long_running = super::is_long_running(info);
    let arrival = Arrival {
        audit_id: id.clone(),
        received: Utc::now(),
        headers: req.headers(),
        uri: req.uri(),
        peer: req.extensions().get::<Peer>().and_then(Peer::remote),
        info,
        config,
    };
    let ctx = AuditContext::new(auditor.clone(), arrival);
    req.extensions_mut().insert(ctx.clone());
    Some((ctx, long_running))
}

/// A new audit ID: a new UID, written without the formatter.
fn new_audit_id() -> HeaderValue {
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    let text = new_uid().hyphenated().encode_lower(&mut text);
    // A UUID is always a valid header value.
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static("00000000-0000-0000-0000-000000000000"))
}

/// Sets the response's `Audit-ID` unless something inside already did (kube: an
/// aggregated server's own answer keeps its ID).
///
/// Marked sensitive, which only tells HTTP/2's header compression not to keep
/// it: every response's ID is new, so keeping each in the connection's table
/// would evict the entries that do repeat, and finding where to put it walks
/// the IDs kept before, on every request the aggregator sends (measured:
/// docs/performance.md, "The audit filter").
pub fn echo(resp: &mut Response, mut id: HeaderValue) {
    id.set_sensitive(true);
    resp.headers_mut().entry(AUDIT_ID).or_insert(id);
}

/// Records the answer and, when the event keeps it, wraps its body; what has
/// to wait (a refusal's body read, a backend that waits) as a future.
fn record_now(ctx: AuditContext, resp: Response, long_running: bool) -> Result<Response, BoxFuture<'static, Response>> {
    let code = resp.status().as_u16();
    let level = match ctx.level() {
        Some(level) => level,
        None => return Err(Box::pin(refused_early(ctx, resp))),
    };
    if level == Level::None {
        return Ok(resp);
    }
    let keep = ctx.wants_response_body(code, long_running);
    responded(&ctx, &resp, keep);
    if long_running {
        if let Err(pending) = ctx.process_now(Stage::ResponseStarted) {
            return Err(Box::pin(async move {
                pending.process().await;
                kept(ctx, resp, keep)
            }));
        }
    }
    if !keep && !long_running && resp.body().size_hint().exact().is_some() {
        return complete_answered(ctx, resp);
    }
    Ok(kept(ctx, resp, keep))
}

/// ResponseComplete for an answer whose body is all there (an object, a
/// list, a Status: every answer but a watch's and a compressed stream's),
/// written as the handler hands it on: where kube writes it, once the handler
/// has written its answer, and without a wrapper around the body to see it
/// end (which costs a box and more: docs/performance.md, "The audit filter").
fn complete_answered(ctx: AuditContext, resp: Response) -> Result<Response, BoxFuture<'static, Response>> {
    match ctx.complete_now(None) {
        None => Ok(resp),
        Some(pending) => Err(Box::pin(async move {
            pending.process().await;
            resp
        })),
    }
}

/// The answer, its end recorded (and its body kept when `keep`).
fn kept(ctx: AuditContext, resp: Response, keep: bool) -> Response {
    resp.map(|body| Body::new(AuditedBody { inner: body, ctx: Some(ctx), captured: keep.then(Captured::default) }))
}

/// A request answered before the policy was evaluated (kube's `withFailedRequestAudit`).
async fn refused_early(ctx: AuditContext, resp: Response) -> Response {
    if ctx.evaluate(None, &ctx.request_info()).level == Level::None {
        return resp;
    }
    responded(&ctx, &resp, true);
    let (parts, body) = resp.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_REFUSAL_BYTES).await {
        Ok(bytes) => bytes,
        Err(e) => return ApiError::internal_error(format!("reading an answer: {e}")).into_response(),
    };
    ctx.refused(&bytes).await;
    Response::from_parts(parts, Body::from(bytes))
}

/// The answer's code, and how its body is encoded when the body is kept.
fn responded(ctx: &AuditContext, resp: &Response, keep: bool) {
    // Looked up only for a body that is kept.
    let text = |name: header::HeaderName| keep.then(|| resp.headers().get(name)?.to_str().ok()).flatten();
    ctx.responded(resp.status().as_u16(), text(header::CONTENT_TYPE), text(header::CONTENT_ENCODING));
}

/// Policy evaluation and RequestReceived, right after authentication.
///
/// A request that only reads (get, list; not a watch) whose RequestReceived
/// is queued in a group of the log's ([`crate::audit::group`]) has its
/// handler run once before the event is awaited: answered at once (a read of
/// the memory store), the event is left queued and awaited with the
/// request's ResponseComplete, so that the request waits once for both,
/// written together (a second wait cost a GET about as much as its whole
/// ResponseComplete event: docs/performance.md, "A read's two events, one wait"). Not
/// answered at once, the event is awaited before the handler goes on. Either
/// way the answer goes out only once RequestReceived is written, and
/// `blocking-strict` refuses it when it could not be, as it refuses a
/// request before its handler runs: a read changes nothing that a refusal
/// after its first step would have to undo. A request that may change
/// something waits for its event before its handler runs, as kube's does.
pub fn evaluate_policy<'a, N: Next + 'a>(req: Request, next: N) -> impl Future<Output = Response> + Send + 'a {
    match received(req) {
        Received::Now(Ok(req)) => passed(next.run(req)),
        Received::Now(Err(refused)) => answered(refused),
        Received::Writing { pending, ctx, req } => waiting(async move {
            match pending.process().await {
                true => next.run(with_body_kept(&ctx, req)).await,
                false => unstored(&ctx),
            }
        }),
        Received::Reading { ticket, ctx, req } => waiting(async move {
            let mut handling = std::pin::pin!(next.run(with_body_kept(&ctx, req)));
            match futures::poll!(handling.as_mut()) {
                Poll::Ready(resp) => {
                    ctx.defer_received(ticket);
                    resp
                }
                Poll::Pending => match ticket.wait().await {
                    true => handling.await,
                    false => unstored(&ctx),
                },
            }
        }),
    }
}

/// A request after its policy step: the request, once its RequestReceived
/// event is written (its body kept when the event records it), or the refusal
/// of a backend that failed; or the event still being written, for a request
/// that reads only as a group's line ([`evaluate_policy`]).
enum Received {
    Now(Result<Request, Response>),
    Writing { pending: Pending, ctx: AuditContext, req: Request },
    Reading { ticket: Ticket, ctx: AuditContext, req: Request },
}

/// Whether the request only reads and is answered once (get, list): its
/// handler may run before its RequestReceived is written.
fn only_reads(info: &RequestInfo) -> bool {
    match &info.verb {
        RequestVerb::Resource(verb) => matches!(verb, Verb::Get | Verb::List),
        RequestVerb::Method(method) => method == "get",
    }
}

fn received(req: Request) -> Received {
    let Some(ctx) = req.extensions().get::<AuditContext>().cloned() else {
        return Received::Now(Ok(req));
    };
    let unknown = RequestInfo::default();
    let info = req.extensions().get::<RequestInfo>().unwrap_or(&unknown);
    let config = ctx.evaluate(shared_request_user(req.extensions()), info);
    if config.level == Level::None {
        return Received::Now(Ok(req));
    }
    let reads = only_reads(info);
    match ctx.process_now(Stage::RequestReceived) {
        Ok(true) => Received::Now(Ok(with_body_kept(&ctx, req))),
        Ok(false) => Received::Now(Err(unstored(&ctx))),
        Err(Pending::Queued(ticket)) if reads => Received::Reading { ticket, ctx, req },
        Err(pending) => Received::Writing { pending, ctx, req },
    }
}

/// A request refused because its RequestReceived event could not be written
/// (only a blocking-strict backend reports a failure).
fn unstored(ctx: &AuditContext) -> Response {
    ctx.rejected();
    ApiError::internal_error("failed to store audit event").into_response()
}

/// The request, its body kept as the handler reads it when the event records it.
fn with_body_kept(ctx: &AuditContext, req: Request) -> Request {
    if !ctx.wants_request_body() {
        return req;
    }
    ctx.start_request_body();
    let ctx = ctx.clone();
    req.map(|body| Body::new(KeptBody { inner: body, ctx }))
}

/// Completes the event of a request whose handler was dropped before it
/// answered (the client went away): kube fakes a 200 "Connection closed
/// early" for a handler that wrote nothing, and so does this.
struct Unanswered(Option<AuditContext>);

impl Unanswered {
    fn answered(mut self) {
        self.0 = None;
    }
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        if let Some(ctx) = self.0.take() {
            spawn(async move { ctx.closed_early().await });
        }
    }
}

fn spawn(task: impl std::future::Future<Output = ()> + Send + 'static) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(task);
    }
}

/// The request body, copied into the request's record as the handler reads it.
struct KeptBody {
    inner: Body,
    ctx: AuditContext,
}

impl http_body::Body for KeptBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let frame = std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if let Some(data) = frame.as_ref().and_then(|f| f.as_ref().ok()).and_then(Frame::data_ref) {
            self.ctx.request_chunk(data);
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The response body: kept when the event records it; its end (or its
/// drop, when the client goes away) writes ResponseComplete.
struct AuditedBody {
    inner: Body,
    ctx: Option<AuditContext>,
    captured: Option<Captured>,
}

impl AuditedBody {
    /// ResponseComplete, written here where the body ends when the backend
    /// finishes at once (the log, the batch buffer); a task of its own for
    /// it would cost an allocation, a second scheduling and, mostly, a
    /// wake-up of the other worker thread (measured: docs/performance.md,
    /// "The audit filter"). A backend that does wait (a blocking webhook's
    /// POST) goes on in a task.
    fn finish(&mut self) {
        if let Some(ctx) = self.ctx.take() {
            let bytes = self.captured.take().and_then(|c| c.bytes());
            if let Some(pending) = ctx.complete_now(bytes) {
                spawn(async move {
                    pending.process().await;
                });
            }
        }
    }
}

impl http_body::Body for AuditedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let frame = std::task::ready!(Pin::new(&mut this.inner).poll_frame(cx));
        match &frame {
            Some(Ok(f)) => {
                if let (Some(data), Some(captured)) = (f.data_ref(), this.captured.as_mut()) {
                    captured.push(data);
                }
            }
            Some(Err(_)) | None => this.finish(),
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for AuditedBody {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use axum::routing::get;
    use axum::Router;

    use super::*;
    use crate::audit::backend::Backend;
    use crate::audit::group::tests::{blocking, Writes};
    use crate::audit::metrics::AuditMetrics;
    use crate::audit::options::Mode;
    use crate::audit::policy::PolicyEvaluator;
    use crate::audit::Event;

    /// Keeps every event; fails them all when `fail`.
    #[derive(Default)]
    struct Collect {
        events: Mutex<Vec<Event>>,
        fail: bool,
    }

    #[async_trait::async_trait]
    impl Backend for Collect {
        async fn process_events(&self, events: &[Arc<Event>]) -> bool {
            self.events.lock().unwrap().extend(events.iter().map(|e| (**e).clone()));
            !self.fail
        }
    }

    const POLICY: &[u8] = br#"{"apiVersion":"audit.k8s.io/v1","kind":"Policy","rules":[
        {"level":"None","nonResourceURLs":["/healthz"]},
        {"level":"RequestResponse"}]}"#;

    async fn serve(backend: Arc<Collect>, req: http::Request<Body>) -> (Response, AuditMetrics) {
        serve_on(backend, POLICY, req).await
    }

    /// At Metadata, both stages.
    const METADATA: &[u8] = br#"{"apiVersion":"audit.k8s.io/v1","kind":"Policy","rules":[{"level":"Metadata"}]}"#;

    async fn serve_on(backend: Arc<dyn Backend>, policy: &[u8], req: http::Request<Body>) -> (Response, AuditMetrics) {
        let metrics = AuditMetrics::default();
        let auditor = Arc::new(Auditor::new(PolicyEvaluator::from_bytes(policy).unwrap(), backend, metrics.clone()));
        let things = "/apis/g/v1/namespaces/ns/things";
        let endpoint = Router::new()
            .route(
                &format!("{things}/boom"),
                get(|| async {
                    if true {
                        panic!("boom");
                    }
                    "unreached"
                }),
            )
            .route(
                &format!("{things}/after-a-turn"),
                get(|| async {
                    tokio::task::yield_now().await;
                    "answered"
                }),
            )
            .route(
                &format!("{things}/slow"),
                get(|| async {
                    std::future::pending::<()>().await;
                    "never"
                }),
            )
            .route(
                things,
                get(|| async { "[]" }).post(|req: Request| async move {
                    if let Some(audit) = req.extensions().get::<crate::audit::AuditContext>() {
                        audit.add_annotation("example.com/checked", "yes");
                        audit.add_annotation("example.com/checked", "no");
                    }
                    let body = axum::body::to_bytes(req.into_body(), 1 << 20).await.unwrap_or_default();
                    (http::StatusCode::CREATED, [(header::CONTENT_TYPE, "application/json")], body)
                }),
            )
            .route("/healthz", get(|| async { "ok" }));
        let endpoint = |req| super::super::infallible(endpoint, req);
        let resp = super::super::recovery::recover(req, |req| {
            super::super::request_info(req, |req| audit(&auditor, req, |req| evaluate_policy(req, endpoint)))
        })
        .await;
        (resp, metrics)
    }

    async fn events_until(backend: &Collect, n: usize) -> Vec<Event> {
        for _ in 0..200 {
            let events = backend.events.lock().unwrap().clone();
            if events.len() >= n {
                return events;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("fewer than {n} events: {:?}", backend.events.lock().unwrap());
    }

    fn stages(events: &[Event]) -> Vec<Stage> {
        events.iter().map(|e| e.stage).collect()
    }

    #[tokio::test]
    async fn a_request_is_recorded_with_its_annotations_and_bodies() {
        let backend = Arc::new(Collect::default());
        let req = http::Request::post("/apis/g/v1/namespaces/ns/things?dryRun=All")
            .header("Audit-ID", "id-1")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::USER_AGENT, "test/1.0")
            .header("X-Forwarded-For", "10.1.2.3")
            .body(Body::from(r#"{"metadata":{"name":"t","managedFields":[]}}"#))
            .unwrap();
        let (resp, metrics) = serve(backend.clone(), req).await;
        assert_eq!(resp.status(), 201);
        assert_eq!(resp.headers()["audit-id"], "id-1");
        let _ = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
        let events = events_until(&backend, 2).await;
        assert_eq!(stages(&events), [Stage::RequestReceived, Stage::ResponseComplete]);
        let done = &events[1];
        assert_eq!((done.audit_id.as_str(), done.verb.as_str()), ("id-1", "create"));
        assert_eq!(done.request_uri, "/apis/g/v1/namespaces/ns/things?dryRun=All");
        assert_eq!(done.source_ips, ["10.1.2.3"], "no peer address in this test");
        assert_eq!(done.user_agent, "test/1.0");
        assert_eq!(done.object_ref.as_ref().map(|r| r.name.as_str()), Some("t"));
        assert_eq!(
            done.annotations.get("example.com/checked").map(String::as_str),
            Some("yes"),
            "the first value wins"
        );
        let object = serde_json::json!({"metadata": {"name": "t", "managedFields": []}});
        assert_eq!(done.request_object.as_ref(), Some(&object));
        assert_eq!(done.response_object.as_ref(), Some(&object));
        assert_eq!(done.response_status.as_ref().and_then(|s| s.code), Some(201));
        assert!(done.stage_timestamp >= done.request_received_timestamp);
        assert_eq!(metrics.errors_of("log"), 0);
    }

    #[tokio::test]
    async fn a_panic_is_recorded_then_recovered_outside() {
        let backend = Arc::new(Collect::default());
        let req = http::Request::get("/apis/g/v1/namespaces/ns/things/boom").body(Body::empty()).unwrap();
        let (resp, _) = serve(backend.clone(), req).await;
        assert_eq!(resp.status(), 500, "the recovery filter answers");
        let events = events_until(&backend, 2).await;
        assert_eq!(stages(&events), [Stage::RequestReceived, Stage::Panic]);
        let status = events[1].response_status.clone().unwrap_or_default();
        assert_eq!((status.code, status.message.as_deref()), (Some(500), Some("APIServer panic'd: boom")));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(backend.events.lock().unwrap().len(), 2, "no ResponseComplete after Panic");
    }

    #[tokio::test]
    async fn a_strict_backend_that_fails_fails_the_request() {
        let backend = Arc::new(Collect { fail: true, ..Default::default() });
        let req = http::Request::get("/apis/g/v1/namespaces/ns/things/boom").body(Body::empty()).unwrap();
        let (resp, _) = serve(backend.clone(), req).await;
        assert_eq!(resp.status(), 500);
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status["message"], "Internal error occurred: failed to store audit event", "the handler never ran");
    }

    #[tokio::test]
    async fn a_request_dropped_before_its_answer_is_closed_early() {
        let backend = Arc::new(Collect::default());
        let req = http::Request::get("/apis/g/v1/namespaces/ns/things/slow").body(Body::empty()).unwrap();
        let served = serve(backend.clone(), req);
        assert!(tokio::time::timeout(Duration::from_millis(100), served).await.is_err());
        let events = events_until(&backend, 2).await;
        assert_eq!(stages(&events), [Stage::RequestReceived, Stage::ResponseComplete]);
        let status = events[1].response_status.clone().unwrap_or_default();
        assert_eq!((status.code, status.message.as_deref()), (Some(200), Some("Connection closed early")));
    }

    #[tokio::test]
    async fn a_request_the_policy_leaves_out_writes_nothing_but_keeps_its_id() {
        let backend = Arc::new(Collect::default());
        let req = http::Request::get("/healthz").body(Body::empty()).unwrap();
        let (resp, _) = serve(backend.clone(), req).await;
        let id = resp.headers()["audit-id"].to_str().unwrap().to_string();
        assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
        let _ = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(backend.events.lock().unwrap().is_empty());
    }

    /// The stages of the lines written, in order.
    fn written_stages(backend: &Writes) -> Vec<String> {
        let lines = backend.lines.lock().unwrap();
        let text = std::str::from_utf8(&lines).unwrap();
        text.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["stage"].to_string()).collect()
    }

    #[tokio::test]
    async fn a_read_answered_at_once_waits_once_for_both_its_events() {
        // Answered at once: one write for the two. Answered after a turn:
        // RequestReceived written before the handler went on.
        for (path, writes) in [("", &[2][..]), ("/after-a-turn", &[1, 1][..])] {
            let backend = Arc::new(Writes::default());
            let req = http::Request::get(format!("/apis/g/v1/namespaces/ns/things{path}")).body(Body::empty()).unwrap();
            let (resp, _) = serve_on(blocking(&backend, Mode::Blocking), METADATA, req).await;
            assert_eq!(resp.status(), 200);
            assert_eq!(*backend.counts.lock().unwrap(), writes, "{path}");
            assert_eq!(written_stages(&backend), [r#""RequestReceived""#, r#""ResponseComplete""#]);
        }
    }

    #[tokio::test]
    async fn a_write_has_its_request_received_written_before_its_handler_runs() {
        let backend = Arc::new(Writes::default());
        let req = http::Request::post("/apis/g/v1/namespaces/ns/things")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(r#"{"a":1}"#))
            .unwrap();
        let (resp, _) = serve_on(blocking(&backend, Mode::Blocking), METADATA, req).await;
        assert_eq!(resp.status(), 201);
        assert_eq!(*backend.counts.lock().unwrap(), [1, 1]);
    }

    #[tokio::test]
    async fn a_strict_read_whose_events_were_not_written_is_refused() {
        let backend = Arc::new(Writes { fail: true, ..Default::default() });
        let req = http::Request::get("/apis/g/v1/namespaces/ns/things").body(Body::empty()).unwrap();
        let (resp, _) = serve_on(blocking(&backend, Mode::BlockingStrict), METADATA, req).await;
        assert_eq!(resp.status(), 500);
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status["message"], "Internal error occurred: failed to store audit event");
    }

    #[tokio::test]
    async fn a_request_received_left_queued_is_written_by_the_stage_after_it() {
        // Whoever writes the next stage (here a request closed early, its
        // answer never taken) writes the RequestReceived left queued first.
        let backend = Arc::new(Writes::default());
        let auditor = Arc::new(Auditor::new(
            PolicyEvaluator::from_bytes(METADATA).unwrap(),
            blocking(&backend, Mode::Blocking),
            AuditMetrics::default(),
        ));
        let things = "/apis/g/v1/namespaces/ns/things";
        let mut req = http::Request::get(things).body(Body::empty()).unwrap();
        req.extensions_mut().insert(crate::apimachinery::request_info::classify(&http::Method::GET, things, None));
        let (ctx, _) = started(&auditor, &mut req, &HeaderValue::from_static("id")).unwrap();
        let Received::Reading { ticket, .. } = received(req) else { panic!("a read's event is queued") };
        ctx.defer_received(ticket);
        tokio::time::timeout(Duration::from_secs(5), ctx.closed_early()).await.expect("not left waiting");
        assert_eq!(*backend.counts.lock().unwrap(), [2]);
        assert_eq!(written_stages(&backend), [r#""RequestReceived""#, r#""ResponseComplete""#]);
    }
}
