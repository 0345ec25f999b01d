//! A document built once at startup and served many times (discovery,
//! OpenAPI): its bytes, a content hash as ETag, and 304 on If-None-Match.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, StatusCode};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub struct StaticDoc {
    body: Bytes,
    hash: String,
}

impl StaticDoc {
    pub fn new(v: &Value) -> Self {
        let body = Bytes::from(serde_json::to_vec(v).unwrap_or_default());
        let hash = format!("{:X}", Sha256::digest(&body));
        Self { body, hash }
    }

    /// Another encoding of the same document, under the same ETag (as
    /// kube-openapi does: `Vary: Accept` keeps caches from mixing them up).
    pub fn sibling(&self, body: Vec<u8>) -> Self {
        Self { body: Bytes::from(body), hash: self.hash.clone() }
    }

    /// The content hash (hex), also usable in URLs.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    fn etag(&self) -> String {
        format!("\"{}\"", self.hash)
    }

    /// The document, or 304 when the client already holds this version.
    pub fn respond(&self, content_type: &'static str, cache_control: &'static str, headers: &HeaderMap) -> Response {
        let etag = self.etag();
        let not_modified = headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
        let mut resp = Response::new(if not_modified { Body::empty() } else { Body::from(self.body.clone()) });
        if not_modified {
            *resp.status_mut() = StatusCode::NOT_MODIFIED;
        }
        let h = resp.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        h.insert(header::VARY, HeaderValue::from_static("Accept"));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache_control));
        if let Ok(v) = HeaderValue::from_str(&etag) {
            h.insert(header::ETAG, v);
        }
        resp
    }
}
