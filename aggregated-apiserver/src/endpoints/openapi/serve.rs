//! How the OpenAPI documents are answered, as kube-openapi's handlers answer:
//! JSON or protobuf by the Accept header ([`super::accept`]), both encoded
//! once and kept under one ETag, and a v3 group-version document's `?hash=`
//! URL cacheable for good.

use axum::body::Body;
use axum::response::Response;
use http::{header, HeaderMap, HeaderValue, StatusCode};
use serde_json::Value;

use super::accept::{self, Format, Offer, V2_OFFERS, V3_OFFERS};
use super::gnostic::{self, Spec};
use super::OpenApi;
use crate::endpoints::static_doc::StaticDoc;

/// One document in both encodings, under one ETag.
pub(super) struct Encoded {
    pub(super) json: StaticDoc,
    /// None when gnostic's messages cannot hold the document (logged at
    /// startup): protobuf requests then get 503, as kube-openapi answers
    /// when gnostic fails, and JSON is still served.
    protobuf: Option<StaticDoc>,
}

impl Encoded {
    pub(super) fn new(document: &Value, spec: Spec, name: &str) -> Self {
        let json = StaticDoc::new(document);
        let protobuf = match gnostic::encode(document, spec) {
            Ok(bytes) => Some(json.sibling(bytes)),
            Err(error) => {
                tracing::error!(document = name, %error, "OpenAPI: no protobuf encoding; protobuf requests will get 503");
                None
            }
        };
        Self { json, protobuf }
    }

    /// The encoding the Accept header gets; 406 (no body, as kube-openapi
    /// answers) when it names neither. A group-version document asked for
    /// with `?hash=` is answered as kube-openapi's handler3 does.
    fn respond(&self, offers: &[Offer], headers: &HeaderMap, pinned: Option<Pinned<'_>>) -> Response {
        let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
        let Some(offer) = accept::choose(accept, offers) else {
            return bare_status(StatusCode::NOT_ACCEPTABLE);
        };
        let doc = match offer.format {
            Format::Json => &self.json,
            Format::Protobuf => match &self.protobuf {
                Some(doc) => doc,
                None => return bare_status(StatusCode::SERVICE_UNAVAILABLE),
            },
        };
        let Some(pinned) = pinned else {
            return doc.respond(offer.content_type, "no-cache, private", headers);
        };
        if pinned.hash != self.json.hash() {
            // Another version's URL (the index changed since the client
            // read it): sent to this version's.
            let mut resp = bare_status(StatusCode::MOVED_PERMANENTLY);
            let location = format!("/openapi/v3/{}?hash={}", pinned.group_version, self.json.hash());
            let h = resp.headers_mut();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static(offer.content_type));
            if let Ok(v) = HeaderValue::from_str(&location) {
                h.insert(header::LOCATION, v);
            }
            if let Ok(v) = HeaderValue::from_str(&format!("\"{}\"", self.json.hash())) {
                h.insert(header::ETAG, v);
            }
            return resp;
        }
        // This version's URL never changes content: cacheable for a year.
        let mut resp = doc.respond(offer.content_type, "public, immutable", headers);
        let in_a_year = chrono::Utc::now().checked_add_months(chrono::Months::new(12)).unwrap_or_else(chrono::Utc::now);
        if let Ok(v) = HeaderValue::from_str(&in_a_year.format("%a, %d %b %Y %H:%M:%S UTC").to_string()) {
            resp.headers_mut().insert(header::EXPIRES, v);
        }
        resp
    }
}

/// A group-version document's URL with the `hash` the index gave it.
struct Pinned<'a> {
    group_version: &'a str,
    hash: &'a str,
}

fn bare_status(status: StatusCode) -> Response {
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::VARY, HeaderValue::from_static("Accept"));
    resp
}

impl OpenApi {
    /// Answers an OpenAPI path, or None when the path is not one.
    pub fn serve(&self, path: &str, query: Option<&str>, headers: &HeaderMap) -> Option<Response> {
        let path = path.trim_end_matches('/');
        Some(match path {
            "/openapi/v2" => self.v2.respond(V2_OFFERS, headers, None),
            // The index is JSON whatever the Accept, labelled as kube-openapi
            // labels it: Go's http.ServeContent sniffs JSON as plain text, and
            // with one encoding there is no Vary.
            "/openapi/v3" => {
                let mut index = self.v3_index.respond("text/plain; charset=utf-8", "no-cache, private", headers);
                index.headers_mut().remove(header::VARY);
                index
            }
            p => {
                let group_version = p.strip_prefix("/openapi/v3/")?;
                let params: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or("")).unwrap_or_default();
                // Go's `Query().Get`: the first value; an empty one is none.
                let hash = params.iter().find(|(k, _)| k == "hash").map(|(_, v)| v.as_str()).filter(|h| !h.is_empty());
                let pinned = hash.map(|hash| Pinned { group_version, hash });
                self.v3.get(group_version)?.respond(V3_OFFERS, headers, pinned)
            }
        })
    }
}
