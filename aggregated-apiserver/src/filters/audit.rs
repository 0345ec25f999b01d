//! Auditing on the request path, split where k8s.io/apiserver splits it
//! (`DefaultBuildHandlerChain`):
//!
//! - [`audit`], early in the chain (kube's `WithAuditInit` with the response
//!   half of `WithAudit`): takes the request's audit ID from the aggregator's
//!   `Audit-ID` header (or makes one), echoes it on the response, starts the
//!   request's [`AuditContext`], and records how the request ended: the code,
//!   ResponseStarted for watches, ResponseComplete once the last byte of the
//!   body is handed on, Panic when the handler panicked. A request refused
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

use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use chrono::Utc;
use futures::FutureExt;
use http::{header, HeaderName, HeaderValue};
use http_body::{Frame, SizeHint};

use crate::apimachinery::errors::ApiError;
use crate::audit::context::{Arrival, Captured};
use crate::audit::request::{source_ips, user_agent};
use crate::audit::{AuditContext, Auditor, Level, Stage, HEADER_AUDIT_ID};
use crate::auth::authn::UserInfo;
use crate::endpoints::request_info::RequestInfo;

/// Largest answer read whole to record a refusal made before the policy was evaluated.
const MAX_REFUSAL_BYTES: usize = 1 << 20;

/// The [`audit`] filter's state.
pub struct Audit {
    pub auditor: Arc<Auditor>,
}

/// The `Audit-ID` a request came with, if any.
pub fn sent_audit_id(req: &Request) -> Option<HeaderValue> {
    req.headers().get(HEADER_AUDIT_ID).filter(|v| !v.is_empty()).cloned()
}

pub async fn audit(State(audit): State<Arc<Audit>>, mut req: Request, next: Next) -> Response {
    let sent = sent_audit_id(&req);
    let auditor = audit.auditor.clone();
    // Kept as sent (kube neither checks nor shortens it).
    let (id, header_value) = match sent {
        Some(value) => (String::from_utf8_lossy(value.as_bytes()).into_owned(), Some(value)),
        None => {
            let id = uuid::Uuid::new_v4().to_string();
            let value = HeaderValue::from_str(&id).ok();
            (id, value)
        }
    };
    let info = req.extensions().get::<RequestInfo>().cloned().unwrap_or_default();
    let long_running = super::is_long_running(&info);
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    let arrival = Arrival {
        received: Utc::now(),
        request_uri: req.uri().path_and_query().map_or_else(|| req.uri().path().to_string(), |pq| pq.to_string()),
        source_ips: source_ips(req.headers(), peer),
        user_agent: user_agent(req.headers()),
        content_type: req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()),
        info,
    };
    let ctx = AuditContext::new(auditor, id, arrival);
    req.extensions_mut().insert(ctx.clone());
    let mut unanswered = Unanswered(Some(ctx.clone()));
    let resp = match AssertUnwindSafe(next.run(req)).catch_unwind().await {
        Ok(resp) => resp,
        Err(panic) => {
            unanswered.0 = None;
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            ctx.panicked(&what).await;
            // The recovery filter outside answers it, as kube's re-panics to its own.
            std::panic::resume_unwind(panic)
        }
    };
    unanswered.0 = None;
    let mut resp = record(ctx, resp, long_running).await;
    if let Some(id) = header_value {
        echo(&mut resp, id);
    }
    resp
}

/// Sets the response's `Audit-ID` unless something inside already did (kube: an
/// aggregated server's own answer keeps its ID).
pub fn echo(resp: &mut Response, id: HeaderValue) {
    if !resp.headers().contains_key(HEADER_AUDIT_ID) {
        resp.headers_mut().insert(HeaderName::from_static(HEADER_AUDIT_ID), id);
    }
}

/// Records the answer and, when the event keeps it, wraps its body.
async fn record(ctx: AuditContext, resp: Response, long_running: bool) -> Response {
    let code = resp.status().as_u16();
    {
        // Not held across an await: a response is not Sync.
        let text = |name: header::HeaderName| resp.headers().get(name).and_then(|v| v.to_str().ok());
        ctx.responded(code, text(header::CONTENT_TYPE), text(header::CONTENT_ENCODING));
    }
    let level = match ctx.level() {
        Some(level) => level,
        None => return refused_early(ctx, resp).await,
    };
    if level == Level::None {
        return resp;
    }
    if long_running {
        ctx.process(Stage::ResponseStarted).await;
    }
    let keep = ctx.wants_response_body(code, long_running);
    resp.map(|body| Body::new(AuditedBody { inner: body, ctx: Some(ctx), captured: keep.then(Captured::default) }))
}

/// A request answered before the policy was evaluated (kube's `withFailedRequestAudit`).
async fn refused_early(ctx: AuditContext, resp: Response) -> Response {
    if ctx.evaluate(None).level == Level::None {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_REFUSAL_BYTES).await {
        Ok(bytes) => bytes,
        Err(e) => return ApiError::internal_error(format!("reading an answer: {e}")).into_response(),
    };
    ctx.refused(&bytes).await;
    Response::from_parts(parts, Body::from(bytes))
}

/// Policy evaluation and RequestReceived, right after authentication.
pub async fn evaluate_policy(req: Request, next: Next) -> Response {
    let Some(ctx) = req.extensions().get::<AuditContext>().cloned() else {
        return next.run(req).await;
    };
    let config = ctx.evaluate(req.extensions().get::<UserInfo>());
    if config.level == Level::None {
        return next.run(req).await;
    }
    if !ctx.process(Stage::RequestReceived).await {
        // Only a blocking-strict backend reports a failure.
        ctx.rejected();
        return ApiError::internal_error("failed to store audit event").into_response();
    }
    if !ctx.wants_request_body() {
        return next.run(req).await;
    }
    ctx.start_request_body();
    let req = req.map(|body| Body::new(KeptBody { inner: body, ctx }));
    next.run(req).await
}

/// Completes the event of a request whose handler was dropped before it
/// answered (the client went away): kube fakes a 200 "Connection closed
/// early" for a handler that wrote nothing, and so does this.
struct Unanswered(Option<AuditContext>);

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
    fn finish(&mut self) {
        if let Some(ctx) = self.ctx.take() {
            let bytes = self.captured.take().and_then(|c| c.bytes());
            spawn(async move { ctx.complete(bytes).await });
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
