//! What an answer for a deprecated version carries, as kube-apiserver marks
//! a request for a deprecated CRD version: the version's warning first among
//! the Warning headers, and the audit annotation `k8s.io/deprecated: "true"`,
//! which kube's request metrics add once the handler has returned (for a
//! watch, when the watch ends: after its ResponseStarted event).

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{header, HeaderValue};

use crate::audit::context::AuditContext;

const ANNOTATION: &str = "k8s.io/deprecated";

/// Marks `response`, an answer for a deprecated version whose warning is
/// `warning`; `long_running` (a watch) is annotated in `audit` when its body ends.
pub(crate) fn mark(
    mut response: Response,
    warning: HeaderValue,
    audit: Option<AuditContext>,
    long_running: bool,
) -> Response {
    let headers = response.headers_mut();
    let others: Vec<HeaderValue> = headers.get_all(header::WARNING).iter().cloned().collect();
    headers.insert(header::WARNING, warning);
    for other in others {
        headers.append(header::WARNING, other);
    }
    match audit {
        Some(audit) if long_running => response.map(|body| Body::new(AnnotatedAtEnd { body, audit: Some(audit) })),
        Some(audit) => {
            audit.add_annotation(ANNOTATION, "true");
            response
        }
        None => response,
    }
}

/// A body that annotates its request's audit event when it ends (or is
/// dropped, its client gone).
struct AnnotatedAtEnd {
    body: Body,
    audit: Option<AuditContext>,
}

impl AnnotatedAtEnd {
    fn annotate(&mut self) {
        if let Some(audit) = self.audit.take() {
            audit.add_annotation(ANNOTATION, "true");
        }
    }
}

impl http_body::Body for AnnotatedAtEnd {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let frame = ready!(Pin::new(&mut this.body).poll_frame(cx));
        if frame.is_none() {
            this.annotate();
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for AnnotatedAtEnd {
    fn drop(&mut self) {
        self.annotate();
    }
}
