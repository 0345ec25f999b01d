//! What every event of a request says of it, kept from the request when it
//! arrives ([`RequestParts`]) or gathered as it is served ([`Annotations`]),
//! and the writers of those pieces of an event's JSON. The request's record
//! ([`super::context`]) holds them; [`super::encode`] writes events from
//! them; neither is needed to read or write them.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use chrono::{DateTime, Utc};
use http::uri::PathAndQuery;
use http::HeaderValue;

use super::event::{json_str, ObjectReference};
use super::request::{source_ip_list, user_agent_text};
use crate::apimachinery::request_info::{RequestInfo, RequestVerb};
use crate::apimachinery::resource::Verb;

/// What every event of a request says of it, taken from the request when it
/// arrives and never changed: the URI's and headers' own shared bytes, the
/// peer's address, and one string for the objectRef. An event is written
/// from these ([`super::encode`]); the source IPs and the user agent are
/// read from the headers as they are written.
pub(crate) struct RequestParts {
    pub audit_id: HeaderValue,
    pub received: DateTime<Utc>,
    pub uri: PathAndQuery,
    pub verb: RequestVerb,
    pub(super) forwarded_for: Option<HeaderValue>,
    pub(super) real_ip: Option<HeaderValue>,
    pub(super) peer: Option<IpAddr>,
    pub(super) user_agent: Option<HeaderValue>,
    pub(super) object_ref: Option<RefText>,
    /// What every event writes the same ([`write_constant_parts`]), and
    /// where its first two pieces end, once an event that is not the
    /// request's last has written it.
    pub(super) encoded: OnceLock<(String, [usize; 2])>,
}

/// A resource request's objectRef in one string (one allocation rather than
/// one a field): its fields (resource, namespace, name, apiGroup,
/// apiVersion, subresource), then the `,"objectRef":{...}` every event
/// writes, encoded once rather than for each event.
pub(super) struct RefText {
    /// Kept as bytes: they are written from strings, and the events copy
    /// the JSON as bytes; a `String` would check them as UTF-8 on every
    /// audited request for the rare reader of a field.
    text: Vec<u8>,
    /// Where each field ends; the JSON follows the last.
    ends: [usize; 6],
    /// Whether the JSON is there (it always is but for an encoding error).
    encoded: bool,
}

impl RefText {
    pub(super) fn new(info: &RequestInfo) -> Self {
        let fields =
            [info.resource(), info.namespace(), info.name(), info.api_group(), info.api_version(), info.subresource()];
        let raw: usize = fields.iter().map(|f| f.len()).sum();
        let mut bytes = Vec::with_capacity(2 * raw + 96);
        let mut ends = [0; 6];
        for (end, field) in ends.iter_mut().zip(fields) {
            bytes.extend_from_slice(field.as_bytes());
            *end = bytes.len();
        }
        let [resource, namespace, name, group, version, subresource] = fields;
        let json = [resource, namespace, name, "", group, version, "", subresource];
        let encoded = write_object_ref(&mut bytes, json).is_ok();
        if !encoded {
            bytes.truncate(ends[5]);
        }
        Self { text: bytes, ends, encoded }
    }

    /// resource, namespace, name, apiGroup, apiVersion, subresource (each
    /// copied from a `&str`, so each reads back).
    pub(super) fn fields(&self) -> [&str; 6] {
        let mut start = 0;
        self.ends.map(|end| {
            let field = self.text.get(start..end).and_then(|f| std::str::from_utf8(f).ok()).unwrap_or_default();
            start = end;
            field
        })
    }

    fn json(&self) -> Option<&[u8]> {
        self.encoded.then(|| self.text.get(self.ends[5]..)).flatten()
    }
}

impl RequestParts {
    /// The pieces of JSON every event of the request writes the same: the
    /// audit ID, the URI and verb, the source IPs and user agent; encoded by
    /// the first event that asks, and kept for the next.
    pub fn encoded(&self) -> [&[u8]; 3] {
        let (text, [id_end, uri_end]) = self.encoded.get_or_init(|| {
            let mut out = Vec::with_capacity(self.uri.as_str().len() + 160);
            // Strings into a Vec, so it does not fail; were it to, the events
            // would say less (an empty ID), never something else.
            write_constant_parts(&mut out, self)
                .ok()
                .and_then(|ends| Some((String::from_utf8(out).ok()?, ends)))
                .unwrap_or_else(|| ("\"\"".to_string(), [2, 2]))
        });
        let bytes = text.as_bytes();
        let piece = |from: usize, to: usize| bytes.get(from..to).unwrap_or_default();
        [piece(0, *id_end), piece(*id_end, *uri_end), piece(*uri_end, bytes.len())]
    }

    /// [`Self::encoded`], when an earlier event kept it.
    pub fn encoded_if_kept(&self) -> Option<[&[u8]; 3]> {
        self.encoded.get().is_some().then(|| self.encoded())
    }

    /// kube's source IPs of the request, in order; the peer's alone, without
    /// allocating, when no proxy header names others.
    pub fn for_each_source_ip(&self, mut f: impl FnMut(IpAddr)) {
        if self.forwarded_for.is_none() && self.real_ip.is_none() {
            if let Some(peer) = self.peer {
                f(peer);
            }
            return;
        }
        source_ip_list(self.forwarded_for.as_ref(), self.real_ip.as_ref(), self.peer).into_iter().for_each(f);
    }

    pub fn user_agent(&self) -> Option<Cow<'_, str>> {
        self.user_agent.as_ref().map(user_agent_text).filter(|ua| !ua.is_empty())
    }

    /// Writes `,"objectRef":{...}` for a resource request.
    pub fn write_object_ref(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        let Some(reference) = &self.object_ref else { return Ok(()) };
        if let Some(json) = reference.json() {
            out.extend_from_slice(json);
            return Ok(());
        }
        let [resource, namespace, name, group, version, subresource] = reference.fields();
        write_object_ref(out, [resource, namespace, name, "", group, version, "", subresource])
    }

    pub fn object_ref(&self) -> Option<ObjectReference> {
        let [resource, namespace, name, group, version, subresource] = self.object_ref.as_ref()?.fields();
        Some(ObjectReference {
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
            api_group: group.into(),
            api_version: version.into(),
            subresource: subresource.into(),
            ..Default::default()
        })
    }

    /// A create or an update: the request's body is the object, and kube
    /// completes the objectRef from its metadata (`LogRequestObject`, which
    /// its create and update handlers call; a patch's body is not an object).
    pub(super) fn sends_object(&self) -> bool {
        self.object_ref.is_some()
            && matches!(self.verb, RequestVerb::Resource(Verb::Create) | RequestVerb::Resource(Verb::Update))
    }
}

/// An event's annotations, in the order of their keys (kube writes a map,
/// which Go's encoder sorts), each with its `"key":"value"` as the event
/// writes it. The keys the server sets are constants and their values often
/// shared (the authorizer's cached reason), so that the two annotations of
/// an authorized request allocate no more than this list and are encoded
/// once a thread ([`shared_annotation_json`]), not once a request as a map
/// of strings would be (measured: docs/performance.md, "Auditing: the
/// record and its encoding").
#[derive(Default)]
pub(crate) struct Annotations(pub(super) Vec<Annotation>);

pub(super) struct Annotation {
    pub(super) key: Cow<'static, str>,
    pub(super) value: Arc<str>,
    pub(super) json: Arc<str>,
}

impl Annotations {
    /// Where `key` is, or would be.
    pub(super) fn find(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|a| (*a.key).cmp(key))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|a| (&*a.key, &*a.value))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each annotation's `"key":"value"`, in order.
    pub fn members(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|a| &*a.json)
    }

    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }
}

/// What every event of a request writes the same, in three pieces: the
/// `auditID`'s value ([`write_audit_id`]); `,"requestURI":…,"verb":…`
/// ([`write_uri_and_verb`]); and `,"sourceIPs":[…],"userAgent":…`
/// ([`write_sources`]). Kept by a request that writes more than one event
/// ([`RequestParts::encoded`]) rather than written for each.
pub(crate) fn write_constant_parts(out: &mut Vec<u8>, r: &RequestParts) -> serde_json::Result<[usize; 2]> {
    write_audit_id(out, r)?;
    let id_end = out.len();
    write_uri_and_verb(out, r)?;
    let uri_end = out.len();
    write_sources(out, r)?;
    Ok([id_end, uri_end])
}

pub(crate) fn write_audit_id(out: &mut Vec<u8>, r: &RequestParts) -> serde_json::Result<()> {
    match std::str::from_utf8(r.audit_id.as_bytes()) {
        Ok(id) => json_str(out, id),
        Err(_) => json_str(out, &String::from_utf8_lossy(r.audit_id.as_bytes())),
    }
}

pub(crate) fn write_uri_and_verb(out: &mut Vec<u8>, r: &RequestParts) -> serde_json::Result<()> {
    out.extend_from_slice(b",\"requestURI\":");
    json_str(out, r.uri.as_str())?;
    out.extend_from_slice(b",\"verb\":");
    json_str(out, r.verb.as_str())
}

pub(crate) fn write_sources(out: &mut Vec<u8>, r: &RequestParts) -> serde_json::Result<()> {
    let mut first = true;
    r.for_each_source_ip(|ip| {
        out.extend_from_slice(if first { b",\"sourceIPs\":[\"" } else { b",\"" });
        first = false;
        write_ip(out, ip);
        out.push(b'"');
    });
    if !first {
        out.push(b']');
    }
    if let Some(agent) = r.user_agent() {
        out.extend_from_slice(b",\"userAgent\":");
        json_str(out, &agent)?;
    }
    Ok(())
}

/// An objectRef's fields in [`ObjectReference`]'s order.
pub(crate) fn object_ref_fields(r: &ObjectReference) -> [&str; 8] {
    [&r.resource, &r.namespace, &r.name, &r.uid, &r.api_group, &r.api_version, &r.resource_version, &r.subresource]
}

const OBJECT_REF_KEYS: [&str; 8] =
    ["resource", "namespace", "name", "uid", "apiGroup", "apiVersion", "resourceVersion", "subresource"];

/// `,"objectRef":{...}` of `fields` in [`ObjectReference`]'s order.
pub(crate) fn write_object_ref(out: &mut Vec<u8>, fields: [&str; 8]) -> serde_json::Result<()> {
    out.extend_from_slice(b",\"objectRef\":{");
    let mut first = true;
    for (key, value) in OBJECT_REF_KEYS.into_iter().zip(fields) {
        if value.is_empty() {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        out.push(b'"');
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
        json_str(out, value)?;
    }
    out.push(b'}');
    Ok(())
}

/// An address as its `Display` writes it; IPv4 digit by digit, at a
/// fraction of the formatter's cost.
pub(crate) fn write_ip(out: &mut Vec<u8>, ip: IpAddr) {
    let IpAddr::V4(v4) = ip else {
        use std::io::Write;
        // Writing into a Vec does not fail.
        let _ = write!(out, "{ip}");
        return;
    };
    for (i, octet) in v4.octets().into_iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        if octet >= 100 {
            out.push(b'0' + octet / 100);
        }
        if octet >= 10 {
            out.push(b'0' + octet / 10 % 10);
        }
        out.push(b'0' + octet % 10);
    }
}
