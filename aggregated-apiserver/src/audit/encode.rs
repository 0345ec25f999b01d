//! An event as the backends are handed it: borrowed from its request's
//! record ([`super::context`]) and written straight from there, without an
//! owned [`Event`] in between. An `Event` for each stage would copy a dozen
//! strings out of the request (URI, verb, user agent, source IPs,
//! objectRef, ID), drop them again and serialize them, most of what auditing
//! adds to a GET (measured: docs/performance.md, "Auditing: the record and
//! its encoding"). Here the request's own parts (the URI's and headers'
//! shared bytes, the peer address) are written into the backend's buffer as
//! they are, and an owned [`Event`] is made only for a backend that keeps or
//! awaits one ([`EventRef::to_event`]: a webhook in `blocking` mode,
//! truncation of a large event, the `legacy` format).

use std::cell::RefCell;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8s_openapi::api::authentication::v1::UserInfo as EventUser;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use serde_json::Value;

use super::event::{json_str, micro_time_digits, Event, KubeStatus, Level, ObjectReference, Stage};
use super::parts::{
    object_ref_fields, write_audit_id, write_object_ref, write_sources, write_uri_and_verb, Annotations, RequestParts,
};
use crate::auth::authn::UserInfo;

/// One event, borrowed.
pub struct EventRef<'a>(Repr<'a>);

enum Repr<'a> {
    Parts(Parts<'a>),
    Owned(&'a Event),
}

/// What a request's record holds at one stage.
pub(crate) struct Parts<'a> {
    pub request: &'a RequestParts,
    pub level: Level,
    pub stage: Stage,
    pub stage_timestamp: DateTime<Utc>,
    /// The user and the impersonated user, as their JSON ([`write_user`]).
    pub user: Option<&'a str>,
    pub impersonated_user: Option<&'a str>,
    /// A created object's reference, named by its body; else the request's.
    pub object_ref: Option<&'a ObjectReference>,
    /// The answer's code, written as a bare responseStatus unless
    /// `response_status` says more.
    pub response_code: Option<u16>,
    pub response_status: Option<&'a Status>,
    pub request_object: Option<&'a Value>,
    pub response_object: Option<&'a Value>,
    pub annotations: &'a Annotations,
}

impl<'a> From<&'a Event> for EventRef<'a> {
    fn from(event: &'a Event) -> Self {
        Self(Repr::Owned(event))
    }
}

impl<'a> EventRef<'a> {
    pub(crate) fn parts(parts: Parts<'a>) -> Self {
        Self(Repr::Parts(parts))
    }

    pub fn level(&self) -> Level {
        match &self.0 {
            Repr::Parts(p) => p.level,
            Repr::Owned(e) => e.level,
        }
    }

    /// The event as audit.k8s.io/v1 JSON, appended to `out` ([`write_event`]).
    pub fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        match &self.0 {
            Repr::Parts(p) => write_event(p, out),
            Repr::Owned(e) => write_event(*e, out),
        }
    }

    /// The `legacy` line; through an owned event (the format is rare).
    pub fn legacy_line(&self) -> String {
        match &self.0 {
            Repr::Parts(_) => self.to_event().legacy_line(),
            Repr::Owned(e) => e.legacy_line(),
        }
    }

    /// The event, owned.
    pub fn to_event(&self) -> Event {
        match &self.0 {
            Repr::Parts(p) => p.to_event(),
            Repr::Owned(e) => (*e).clone(),
        }
    }
}

/// What an event's two forms (a request's record at one stage, an owned
/// [`Event`]) hold each their own way; [`write_event`] writes the keys and
/// their order, once for both.
trait EventPieces {
    fn level(&self) -> Level;
    fn stage(&self) -> Stage;
    /// The three pieces every event of the request writes the same (the
    /// `auditID`'s value, the URI and verb, the sources), when they are kept
    /// encoded: then they are copied, and the three writers below not called.
    fn kept(&self) -> Option<[&[u8]; 3]> {
        None
    }
    /// The `auditID`'s value.
    fn write_audit_id(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
    /// `,"requestURI":…,"verb":…`.
    fn write_uri_and_verb(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
    /// The `user`'s value.
    fn write_user(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
    /// `,"impersonatedUser":…`, when there is one.
    fn write_impersonated_user(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
    /// `,"sourceIPs":[…]` and `,"userAgent":…`, each when there is one.
    fn write_sources(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
    /// `,"objectRef":{…}`, when there is one.
    fn write_object_ref(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
    /// `,"responseStatus":{…}`, when there is one.
    fn write_response_status(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
    /// From `requestObject` on, the closing brace included ([`write_end`]).
    fn write_end(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
}

/// An event as audit.k8s.io/v1 JSON, appended to `out`: the one layout of
/// every event written, whatever form it is in. Keys are written as they
/// are and strings copied whole when nothing in them needs escaping
/// (escaping through serde is a large part of an audited GET's events:
/// docs/performance.md, "Auditing: the record and its encoding").
fn write_event(event: &impl EventPieces, out: &mut Vec<u8>) -> serde_json::Result<()> {
    out.extend_from_slice(b"{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"level\":\"");
    out.extend_from_slice(event.level().as_str().as_bytes());
    out.extend_from_slice(b"\",\"auditID\":");
    let kept = event.kept();
    match kept {
        Some([id, _, _]) => out.extend_from_slice(id),
        None => event.write_audit_id(out)?,
    }
    out.extend_from_slice(b",\"stage\":\"");
    out.extend_from_slice(event.stage().as_str().as_bytes());
    out.push(b'"');
    match kept {
        Some([_, uri_and_verb, _]) => out.extend_from_slice(uri_and_verb),
        None => event.write_uri_and_verb(out)?,
    }
    out.extend_from_slice(b",\"user\":");
    event.write_user(out)?;
    event.write_impersonated_user(out)?;
    match kept {
        Some([_, _, sources]) => out.extend_from_slice(sources),
        None => event.write_sources(out)?,
    }
    event.write_object_ref(out)?;
    event.write_response_status(out)?;
    event.write_end(out)
}

impl EventPieces for Parts<'_> {
    fn level(&self) -> Level {
        self.level
    }

    fn stage(&self) -> Stage {
        self.stage
    }

    /// As the request kept them: the last event writes them itself unless
    /// an earlier one kept them, so a request of one event keeps nothing.
    fn kept(&self) -> Option<[&[u8]; 3]> {
        match self.stage {
            Stage::ResponseComplete | Stage::Panic => self.request.encoded_if_kept(),
            Stage::RequestReceived | Stage::ResponseStarted => Some(self.request.encoded()),
        }
    }

    fn write_audit_id(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        write_audit_id(out, self.request)
    }

    fn write_uri_and_verb(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        write_uri_and_verb(out, self.request)
    }

    fn write_user(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.extend_from_slice(self.user.unwrap_or("{}").as_bytes());
        Ok(())
    }

    fn write_impersonated_user(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        if let Some(user) = self.impersonated_user {
            out.extend_from_slice(b",\"impersonatedUser\":");
            out.extend_from_slice(user.as_bytes());
        }
        Ok(())
    }

    fn write_sources(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        write_sources(out, self.request)
    }

    fn write_object_ref(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        match self.object_ref {
            Some(reference) => write_object_ref(out, object_ref_fields(reference)),
            None => self.request.write_object_ref(out),
        }
    }

    fn write_response_status(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        if let (None, Some(code)) = (self.response_status, self.response_code) {
            // What KubeStatus writes for a bare code (an HTTP code, never 0), without serde.
            out.extend_from_slice(b",\"responseStatus\":{\"metadata\":{},\"code\":");
            write_int(out, i32::from(code));
            out.push(b'}');
        } else if let Some(status) = self.response_status {
            out.extend_from_slice(b",\"responseStatus\":");
            serde_json::to_writer(&mut *out, &KubeStatus(Some(status)))?;
        }
        Ok(())
    }

    fn write_end(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        write_end(
            out,
            self.request_object,
            self.response_object,
            (&self.request.received, &self.stage_timestamp),
            AnnotationsRef::Encoded(self.annotations),
        )
    }
}

impl EventPieces for Event {
    fn level(&self) -> Level {
        self.level
    }

    fn stage(&self) -> Stage {
        self.stage
    }

    fn write_audit_id(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        json_str(out, &self.audit_id)
    }

    fn write_uri_and_verb(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.extend_from_slice(b",\"requestURI\":");
        json_str(out, &self.request_uri)?;
        out.extend_from_slice(b",\"verb\":");
        json_str(out, &self.verb)
    }

    fn write_user(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        serde_json::to_writer(&mut *out, &self.user)
    }

    fn write_impersonated_user(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        if let Some(user) = &self.impersonated_user {
            out.extend_from_slice(b",\"impersonatedUser\":");
            serde_json::to_writer(&mut *out, user)?;
        }
        Ok(())
    }

    fn write_sources(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        if !self.source_ips.is_empty() {
            out.extend_from_slice(b",\"sourceIPs\":[");
            for (i, ip) in self.source_ips.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                json_str(out, ip)?;
            }
            out.push(b']');
        }
        if !self.user_agent.is_empty() {
            out.extend_from_slice(b",\"userAgent\":");
            json_str(out, &self.user_agent)?;
        }
        Ok(())
    }

    fn write_object_ref(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        match &self.object_ref {
            Some(reference) => write_object_ref(out, object_ref_fields(reference)),
            None => Ok(()),
        }
    }

    fn write_response_status(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        if self.response_status.is_some() {
            out.extend_from_slice(b",\"responseStatus\":");
            serde_json::to_writer(&mut *out, &KubeStatus(self.response_status.as_ref()))?;
        }
        Ok(())
    }

    fn write_end(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        write_end(
            out,
            self.request_object.as_ref(),
            self.response_object.as_ref(),
            (&self.request_received_timestamp, &self.stage_timestamp),
            AnnotationsRef::Map(&self.annotations),
        )
    }
}

impl Parts<'_> {
    fn to_event(&self) -> Event {
        let r = self.request;
        let mut event = Event::new(self.level, String::from_utf8_lossy(r.audit_id.as_bytes()).into_owned(), r.received);
        event.stage = self.stage;
        event.stage_timestamp = self.stage_timestamp;
        event.request_uri = r.uri.as_str().to_string();
        event.verb = r.verb.as_str().to_string();
        // Written by write_user, so they read back (else the event says less, never fails).
        let user = |json: &str| serde_json::from_str::<EventUser>(json).unwrap_or_default();
        event.user = self.user.map(user).unwrap_or_default();
        event.impersonated_user = self.impersonated_user.map(user);
        r.for_each_source_ip(|ip| event.source_ips.push(ip.to_string()));
        event.user_agent = r.user_agent().map(|a| a.into_owned()).unwrap_or_default();
        event.object_ref = self.object_ref.cloned().or_else(|| r.object_ref());
        event.response_status = self
            .response_status
            .cloned()
            .or_else(|| self.response_code.map(|code| Status { code: Some(i32::from(code)), ..Default::default() }));
        event.request_object = self.request_object.cloned();
        event.response_object = self.response_object.cloned();
        event.annotations = self.annotations.to_map();
        event
    }
}

/// Users whose JSON a thread keeps ([`shared_user_json`]).
const CACHED_USERS: usize = 4;

/// Shared annotations whose JSON a thread keeps ([`shared_annotation_json`]).
const CACHED_ANNOTATIONS: usize = 8;

/// A constant key and a shared value.
type SharedAnnotation = (&'static str, Arc<str>);

/// A thread's last few encodings of shared values, each beside what it was
/// written from: held, so that its address is not reused while it stands
/// here, and the value is the same exactly when the address is.
type Recent<K> = RefCell<Vec<(K, Arc<str>)>>;

thread_local! {
    static USER_JSON: Recent<Arc<UserInfo>> = const { RefCell::new(Vec::new()) };
    static ANNOTATION_JSON: Recent<SharedAnnotation> = const { RefCell::new(Vec::new()) };
}

/// The JSON `recent` keeps for the value `same` finds, else `encode`d now
/// and kept in place of the oldest of `capacity`; encoded anew on a thread
/// being torn down.
fn remembered<K: 'static>(
    recent: &'static std::thread::LocalKey<Recent<K>>,
    capacity: usize,
    same: impl Fn(&K) -> bool,
    key: impl FnOnce() -> K,
    encode: impl Fn() -> Arc<str>,
) -> Arc<str> {
    let kept = recent.try_with(|recent| {
        let mut recent = recent.borrow_mut();
        if let Some((_, json)) = recent.iter().find(|(k, _)| same(k)) {
            return json.clone();
        }
        let json = encode();
        if recent.len() == capacity {
            recent.remove(0);
        }
        recent.push((key(), json.clone()));
        json
    });
    kept.unwrap_or_else(|_| encode())
}

/// `user` as an event writes it ([`write_user`]), shared by the requests
/// that `user` itself is shared by (a token's cached review, a connection's
/// certificate): encoded once for the thread's last few users rather than
/// once a request. A service account's user is a dozen strings, a large
/// part of an audited GET's encoding (measured: docs/performance.md,
/// "Auditing: the record and its encoding").
pub(crate) fn shared_user_json(user: &Arc<UserInfo>) -> Arc<str> {
    remembered(&USER_JSON, CACHED_USERS, |known| Arc::ptr_eq(known, user), || user.clone(), || user_json(user))
}

/// `user` as an event writes it, encoded now.
pub(crate) fn user_json(user: &UserInfo) -> Arc<str> {
    let mut out = Vec::with_capacity(256);
    // Writing strings into a Vec does not fail; the bytes are UTF-8 from strings.
    if write_user(&mut out, user).is_err() {
        return Arc::from("{}");
    }
    std::str::from_utf8(&out).map_or_else(|_| Arc::from("{}"), Arc::from)
}

/// `"key":"value"` as an event's annotations write it.
pub(crate) fn annotation_json(key: &str, value: &str) -> Arc<str> {
    let mut out = Vec::with_capacity(key.len() + value.len() + 8);
    // Writing strings into a Vec does not fail; the bytes are UTF-8 from strings.
    let written = json_str(&mut out, key).and_then(|()| {
        out.push(b':');
        json_str(&mut out, value)
    });
    match (written, std::str::from_utf8(&out)) {
        (Ok(()), Ok(text)) => Arc::from(text),
        _ => Arc::from("\"\":\"\""),
    }
}

/// [`annotation_json`] of a constant key and a shared value (the
/// authorizer's cached reason and its decision), encoded once for the
/// thread's last few rather than once a request: RBAC's reason is a hundred
/// bytes with quotes to escape.
pub(crate) fn shared_annotation_json(key: &'static str, value: &Arc<str>) -> Arc<str> {
    remembered(
        &ANNOTATION_JSON,
        CACHED_ANNOTATIONS,
        |(k, v)| std::ptr::eq(*k, key) && Arc::ptr_eq(v, value),
        || (key, value.clone()),
        || annotation_json(key, value),
    )
}

/// `user` as an event's `user` or `impersonatedUser`: the JSON serde writes
/// for k8s-openapi's `UserInfo` with the empty fields left out (`extra`,
/// `groups`, `uid`, `username`), written once a request rather than through
/// an owned `UserInfo` for each event (a service account's user is a dozen
/// strings to copy, and serde escaped them again for every event).
pub(crate) fn write_user(out: &mut Vec<u8>, user: &UserInfo) -> serde_json::Result<()> {
    out.push(b'{');
    let mut first = true;
    let mut key = |out: &mut Vec<u8>, key: &[u8]| {
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(key);
    };
    if !user.extra.is_empty() {
        key(out, b"\"extra\":");
        write_object(out, &user.extra, |out, values| write_strs(out, values))?;
    }
    if !user.groups.is_empty() {
        key(out, b"\"groups\":");
        write_strs(out, &user.groups)?;
    }
    if !user.uid.is_empty() {
        key(out, b"\"uid\":");
        json_str(out, &user.uid)?;
    }
    if !user.name.is_empty() {
        key(out, b"\"username\":");
        json_str(out, &user.name)?;
    }
    out.push(b'}');
    Ok(())
}

/// A JSON object of `entries` in their order, each value written by `value`.
fn write_object<'a, V: 'a>(
    out: &mut Vec<u8>,
    entries: impl IntoIterator<Item = (&'a String, &'a V)>,
    value: impl Fn(&mut Vec<u8>, &V) -> serde_json::Result<()>,
) -> serde_json::Result<()> {
    out.push(b'{');
    for (i, (key, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json_str(out, key)?;
        out.push(b':');
        value(out, v)?;
    }
    out.push(b'}');
    Ok(())
}

/// A JSON array of strings.
fn write_strs(out: &mut Vec<u8>, values: &[String]) -> serde_json::Result<()> {
    out.push(b'[');
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json_str(out, value)?;
    }
    out.push(b']');
    Ok(())
}

/// `n` as decimal digits, without the formatter.
fn write_int(out: &mut Vec<u8>, n: i32) {
    if n < 0 {
        out.push(b'-');
    }
    let mut digits = [0u8; 10];
    let mut value = n.unsigned_abs();
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

thread_local! {
    /// The second last written and its `2006-01-02T15:04:05.` prefix: the
    /// events of a second share it, and only the microseconds are written
    /// anew (the calendar arithmetic is most of a timestamp's cost).
    static SECOND: RefCell<(i64, [u8; 20])> = const { RefCell::new((i64::MIN, [0; 20])) };
}

/// An event's annotations: an owned event's map, or a record's, each
/// already encoded.
pub(crate) enum AnnotationsRef<'a> {
    Map(&'a std::collections::BTreeMap<String, String>),
    Encoded(&'a Annotations),
}

/// How every event's JSON ends, from `requestObject` on, closing brace
/// included: one home for the owned event's encoding and the record's.
pub(crate) fn write_end(
    out: &mut Vec<u8>,
    request_object: Option<&Value>,
    response_object: Option<&Value>,
    (received, stage): (&DateTime<Utc>, &DateTime<Utc>),
    annotations: AnnotationsRef<'_>,
) -> serde_json::Result<()> {
    if let Some(object) = request_object {
        out.extend_from_slice(b",\"requestObject\":");
        serde_json::to_writer(&mut *out, object)?;
    }
    if let Some(object) = response_object {
        out.extend_from_slice(b",\"responseObject\":");
        serde_json::to_writer(&mut *out, object)?;
    }
    out.extend_from_slice(b",\"requestReceivedTimestamp\":");
    write_time(out, received)?;
    out.extend_from_slice(b",\"stageTimestamp\":");
    write_time(out, stage)?;
    match annotations {
        AnnotationsRef::Map(map) if !map.is_empty() => {
            out.extend_from_slice(b",\"annotations\":");
            write_object(out, map, |out, value| json_str(out, value))?;
        }
        AnnotationsRef::Map(_) => {}
        AnnotationsRef::Encoded(annotations) => {
            for (i, json) in annotations.members().enumerate() {
                out.extend_from_slice(if i == 0 { b",\"annotations\":{" } else { b"," });
                out.extend_from_slice(json.as_bytes());
            }
            if !annotations.is_empty() {
                out.push(b'}');
            }
        }
    }
    out.push(b'}');
    Ok(())
}

/// `metav1.MicroTime` as a JSON string, as every event writes its timestamps.
pub(crate) fn write_time(out: &mut Vec<u8>, t: &DateTime<Utc>) -> serde_json::Result<()> {
    let second = t.timestamp();
    let micros = t.timestamp_subsec_micros().min(999_999);
    let cached = SECOND.with_borrow_mut(|(cached, prefix)| {
        if *cached != second {
            let mut digits = [0u8; super::event::MICRO_TIME_LEN];
            let text = micro_time_digits(t, &mut digits)?;
            prefix.copy_from_slice(&text[..20]);
            *cached = second;
        }
        Some(*prefix)
    });
    let Some(prefix) = cached else {
        // A year past 9999: as the owned event writes it.
        return super::event::json_micro_time(out, t);
    };
    out.push(b'"');
    out.extend_from_slice(&prefix);
    let mut fraction = [b'0'; 6];
    let mut value = micros;
    for digit in fraction.iter_mut().rev() {
        *digit = b'0' + (value % 10) as u8;
        value /= 10;
    }
    out.extend_from_slice(&fraction);
    out.extend_from_slice(b"Z\"");
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use chrono::TimeZone;
    use http::{HeaderMap, HeaderValue, Method, Uri};

    use super::*;
    use crate::apimachinery::request_info::classify;
    use crate::audit::backend::Backend;
    use crate::audit::context::{Arrival, AuditContext};
    use crate::audit::metrics::AuditMetrics;
    use crate::audit::policy::PolicyEvaluator;
    use crate::audit::Auditor;
    use crate::auth::authn::UserInfo;

    /// Records at once, as the log does: each event's JSON written from the
    /// record, and the JSON of the owned event made from it.
    #[derive(Default)]
    struct Both(Mutex<Vec<(String, String)>>);

    #[async_trait::async_trait]
    impl Backend for Both {
        async fn process_events(&self, _: &[Arc<Event>]) -> bool {
            unreachable!("every event is written at once")
        }

        fn process_now(&self, event: &EventRef<'_>) -> Option<crate::audit::backend::Handed> {
            let (mut fast, mut owned) = (Vec::new(), Vec::new());
            event.write_json(&mut fast).unwrap();
            EventRef::from(&event.to_event()).write_json(&mut owned).unwrap();
            let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
            self.0.lock().unwrap().push((text(fast), text(owned)));
            Some(crate::audit::backend::Handed::Done(true))
        }

        fn at_once(&self) -> bool {
            true
        }
    }

    const POLICY: &[u8] = br#"{"apiVersion":"audit.k8s.io/v1","kind":"Policy","rules":[{"level":"RequestResponse"}]}"#;

    /// One request through its record's stages (RequestReceived written or
    /// not: ResponseComplete then writes the request's parts itself, else
    /// from what the first kept); the events both ways.
    fn events(
        received: bool,
        method: Method,
        uri: &str,
        headers: HeaderMap,
        peer: &str,
        body: &[u8],
        answer: &[u8],
    ) -> Vec<(String, String)> {
        let both = Arc::new(Both::default());
        let auditor =
            Arc::new(Auditor::new(PolicyEvaluator::from_bytes(POLICY).unwrap(), both.clone(), AuditMetrics::default()));
        let uri: Uri = uri.parse().unwrap();
        let info = classify(&method, uri.path(), uri.query());
        let ctx = AuditContext::new(
            auditor,
            Arrival {
                audit_id: HeaderValue::from_static("id-\"1\""),
                received: Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap() + chrono::Duration::microseconds(7),
                headers: &headers,
                uri: &uri,
                peer: Some(peer.parse().unwrap()),
                info: &info,
                config: None,
            },
        );
        let user = UserInfo {
            name: "système:alice".into(),
            uid: "u\u{1}".into(),
            groups: vec!["g1".into(), "g\"2".into()],
            extra: [("scopes".to_string(), vec!["a".to_string()])].into(),
        };
        ctx.evaluate(Some(&Arc::new(user)), &info);
        ctx.set_impersonated_user(&UserInfo { name: "bob".into(), ..Default::default() });
        ctx.add_annotation("k\"", "v\n");
        ctx.add_annotation("authorization.k8s.io/decision", "allow");
        ctx.add_shared_annotation("authorization.k8s.io/reason", &Arc::from("RBAC: allowed by \"b\" of \"r\""));
        if received {
            assert!(ctx.process_now(Stage::RequestReceived).is_ok_and(|ok| ok));
        }
        ctx.start_request_body();
        ctx.request_chunk(&bytes::Bytes::copy_from_slice(body));
        let code = if answer.starts_with(br#"{"kind":"Status""#) { 404 } else { 201 };
        ctx.responded(code, Some("application/json"), None);
        assert!(ctx.complete_now(Some(answer.to_vec())).is_none());
        let events = both.0.lock().unwrap().clone();
        assert_eq!(events.len(), if received { 2 } else { 1 });
        events
    }

    #[test]
    fn events_written_from_the_record_are_those_of_the_owned_event() {
        for received in [true, false] {
            written_from_the_record(received);
        }
    }

    fn written_from_the_record(received: bool) {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", HeaderValue::from_static("10.1.2.3, bogus, ::1"));
        headers.insert("x-real-ip", HeaderValue::from_static("192.168.0.255"));
        headers.insert(
            http::header::USER_AGENT,
            HeaderValue::from_str(&format!("kubectl/\"x\" {}", "a".repeat(1100))).unwrap(),
        );
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let created = events(
            received,
            Method::POST,
            "/apis/g/v1/namespaces/ns/things?dryRun=All&x=%22",
            headers,
            "10.0.0.9:443",
            br#"{"metadata":{"name":"t","namespace":"ns"},"spec":{"a":"\u0007"}}"#,
            br#"{"metadata":{"name":"t"},"b":[1,2.5,null]}"#,
        );
        let missing = events(
            received,
            Method::GET,
            "/apis/g/v1/namespaces/ns/things/t/status",
            HeaderMap::new(),
            "[fe80::1:2]:443",
            b"",
            br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"things \"t\" not found","reason":"NotFound","details":{"name":"t","kind":"things"},"code":404}"#,
        );
        let discovery = events(received, Method::GET, "/apis", HeaderMap::new(), "127.0.0.1:1", b"", b"");
        for (fast, owned) in created.iter().chain(&missing).chain(&discovery) {
            assert_eq!(fast, owned);
            let event: Value = serde_json::from_str(fast).unwrap();
            assert_eq!(event["auditID"], "id-\"1\"");
        }
        let done: Value = serde_json::from_str(&created.last().unwrap().0).unwrap();
        assert_eq!(done["objectRef"]["name"], "t", "a created object's name from its body");
        assert_eq!(done["responseStatus"], serde_json::json!({"metadata": {}, "code": 201}), "kube's bare code");
        assert_eq!(done["sourceIPs"], serde_json::json!(["10.1.2.3", "::1", "192.168.0.255", "10.0.0.9"]));
        assert!(done["userAgent"].as_str().unwrap().ends_with("...TRUNCATED"));
        let failed: Value = serde_json::from_str(&missing.last().unwrap().0).unwrap();
        assert_eq!(failed["responseStatus"]["reason"], "NotFound");
        assert_eq!(failed["sourceIPs"], serde_json::json!(["fe80::1:2"]));
    }

    /// A user is written as serde writes k8s-openapi's UserInfo with the
    /// empty fields left out.
    #[test]
    fn users_are_written_as_serde_writes_them() {
        let users = [
            UserInfo::default(),
            UserInfo { name: "alice".into(), ..Default::default() },
            UserInfo {
                name: "système:\"alice\"".into(),
                uid: "u\u{1}".into(),
                groups: vec!["g1".into(), "g\\2".into()],
                extra: [
                    ("scopes".to_string(), vec!["a".to_string(), "b\n".to_string()]),
                    ("authentication.kubernetes.io/credential-id".to_string(), vec![]),
                ]
                .into(),
            },
        ];
        for user in users {
            let owned = EventUser {
                username: Some(user.name.clone()).filter(|n| !n.is_empty()),
                uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
                groups: Some(user.groups.clone()).filter(|g| !g.is_empty()),
                extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
            };
            let mut fast = Vec::new();
            write_user(&mut fast, &user).unwrap();
            assert_eq!(String::from_utf8(fast).unwrap(), serde_json::to_string(&owned).unwrap(), "{user:?}");
        }
    }

    /// The cached second's prefix, across seconds, days and years, writes
    /// what the owned event writes.
    #[test]
    fn timestamps_from_the_cached_second_are_the_owned_events() {
        let start = Utc.with_ymd_and_hms(1999, 12, 31, 23, 59, 58).unwrap();
        let mut times: Vec<DateTime<Utc>> =
            (0..40).map(|i| start + chrono::Duration::microseconds(i * 123_457 + i % 3)).collect();
        times.push(Utc.with_ymd_and_hms(10000, 1, 1, 0, 0, 0).unwrap());
        times.push(start);
        for t in times {
            let (mut fast, mut owned) = (Vec::new(), Vec::new());
            write_time(&mut fast, &t).unwrap();
            super::super::event::json_micro_time(&mut owned, &t).unwrap();
            assert_eq!(String::from_utf8(fast).unwrap(), String::from_utf8(owned).unwrap(), "{t:?}");
        }
    }

    /// The same shared user is encoded once a thread; another user, or a
    /// copy of one, is not taken for it; the thread keeps a few.
    #[test]
    fn shared_users_are_encoded_once_and_never_mistaken() {
        let alice = Arc::new(UserInfo { name: "alice".into(), groups: vec!["g".into()], ..Default::default() });
        let first = shared_user_json(&alice);
        assert_eq!(&*first, r#"{"groups":["g"],"username":"alice"}"#);
        assert!(Arc::ptr_eq(&first, &shared_user_json(&alice)), "encoded once");
        let copy = Arc::new((*alice).clone());
        let again = shared_user_json(&copy);
        assert_eq!(again, first);
        assert!(!Arc::ptr_eq(&again, &first), "a copy is another user");
        for i in 0..CACHED_USERS {
            let other = Arc::new(UserInfo { name: format!("u{i}"), ..Default::default() });
            assert_eq!(&*shared_user_json(&other), format!(r#"{{"username":"u{i}"}}"#));
        }
        assert!(!Arc::ptr_eq(&shared_user_json(&alice), &first), "only the last few are kept");
    }

    /// A shared annotation is encoded once a thread, as any other is, and
    /// an equal value that is another string is not taken for it.
    #[test]
    fn shared_annotations_are_encoded_once_and_never_mistaken() {
        const KEY: &str = "authorization.k8s.io/reason";
        let reason: Arc<str> = Arc::from("RBAC: allowed by ClusterRoleBinding \"b\"");
        let first = shared_annotation_json(KEY, &reason);
        assert_eq!(first, annotation_json(KEY, &reason));
        assert_eq!(&*first, r#""authorization.k8s.io/reason":"RBAC: allowed by ClusterRoleBinding \"b\"""#);
        assert!(Arc::ptr_eq(&first, &shared_annotation_json(KEY, &reason)), "encoded once");
        let copy: Arc<str> = Arc::from(&*reason);
        assert!(!Arc::ptr_eq(&first, &shared_annotation_json(KEY, &copy)), "a copy is another value");
        let other: Arc<str> = Arc::from("other");
        assert_eq!(&*shared_annotation_json(KEY, &other), r#""authorization.k8s.io/reason":"other""#);
    }
}
