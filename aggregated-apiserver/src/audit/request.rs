//! What an event records of a request and its answer, read the way
//! k8s.io/apiserver reads it (`pkg/audit/request.go`): the source IPs
//! (`utilnet.SourceIPs`), the user agent (cut at 1024 bytes), and request and
//! response bodies as JSON objects.
//!
//! kube records the *decoded* object re-encoded as JSON; a body is recorded
//! here when it reads as JSON (YAML bodies converted, gzip answers
//! uncompressed), and left out otherwise, as kube leaves out a body it could
//! not decode. Objects are `serde_json::Value`s, whose maps are sorted, as Go
//! writes the maps of an unstructured object (a JSON patch's keys are sorted
//! too, where kube keeps the patch's bytes as sent).

use std::borrow::Cow;
use std::io::Read;
use std::net::IpAddr;
#[cfg(test)]
use std::net::SocketAddr;

#[cfg(test)]
use http::HeaderMap;
use http::HeaderValue;
use serde_json::Value;

use crate::apimachinery::gojson::{go_cut, go_lossy_utf8};
use crate::apimachinery::serializer::yaml_to_json;

const MAX_USER_AGENT_LENGTH: usize = 1024;
const USER_AGENT_TRUNCATE_SUFFIX: &str = "...TRUNCATED";

/// kube's `utilnet.SourceIPs`: every valid address of `X-Forwarded-For`, then
/// `X-Real-Ip` unless already listed, then the peer unless it is the last one.
#[cfg(test)]
pub fn source_ips(headers: &HeaderMap, peer: Option<SocketAddr>) -> Vec<String> {
    let peer = peer.map(|p| p.ip().to_canonical());
    source_ip_list(headers.get("x-forwarded-for"), headers.get("x-real-ip"), peer).into_iter().map(ip_text).collect()
}

/// kube's source IPs from the two headers' values and the peer's address.
pub fn source_ip_list(
    forwarded: Option<&HeaderValue>,
    real: Option<&HeaderValue>,
    peer: Option<IpAddr>,
) -> Vec<IpAddr> {
    let mut ips: Vec<IpAddr> = Vec::new();
    if let Some(forwarded) = forwarded.and_then(|v| v.to_str().ok()) {
        ips.extend(forwarded.split(',').filter_map(|part| part.trim().parse::<IpAddr>().ok()));
    }
    if let Some(real) = real.and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<IpAddr>().ok()) {
        if !ips.contains(&real) {
            ips.push(real);
        }
    }
    if let Some(peer) = peer {
        if ips.last() != Some(&peer) {
            ips.push(peer);
        }
    }
    ips
}

/// An address as its `Display` writes it.
#[cfg(test)]
fn ip_text(ip: IpAddr) -> String {
    let mut text = Vec::with_capacity(15);
    super::parts::write_ip(&mut text, ip);
    String::from_utf8_lossy(&text).into_owned()
}

/// The User-Agent, cut as kube cuts it.
#[cfg(test)]
pub fn user_agent(headers: &HeaderMap) -> String {
    headers.get(http::header::USER_AGENT).map(|ua| user_agent_text(ua).into_owned()).unwrap_or_default()
}

/// A User-Agent header's text as kube records it: its bytes cut at 1024
/// (`ua[:1024]`, which can split a character) with a suffix, then written
/// as Go's JSON writes a string; borrowed when it is short and UTF-8.
pub fn user_agent_text(ua: &HeaderValue) -> Cow<'_, str> {
    let bytes = ua.as_bytes();
    if bytes.len() <= MAX_USER_AGENT_LENGTH {
        return go_lossy_utf8(bytes);
    }
    let mut text = go_cut(bytes, MAX_USER_AGENT_LENGTH).into_owned();
    text.push_str(USER_AGENT_TRUNCATE_SUFFIX);
    Cow::Owned(text)
}

/// A body as a JSON value, or None when it is not one this server reads
/// (another media type, or bytes that do not parse). `limit` bounds a
/// gzip body's uncompressed size.
pub fn body_json(
    content_type: Option<&str>,
    content_encoding: Option<&str>,
    body: &[u8],
    limit: usize,
) -> Option<Value> {
    if body.is_empty() {
        return None;
    }
    let unzipped;
    let body = if content_encoding.is_some_and(|e| e.eq_ignore_ascii_case("gzip")) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(body).take(limit as u64 + 1).read_to_end(&mut out).ok()?;
        if out.len() > limit {
            return None;
        }
        unzipped = out;
        &unzipped[..]
    } else {
        body
    };
    let essence = content_type.unwrap_or("").split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    match essence.as_str() {
        "" | "application/json" => serde_json::from_slice(body).ok(),
        t if t.ends_with("+json") => serde_json::from_slice(body).ok(),
        "application/yaml" | "application/apply-patch+yaml" => {
            serde_json::from_slice(body).ok().or_else(|| serde_json::from_slice(&yaml_to_json(body).ok()?.0).ok())
        }
        _ => None,
    }
}

/// Removes `metadata.managedFields` from an object, the items of a list and
/// the row objects of a Table (kube's `copyWithoutManagedFields`).
pub fn strip_managed_fields(value: &mut Value) {
    fn strip(object: &mut Value) {
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("managedFields");
        }
    }
    strip(value);
    if let Some(items) = value.get_mut("items").and_then(Value::as_array_mut) {
        items.iter_mut().for_each(strip);
    }
    if let Some(rows) = value.get_mut("rows").and_then(Value::as_array_mut) {
        for row in rows {
            if let Some(object) = row.get_mut("object") {
                strip(object);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use serde_json::json;

    use super::*;

    #[test]
    fn source_ips_read_as_kube_reads_them() {
        let peer: SocketAddr = "10.0.0.9:443".parse().unwrap();
        let mut h = HeaderMap::new();
        assert_eq!(source_ips(&h, Some(peer)), ["10.0.0.9"]);
        h.insert("x-forwarded-for", HeaderValue::from_static("1.2.3.4, bogus ,::1"));
        assert_eq!(source_ips(&h, Some(peer)), ["1.2.3.4", "::1", "10.0.0.9"]);
        h.insert("x-real-ip", HeaderValue::from_static("1.2.3.4"));
        assert_eq!(source_ips(&h, Some(peer)), ["1.2.3.4", "::1", "10.0.0.9"], "X-Real-Ip already listed");
        h.insert("x-forwarded-for", HeaderValue::from_static("10.0.0.9"));
        h.remove("x-real-ip");
        assert_eq!(source_ips(&h, Some(peer)), ["10.0.0.9"], "the peer is not repeated when last");
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:1".parse().unwrap();
        assert_eq!(source_ips(&HeaderMap::new(), Some(mapped)), ["127.0.0.1"]);
    }

    #[test]
    fn addresses_are_written_as_display_writes_them() {
        for ip in ["0.0.0.0", "127.0.0.1", "10.20.100.255", "9.99.199.250", "::1", "fe80::1:2"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(ip_text(ip), ip.to_string());
        }
        for octet in 0..=255u8 {
            let ip = IpAddr::from([octet, 255 - octet, octet / 3, 7]);
            assert_eq!(ip_text(ip), ip.to_string());
        }
    }

    #[test]
    fn user_agents_are_cut_at_1024_bytes() {
        let mut h = HeaderMap::new();
        assert_eq!(user_agent(&h), "");
        h.insert(http::header::USER_AGENT, HeaderValue::from_str(&"a".repeat(2000)).unwrap());
        assert_eq!(user_agent(&h), format!("{}...TRUNCATED", "a".repeat(1024)));
        // The cut splits "é" (2 bytes): its first byte stays, written as U+FFFD.
        let split = format!("{}é and more", "a".repeat(1023));
        h.insert(http::header::USER_AGENT, HeaderValue::from_str(&split).unwrap());
        assert_eq!(user_agent(&h), format!("{}\u{FFFD}...TRUNCATED", "a".repeat(1023)));
        // Bytes that are not UTF-8: one U+FFFD each.
        h.insert(http::header::USER_AGENT, HeaderValue::from_bytes(b"kubectl/\xe2\x82 x").unwrap());
        assert_eq!(user_agent(&h), "kubectl/\u{FFFD}\u{FFFD} x");
    }

    #[test]
    fn bodies_are_json_when_they_read_as_json() {
        assert_eq!(body_json(Some("application/json"), None, br#"{"b":1,"a":2}"#, 100), Some(json!({"a":2,"b":1})));
        assert_eq!(body_json(Some("application/merge-patch+json"), None, br#"{"a":1}"#, 100), Some(json!({"a":1})));
        assert_eq!(body_json(Some("application/yaml"), None, b"a: 1\nb: [x]\n", 100), Some(json!({"a":1,"b":["x"]})));
        assert_eq!(body_json(Some("application/apply-patch+yaml"), None, b"{\"a\":1}", 100), Some(json!({"a":1})));
        assert_eq!(body_json(Some("application/json"), None, b"{nope", 100), None);
        assert_eq!(body_json(Some("application/vnd.kubernetes.protobuf"), None, b"k8s\0", 100), None);
        assert_eq!(body_json(Some("application/json"), None, b"", 100), None);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(br#"{"kind":"List"}"#).unwrap();
        let gz = gz.finish().unwrap();
        assert_eq!(body_json(Some("application/json"), Some("gzip"), &gz, 100), Some(json!({"kind":"List"})));
        assert_eq!(body_json(Some("application/json"), Some("gzip"), &gz, 5), None, "past the limit");
    }

    #[test]
    fn managed_fields_go_from_objects_lists_and_tables() {
        let mut v = json!({
            "metadata": {"name": "a", "managedFields": [{}]},
            "items": [{"metadata": {"managedFields": [{}], "name": "b"}}],
            "rows": [{"object": {"metadata": {"managedFields": [], "name": "c"}}}],
        });
        strip_managed_fields(&mut v);
        assert_eq!(
            v,
            json!({
                "metadata": {"name": "a"},
                "items": [{"metadata": {"name": "b"}}],
                "rows": [{"object": {"metadata": {"name": "c"}}}],
            })
        );
    }
}
