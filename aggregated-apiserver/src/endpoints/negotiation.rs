//! Content negotiation: which representation the client asked for (Accept),
//! and what it sent (Content-Type).

use crate::apimachinery::errors::ApiError;

/// What a read answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The objects themselves (JSON).
    Json,
    /// A meta.k8s.io Table, in the given API version ("v1" or "v1beta1").
    Table(&'static str),
    /// meta.k8s.io PartialObjectMetadata(List), in the given API version.
    Metadata(&'static str),
}

/// The shape of the answer being negotiated: kube-apiserver accepts
/// `as=PartialObjectMetadata` for single objects and watch events, and
/// `as=PartialObjectMetadataList` for lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Object,
    List,
    Watch,
}

/// One media range of an Accept header, its parameters left as written (read
/// when asked for: most ranges have none, and nothing is allocated for them).
struct MediaRange<'a> {
    essence: &'a str,
    params: &'a str,
    q: f32,
}

/// A range's parameters as (name, value) pairs, `q` included.
fn params_of(params: &str) -> impl Iterator<Item = (&str, &str)> {
    params.split(';').skip(1).map(|p| {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        (k.trim(), v.trim().trim_matches('"'))
    })
}

fn parse_accept(header: &str) -> Vec<MediaRange<'_>> {
    let mut ranges: Vec<MediaRange<'_>> = header
        .split(',')
        .filter_map(|part| {
            let essence = part.split(';').next()?.trim();
            if essence.is_empty() {
                return None;
            }
            // The last `q` counts, as each one written overrides the one before.
            let q = params_of(part).filter(|(k, _)| *k == "q").last().map_or(1.0, |(_, v)| v.parse().unwrap_or(0.0));
            Some(MediaRange { essence, params: part, q })
        })
        .collect();
    // Stable: among equal weights the client's order wins.
    ranges.sort_by(|a, b| b.q.partial_cmp(&a.q).unwrap_or(std::cmp::Ordering::Equal));
    ranges
}

/// The media range of a header that names one and gives it no parameters,
/// as client-go and kube-rs ask for an object (`application/json`): read
/// without building the list of ranges.
fn one_plain_range(header: &str) -> Option<&str> {
    (!header.bytes().any(|b| b == b',' || b == b';')).then(|| header.trim())
}

fn param<'a>(r: &MediaRange<'a>, name: &str) -> Option<&'a str> {
    params_of(r.params).find(|(k, _)| *k != "q" && k.eq_ignore_ascii_case(name)).map(|(_, v)| v)
}

fn meta_version(v: Option<&str>) -> Option<&'static str> {
    match v {
        Some("v1") => Some("v1"),
        Some("v1beta1") => Some("v1beta1"),
        _ => None,
    }
}

/// How a response body is written: kube-apiserver serves JSON and YAML
/// (protobuf is not served here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Json,
    Yaml,
}

pub const YAML_CONTENT_TYPE: &str = "application/yaml";

/// The encoding a media range names, if it is one served here.
fn encoding_of(essence: &str) -> Option<Encoding> {
    let is = |name: &str| essence.eq_ignore_ascii_case(name);
    if is("application/json") || is("*/*") || is("application/*") {
        Some(Encoding::Json)
    } else if is("application/yaml") {
        Some(Encoding::Yaml)
    } else {
        None
    }
}

/// Picks the representation for a read from the Accept header. YAML is
/// offered for objects, lists, Tables and metadata, never for watches (kube
/// has no YAML stream framing and answers 406 when YAML is all a watch accepts).
pub fn negotiate(accept: Option<&str>, shape: Shape) -> Result<(Output, Encoding), ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else { return Ok((Output::Json, Encoding::Json)) };
    if let Some(encoding) = one_plain_range(accept).and_then(encoding_of) {
        if !(encoding == Encoding::Yaml && shape == Shape::Watch) {
            return Ok((Output::Json, encoding));
        }
    }
    for r in parse_accept(accept) {
        if r.q <= 0.0 {
            continue;
        }
        let Some(encoding) = encoding_of(r.essence) else { continue };
        if encoding == Encoding::Yaml && shape == Shape::Watch {
            continue;
        }
        match param(&r, "as") {
            None => return Ok((Output::Json, encoding)),
            Some(as_) => {
                if param(&r, "g") != Some("meta.k8s.io") {
                    continue;
                }
                let Some(v) = meta_version(param(&r, "v")) else { continue };
                match (as_, shape) {
                    ("Table", _) => return Ok((Output::Table(v), encoding)),
                    ("PartialObjectMetadata", Shape::Object | Shape::Watch) => {
                        return Ok((Output::Metadata(v), encoding))
                    }
                    ("PartialObjectMetadataList", Shape::List) => return Ok((Output::Metadata(v), encoding)),
                    _ => continue,
                }
            }
        }
    }
    if shape == Shape::Watch {
        // The words of kube-apiserver serving a CRD (which lists protobuf too).
        return Err(ApiError::not_acceptable(
            "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch",
        ));
    }
    // kube-apiserver's words for a custom resource (protobuf listed, as there).
    Err(ApiError::not_acceptable(
        "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
    ))
}

/// The encoding of a Status error or a write's answer: the client's most
/// preferred plain JSON or YAML media type (no `as=` conversion), else JSON,
/// as kube-apiserver's ErrorNegotiated falls back.
pub fn plain_encoding(accept: Option<&str>) -> Encoding {
    let Some(accept) = accept else { return Encoding::Json };
    parse_accept(accept)
        .iter()
        .filter(|r| r.q > 0.0 && param(r, "as").is_none())
        .find_map(|r| encoding_of(r.essence))
        .unwrap_or(Encoding::Json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_get_prefers_table() {
        let a = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate(Some(a), Shape::List).unwrap(), (Output::Table("v1"), Encoding::Json));
    }

    #[test]
    fn metadata_list_vs_object() {
        let list = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io";
        assert_eq!(negotiate(Some(list), Shape::List).unwrap().0, Output::Metadata("v1"));
        assert!(negotiate(Some(list), Shape::Object).is_err());
        let one = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate(Some(one), Shape::List).unwrap().0, Output::Json);
    }

    #[test]
    fn protobuf_only_is_not_acceptable() {
        let e = negotiate(Some("application/vnd.kubernetes.protobuf"), Shape::Object).unwrap_err();
        assert_eq!(e.code, 406);
        assert_eq!(negotiate(Some("application/vnd.kubernetes.protobuf, */*"), Shape::Object).unwrap().0, Output::Json);
        assert_eq!(negotiate(None, Shape::Object).unwrap(), (Output::Json, Encoding::Json));
    }

    #[test]
    fn yaml_with_q_values_and_not_for_watches() {
        let a = "application/json;q=0.5, application/yaml";
        assert_eq!(negotiate(Some(a), Shape::Object).unwrap(), (Output::Json, Encoding::Yaml));
        assert_eq!(negotiate(Some("application/yaml;q=0.1, application/json"), Shape::List).unwrap().1, Encoding::Json);
        let table = "application/yaml;as=Table;v=v1;g=meta.k8s.io";
        assert_eq!(negotiate(Some(table), Shape::List).unwrap(), (Output::Table("v1"), Encoding::Yaml));
        assert_eq!(negotiate(Some("application/yaml"), Shape::Watch).unwrap_err().code, 406);
        assert_eq!(negotiate(Some("application/yaml, application/json"), Shape::Watch).unwrap().1, Encoding::Json);
        assert_eq!(
            plain_encoding(Some("application/json;as=Table;v=v1;g=meta.k8s.io, application/yaml")),
            Encoding::Yaml
        );
        assert_eq!(plain_encoding(Some("text/plain")), Encoding::Json);
        assert_eq!(plain_encoding(Some("application/yaml;q=0")), Encoding::Json);
    }
}
