//! Panic recovery (k8s.io/apiserver `WithPanicRecovery`): a handler that panics
//! answers 500 and is logged; the connection and the server carry on.

use std::panic::AssertUnwindSafe;

use super::{Next, Request};
use axum::response::{IntoResponse, Response};
use futures::FutureExt;

use crate::apimachinery::errors::ApiError;

pub async fn recover(req: Request, next: impl Next) -> Response {
    let method = req.method().clone();
    let uri = req.uri().clone();
    match AssertUnwindSafe(next.run(req)).catch_unwind().await {
        Ok(response) => response,
        Err(panic) => {
            let what = panic_message(&*panic);
            tracing::error!(%method, %uri, panic = %what, "request handler panicked");
            ApiError::internal_error("the server could not serve the request").into_response()
        }
    }
}

/// What a panic said (its `&str` or `String` payload).
pub(super) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}
