//! An [`ApiError`] written as kube-apiserver writes a failure: its code, a
//! `metav1.Status` body, Retry-After when it asks the client to wait, and
//! the warnings gathered before it failed.

use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};

use crate::apimachinery::errors::ApiError;
use crate::endpoints::warnings::warning_headers;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self.status_body()).unwrap_or_default();
        let mut resp = (code, body).into_response();
        let headers = resp.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(secs) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        for value in warning_headers(&self.warnings) {
            headers.append(header::WARNING, value);
        }
        resp
    }
}
