//! Panic recovery (k8s.io/apiserver `WithPanicRecovery`): a handler that panics
//! answers 500 and is logged; the connection and the server carry on.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use super::{Next, Request};
use axum::response::{IntoResponse, Response};
use futures::future::Either;
use futures::FutureExt;

use crate::apimachinery::errors::ApiError;

/// The rest of the chain, its panics (while it is built for the request, or
/// while it runs) answered 500.
pub fn recover<N: Next>(req: Request, next: N) -> impl Future<Output = Response> + Send {
    let method = req.method().clone();
    let uri = req.uri().clone();
    // The filters inside run their first steps as the chain is built.
    let answer = match std::panic::catch_unwind(AssertUnwindSafe(move || next.run(req))) {
        Ok(handling) => Either::Left(AssertUnwindSafe(handling).catch_unwind()),
        Err(panic) => Either::Right(futures::future::ready(Err(panic))),
    };
    answer.map(move |answer| match answer {
        Ok(response) => response,
        Err(panic) => {
            let what = panic_message(&*panic);
            tracing::error!(%method, %uri, panic = %what, "request handler panicked");
            ApiError::internal_error("the server could not serve the request").into_response()
        }
    })
}

/// What a panic said (its `&str` or `String` payload).
pub(super) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}
