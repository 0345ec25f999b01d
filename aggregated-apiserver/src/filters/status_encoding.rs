//! The outermost filter: errors answered in the encoding the client accepts.

use std::future::Future;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use futures::future::Either;
use futures::FutureExt;
use http::{header, HeaderValue};

use crate::apimachinery::errors::ApiError;
use crate::apimachinery::serializer;
use crate::endpoints::negotiation::{self, Encoding};

/// Largest Status body re-encoded as YAML (Status errors are small; anything
/// larger is not one of ours and passes unchanged).
const MAX_STATUS_BYTES: usize = 1 << 20;

/// Every Status error of the server (the filters' refusals included) in the
/// encoding the client accepts, as kube-apiserver's ErrorNegotiated writes
/// them: errors are built as JSON, and turned into YAML here when the client
/// prefers `application/yaml`.
pub fn status_in_accepted_encoding<N: super::Next>(
    req: super::Request,
    next: N,
) -> impl Future<Output = Response> + Send {
    // Kept (a reference count), and read only when the answer is an error.
    let accept = req.headers().get(header::ACCEPT).cloned();
    next.run(req).then(move |resp| {
        let is_json_status = resp.status().as_u16() >= 400
            && resp.headers().get(header::CONTENT_TYPE).is_some_and(|ct| ct.as_bytes() == b"application/json");
        if !is_json_status
            || negotiation::plain_encoding(accept.as_ref().and_then(|v| v.to_str().ok())) == Encoding::Json
        {
            return Either::Left(futures::future::ready(resp));
        }
        Either::Right(as_yaml(resp).boxed())
    })
}

/// A JSON Status answer re-encoded as YAML.
async fn as_yaml(resp: Response) -> Response {
    let (mut parts, body) = resp.into_parts();
    let json = match axum::body::to_bytes(body, MAX_STATUS_BYTES).await {
        Ok(json) => json,
        Err(e) => return ApiError::internal_error(format!("reading an error body: {e}")).into_response(),
    };
    match serializer::json_to_yaml(&json) {
        Ok(yaml) => {
            parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(negotiation::YAML_CONTENT_TYPE));
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(yaml))
        }
        // Not a JSON document after all: sent as it was.
        Err(_) => Response::from_parts(parts, Body::from(json)),
    }
}
