//! audit.k8s.io/v1 `Event` and `EventList`, written as k8s.io/apiserver's
//! `pkg/apis/audit/v1/types.go` encodes them (k8s-openapi has no audit
//! types): the same field names, order and omissions, timestamps as
//! `metav1.MicroTime` (RFC 3339 with microseconds, UTC), and the one-line
//! `legacy` format of `pkg/audit/format.go`.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusDetails};
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::apimachinery::gofmt::go_quote;

/// The group version of audit's types (events, and the only one kube reads policies in).
pub const API_VERSION: &str = "audit.k8s.io/v1";

/// The header carrying a request's audit ID, both ways.
pub const HEADER_AUDIT_ID: &str = "audit-id";

/// How much of a request is recorded, in increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Level {
    None,
    Metadata,
    Request,
    RequestResponse,
}

impl Level {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "None" => Self::None,
            "Metadata" => Self::Metadata,
            "Request" => Self::Request,
            "RequestResponse" => Self::RequestResponse,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "None",
            Self::Metadata => "Metadata",
            Self::Request => "Request",
            Self::RequestResponse => "RequestResponse",
        }
    }
}

/// When in a request's life an event is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Stage {
    /// As soon as the request is authenticated, before anything else.
    RequestReceived = 0,
    /// Once the response headers are sent, for long-running requests (watches).
    ResponseStarted = 1,
    /// Once the response is sent.
    ResponseComplete = 2,
    /// When the handler panicked.
    Panic = 3,
}

impl Stage {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "RequestReceived" => Self::RequestReceived,
            "ResponseStarted" => Self::ResponseStarted,
            "ResponseComplete" => Self::ResponseComplete,
            "Panic" => Self::Panic,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::RequestReceived => "RequestReceived",
            Self::ResponseStarted => "ResponseStarted",
            Self::ResponseComplete => "ResponseComplete",
            Self::Panic => "Panic",
        }
    }
}

/// What a resource request was about.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// One audit event: a request at one stage, owned (what a backend that keeps
/// events holds). It is written as JSON by `EventRef::write_json`, the one
/// writer of every event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub kind: &'static str,
    pub api_version: &'static str,
    pub level: Level,
    pub audit_id: String,
    pub stage: Stage,
    pub request_uri: String,
    pub verb: String,
    pub user: UserInfo,
    pub impersonated_user: Option<UserInfo>,
    pub source_ips: Vec<String>,
    pub user_agent: String,
    pub object_ref: Option<ObjectReference>,
    pub response_status: Option<Status>,
    pub request_object: Option<Value>,
    pub response_object: Option<Value>,
    pub request_received_timestamp: DateTime<Utc>,
    pub stage_timestamp: DateTime<Utc>,
    pub annotations: BTreeMap<String, String>,
}

impl Event {
    /// An event at `level` with nothing recorded yet.
    pub fn new(level: Level, audit_id: String, received: DateTime<Utc>) -> Self {
        Self {
            kind: "Event",
            api_version: API_VERSION,
            level,
            audit_id,
            stage: Stage::RequestReceived,
            request_uri: String::new(),
            verb: String::new(),
            user: UserInfo::default(),
            impersonated_user: None,
            source_ips: Vec::new(),
            user_agent: String::new(),
            object_ref: None,
            response_status: None,
            request_object: None,
            response_object: None,
            request_received_timestamp: received,
            stage_timestamp: received,
            annotations: BTreeMap::new(),
        }
    }

    /// The `legacy` log line (k8s.io/apiserver `EventString`), without its newline.
    pub fn legacy_line(&self) -> String {
        let quoted_list = |list: &[String]| list.iter().map(|s| go_quote(s)).collect::<Vec<_>>().join(",");
        let username = self.user.username.as_deref().filter(|u| !u.is_empty());
        let groups = match (username, self.user.groups.as_deref()) {
            (Some(_), Some(groups)) if !groups.is_empty() => quoted_list(groups),
            _ => "<none>".to_string(),
        };
        let (as_user, as_groups) = match &self.impersonated_user {
            Some(u) => (
                u.username.clone().unwrap_or_default(),
                u.groups.as_deref().map_or_else(|| "<lookup>".to_string(), quoted_list),
            ),
            None => ("<self>".to_string(), "<lookup>".to_string()),
        };
        let namespace =
            self.object_ref.as_ref().map(|r| r.namespace.as_str()).filter(|n| !n.is_empty()).unwrap_or("<none>");
        let response =
            self.response_status.as_ref().map_or_else(|| "<deferred>".to_string(), |s| s.code.unwrap_or(0).to_string());
        let ip = self.source_ips.first().map_or("<unknown>", String::as_str);
        format!(
            "{} AUDIT: id={} stage={} ip={} method={} user={} groups={} as={} asgroups={} user-agent={} namespace={} uri={} response=\"{}\"",
            go_rfc3339_nano(&self.request_received_timestamp),
            go_quote(&self.audit_id),
            go_quote(self.stage.as_str()),
            go_quote(ip),
            go_quote(&self.verb),
            go_quote(username.unwrap_or("<none>")),
            go_quote(&groups),
            go_quote(&as_user),
            go_quote(&as_groups),
            go_quote(&self.user_agent),
            go_quote(namespace),
            go_quote(&self.request_uri),
            response
        )
    }
}

/// Go's `time.RFC3339Nano` in UTC: the fraction without its trailing zeros
/// (none when it is zero).
fn go_rfc3339_nano(t: &DateTime<Utc>) -> String {
    let seconds = t.to_rfc3339_opts(SecondsFormat::Secs, true);
    let nanos = format!("{:09}", t.timestamp_subsec_nanos());
    let fraction = nanos.trim_end_matches('0');
    match seconds.strip_suffix('Z') {
        Some(base) if !fraction.is_empty() => format!("{base}.{fraction}Z"),
        _ => seconds,
    }
}

/// `s` as a JSON string, the bytes serde_json writes for it: the runs that
/// need no escape copied whole, found eight bytes at a time. An audit event's
/// strings are mostly plain, but not all: RBAC's reason quotes the names of
/// its binding and role, and serde_json's byte-at-a-time escaping makes that
/// one annotation cost more than the rest of the event's strings.
pub(crate) fn json_str(out: &mut Vec<u8>, s: &str) -> serde_json::Result<()> {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    while let Some(at) = next_escape(bytes, start) {
        out.extend_from_slice(&bytes[start..at]);
        write_escape(out, bytes[at]);
        start = at + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
    Ok(())
}

/// The first byte from `from` on that serde_json escapes (a control
/// character, `"` or `\\`). Eight bytes at a time: a byte below 0x20, or
/// equal to one of the two, found with the zero-byte test on the word, in
/// fewer instructions than a byte-by-byte search.
fn next_escape(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    // Exact as a yes or no: a byte is below n (n <= 0x80) / a byte is zero.
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH != 0;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH != 0;
    let escaped = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
    let rest = bytes.get(from..)?;
    let mut chunks = rest.chunks_exact(8);
    let mut at = from;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_ne_bytes(word);
        if below(x, 0x20) || zero(x ^ (ONES * u64::from(b'"'))) || zero(x ^ (ONES * u64::from(b'\\'))) {
            // In this word: which byte.
            return chunk.iter().position(|&b| escaped(b)).map(|i| at + i);
        }
        at += 8;
    }
    chunks.remainder().iter().position(|&b| escaped(b)).map(|i| at + i)
}

/// The escape serde_json writes for `byte`: the short forms, else `\u00XX`.
fn write_escape(out: &mut Vec<u8>, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = match byte {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x0c => b'f',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        _ => 0,
    };
    if short != 0 {
        out.extend_from_slice(&[b'\\', short]);
    } else {
        out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0xf)]]);
    }
}

/// A `metav1.MicroTime` (`2006-01-02T15:04:05.000000Z`, in UTC) as a JSON
/// string into `out`.
pub(crate) fn json_micro_time(out: &mut Vec<u8>, t: &DateTime<Utc>) -> serde_json::Result<()> {
    let mut buf = [0u8; MICRO_TIME_LEN];
    match micro_time_digits(t, &mut buf) {
        Some(text) => {
            out.push(b'"');
            out.extend_from_slice(text);
            out.push(b'"');
            Ok(())
        }
        None => json_str(out, &MicroTimeDisplay(t).to_string()),
    }
}

/// A `metav1.Status` as it appears inside an event: k8s-openapi writes
/// `kind` and `apiVersion` into every Status, kube leaves the TypeMeta of
/// `responseStatus` empty (and so out). Go's field order.
pub(crate) struct KubeStatus<'a>(pub Option<&'a Status>);

impl Serialize for KubeStatus<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Some(status) => status_fields(status, s),
            None => s.serialize_none(),
        }
    }
}

/// `metav1.MicroTime`: `2006-01-02T15:04:05.000000Z07:00`, in UTC: its length.
pub(crate) const MICRO_TIME_LEN: usize = "2006-01-02T15:04:05.000000Z".len();

/// The time written digit by digit into `buf`, for a year of four digits
/// (None otherwise). Through `format_args!` and serde's `collect_str`,
/// every piece of the format is escaped on its own, and each of an event's
/// timestamps costs a large share of encoding it (measured:
/// docs/performance.md, "Auditing: the record and its encoding").
pub(crate) fn micro_time_digits<'a>(t: &DateTime<Utc>, buf: &'a mut [u8; MICRO_TIME_LEN]) -> Option<&'a [u8]> {
    use chrono::{Datelike, Timelike};
    let year = u32::try_from(t.year()).ok().filter(|y| *y <= 9999)?;
    let mut put = |at: usize, width: usize, mut value: u32| {
        for i in (at..at + width).rev() {
            buf[i] = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, 4, year);
    put(5, 2, t.month());
    put(8, 2, t.day());
    put(11, 2, t.hour());
    put(14, 2, t.minute());
    put(17, 2, t.second());
    put(20, 6, t.timestamp_subsec_micros().min(999_999));
    for (at, separator) in [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':'), (19, b'.'), (26, b'Z')] {
        buf[at] = separator;
    }
    Some(&buf[..])
}

/// The same for any year, through the formatter.
struct MicroTimeDisplay<'a>(&'a DateTime<Utc>);

impl std::fmt::Display for MicroTimeDisplay<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use chrono::{Datelike, Timelike};
        let t = self.0;
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
            t.year(),
            t.month(),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.timestamp_subsec_micros().min(999_999)
        )
    }
}

fn status_fields<S: Serializer>(status: &Status, s: S) -> Result<S::Ok, S::Error> {
    let mut st = s.serialize_struct("Status", 6)?;
    st.serialize_field("metadata", &status.metadata)?;
    if let Some(v) = status.status.as_ref().filter(|v| !v.is_empty()) {
        st.serialize_field("status", v)?;
    }
    if let Some(v) = status.message.as_ref().filter(|v| !v.is_empty()) {
        st.serialize_field("message", v)?;
    }
    if let Some(v) = status.reason.as_ref().filter(|v| !v.is_empty()) {
        st.serialize_field("reason", v)?;
    }
    if let Some(v) = status.details.as_ref() {
        st.serialize_field("details", &Details(v))?;
    }
    if let Some(v) = status.code.filter(|c| *c != 0) {
        st.serialize_field("code", &v)?;
    }
    st.end()
}

/// StatusDetails in Go's field order (name, group, kind, uid, causes, retryAfterSeconds).
struct Details<'a>(&'a StatusDetails);

impl Serialize for Details<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let d = self.0;
        let mut st = s.serialize_struct("StatusDetails", 6)?;
        if let Some(v) = d.name.as_ref().filter(|v| !v.is_empty()) {
            st.serialize_field("name", v)?;
        }
        if let Some(v) = d.group.as_ref().filter(|v| !v.is_empty()) {
            st.serialize_field("group", v)?;
        }
        if let Some(v) = d.kind.as_ref().filter(|v| !v.is_empty()) {
            st.serialize_field("kind", v)?;
        }
        if let Some(v) = d.uid.as_ref().filter(|v| !v.is_empty()) {
            st.serialize_field("uid", v)?;
        }
        if let Some(v) = d.causes.as_ref().filter(|v| !v.is_empty()) {
            st.serialize_field("causes", v)?;
        }
        if let Some(v) = d.retry_after_seconds.filter(|v| *v != 0) {
            st.serialize_field("retryAfterSeconds", &v)?;
        }
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    /// Every byte value at every position of words and their remainder,
    /// alone and beside others: the bytes serde_json writes.
    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let json = |s: &str| {
            let mut out = Vec::new();
            json_str(&mut out, s).unwrap();
            String::from_utf8(out).unwrap()
        };
        for len in [1, 7, 8, 9, 16, 23] {
            for at in 0..len {
                for b in 0..=127u8 {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = b;
                    if at + 2 < len {
                        bytes[at + 2] = b'"';
                    }
                    let text = String::from_utf8(bytes).unwrap();
                    assert_eq!(json(&text), serde_json::to_string(&text).unwrap(), "{b:#x} at {at} of {len}");
                }
            }
        }
        for text in [
            "",
            "système ☃ ü",
            "\\\\\"\"",
            "RBAC: allowed by ClusterRoleBinding \"a\" of ClusterRole \"b\"",
            "\u{7f}\u{1f}\u{0}",
        ] {
            assert_eq!(json(text), serde_json::to_string(text).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn legacy_times_read_as_gos_rfc3339_nano() {
        let t = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        assert_eq!(go_rfc3339_nano(&t), "2026-01-02T03:04:05Z");
        assert_eq!(go_rfc3339_nano(&(t + chrono::Duration::microseconds(120))), "2026-01-02T03:04:05.00012Z");
    }

    #[test]
    fn micro_times_are_written_as_the_formatter_writes_them() {
        let times = [
            Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap(),
            Utc.with_ymd_and_hms(1999, 12, 31, 23, 59, 59).unwrap() + chrono::Duration::nanoseconds(999_999_999),
            Utc.with_ymd_and_hms(10000, 1, 1, 0, 0, 0).unwrap() + chrono::Duration::microseconds(1),
            Utc.with_ymd_and_hms(7, 6, 5, 4, 3, 2).unwrap() + chrono::Duration::microseconds(654_321),
        ];
        let written = |t: &DateTime<Utc>| {
            let mut out = Vec::new();
            json_micro_time(&mut out, t).unwrap();
            String::from_utf8(out).unwrap()
        };
        for t in times {
            assert_eq!(written(&t), format!("\"{}\"", MicroTimeDisplay(&t)), "{t:?}");
        }
        assert_eq!(written(&times[1]), "\"1999-12-31T23:59:59.999999Z\"");
    }

    /// An owned event is written as kube writes it, with every field, with
    /// none, and with strings that need escaping (the expected bytes are what
    /// serde_json writes for audit.k8s.io/v1's Event).
    #[test]
    fn owned_events_are_written_with_every_field_none_and_escapes() {
        let received = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap() + chrono::Duration::microseconds(7);
        let bare = Event::new(Level::None, String::new(), received);
        let mut full = Event::new(Level::RequestResponse, "id \"1\"\n".into(), received);
        full.stage = Stage::Panic;
        full.stage_timestamp = Utc.with_ymd_and_hms(10000, 1, 1, 0, 0, 0).unwrap();
        full.request_uri = "/apis/g/v1/things?labelSelector=a%3Db&x=\\".into();
        full.verb = "create".into();
        full.user = UserInfo {
            username: Some("système:\u{1}alice".into()),
            uid: Some("u".into()),
            groups: Some(vec!["g1".into(), "g\"2".into()]),
            extra: Some([("scopes".to_string(), vec!["a".to_string()])].into()),
        };
        full.impersonated_user = Some(UserInfo { username: Some("bob".into()), ..Default::default() });
        full.source_ips = vec!["10.0.0.1".into(), "::1".into()];
        full.user_agent = "kubectl/\t\"x\" ☃".into();
        full.object_ref = Some(ObjectReference {
            resource: "things".into(),
            name: "a\\b".into(),
            uid: "123".into(),
            api_version: "v1".into(),
            resource_version: "7".into(),
            subresource: "status".into(),
            ..Default::default()
        });
        full.response_status = Some(Status {
            code: Some(500),
            status: Some("Failure".into()),
            message: Some("boom \"x\"".into()),
            details: Some(StatusDetails { name: Some("a".into()), ..Default::default() }),
            ..Default::default()
        });
        full.request_object = Some(serde_json::json!({"b": 1, "a": ["\u{7}", null, 2.5]}));
        full.response_object = Some(serde_json::json!({"kind": "Thing"}));
        full.annotations.insert("k\"".into(), "v\n".into());
        full.annotations.insert("a".into(), "b".into());
        let mut partial = bare.clone();
        partial.object_ref = Some(ObjectReference { namespace: "ns".into(), ..Default::default() });
        partial.response_status = Some(Status::default());
        let expected = [
            r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"None","auditID":"","stage":"RequestReceived","requestURI":"","verb":"","user":{},"requestReceivedTimestamp":"2026-01-02T03:04:05.000007Z","stageTimestamp":"2026-01-02T03:04:05.000007Z"}"#,
            r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"id \"1\"\n","stage":"Panic","requestURI":"/apis/g/v1/things?labelSelector=a%3Db&x=\\","verb":"create","user":{"extra":{"scopes":["a"]},"groups":["g1","g\"2"],"uid":"u","username":"système:\u0001alice"},"impersonatedUser":{"username":"bob"},"sourceIPs":["10.0.0.1","::1"],"userAgent":"kubectl/\t\"x\" ☃","objectRef":{"resource":"things","name":"a\\b","uid":"123","apiVersion":"v1","resourceVersion":"7","subresource":"status"},"responseStatus":{"metadata":{},"status":"Failure","message":"boom \"x\"","details":{"name":"a"},"code":500},"requestObject":{"a":["\u0007",null,2.5],"b":1},"responseObject":{"kind":"Thing"},"requestReceivedTimestamp":"2026-01-02T03:04:05.000007Z","stageTimestamp":"10000-01-01T00:00:00.000000Z","annotations":{"a":"b","k\"":"v\n"}}"#,
            r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"None","auditID":"","stage":"RequestReceived","requestURI":"","verb":"","user":{},"objectRef":{"namespace":"ns"},"responseStatus":{"metadata":{}},"requestReceivedTimestamp":"2026-01-02T03:04:05.000007Z","stageTimestamp":"2026-01-02T03:04:05.000007Z"}"#,
        ];
        for (event, expected) in [bare, full, partial].iter().zip(expected) {
            let mut out = Vec::new();
            super::super::encode::EventRef::from(event).write_json(&mut out).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), expected);
        }
    }

    #[test]
    fn events_encode_as_kube_writes_them() {
        let received = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap() + chrono::Duration::microseconds(7);
        let mut ev = Event::new(Level::Metadata, "abc".into(), received);
        ev.stage = Stage::ResponseComplete;
        ev.request_uri = "/apis/g/v1/namespaces/ns/things/a".into();
        ev.verb = "get".into();
        ev.user = UserInfo { username: Some("alice".into()), groups: Some(vec!["g1".into()]), ..Default::default() };
        ev.source_ips = vec!["10.0.0.1".into()];
        ev.object_ref = Some(ObjectReference {
            resource: "things".into(),
            namespace: "ns".into(),
            name: "a".into(),
            api_group: "g".into(),
            api_version: "v1".into(),
            ..Default::default()
        });
        ev.response_status = Some(Status {
            code: Some(404),
            status: Some("Failure".into()),
            reason: Some("NotFound".into()),
            message: Some("things.g \"a\" not found".into()),
            details: Some(StatusDetails {
                name: Some("a".into()),
                group: Some("g".into()),
                kind: Some("things".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        ev.annotations.insert("authorization.k8s.io/decision".into(), "allow".into());
        let mut written = Vec::new();
        super::super::encode::EventRef::from(&ev).write_json(&mut written).unwrap();
        let json = String::from_utf8(written).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"abc","stage":"ResponseComplete","requestURI":"/apis/g/v1/namespaces/ns/things/a","verb":"get","user":{"groups":["g1"],"username":"alice"},"sourceIPs":["10.0.0.1"],"objectRef":{"resource":"things","namespace":"ns","name":"a","apiGroup":"g","apiVersion":"v1"},"responseStatus":{"metadata":{},"status":"Failure","message":"things.g \"a\" not found","reason":"NotFound","details":{"name":"a","group":"g","kind":"things"},"code":404},"requestReceivedTimestamp":"2026-01-02T03:04:05.000007Z","stageTimestamp":"2026-01-02T03:04:05.000007Z","annotations":{"authorization.k8s.io/decision":"allow"}}"#
        );
        assert_eq!(
            ev.legacy_line(),
            r#"2026-01-02T03:04:05.000007Z AUDIT: id="abc" stage="ResponseComplete" ip="10.0.0.1" method="get" user="alice" groups="\"g1\"" as="<self>" asgroups="<lookup>" user-agent="" namespace="ns" uri="/apis/g/v1/namespaces/ns/things/a" response="404""#
        );
    }
}
