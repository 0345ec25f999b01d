//! Which representation of an OpenAPI document an `Accept` header gets, as
//! kube-openapi's handlers decide it (`pkg/handler` for `/openapi/v2`,
//! `pkg/handler3` for a group-version under `/openapi/v3/`): the header is
//! parsed by goautoneg's rules, and the first clause, in goautoneg's order,
//! that one of the offered media types matches (exactly or by `*`) wins. No
//! match is 406. These rules are not the API's (`endpoints::negotiation`):
//! q=0 does not refuse a type, and parameters are ignored.

/// A document's two encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Protobuf,
}

/// A media type a handler offers: type, subtype, what it serves, and the
/// Content-Type it answers with.
pub struct Offer {
    kind: &'static str,
    subtype: &'static str,
    pub format: Format,
    pub content_type: &'static str,
}

const PROTOBUF_V2: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
const PROTOBUF_V3: &str = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf";

/// `/openapi/v2`, in kube-openapi's order: the `@v1.0` spelling kubectl sends
/// is answered with the `.v1.0` Content-Type.
pub const V2_OFFERS: &[Offer] = &[
    Offer { kind: "application", subtype: "json", format: Format::Json, content_type: "application/json" },
    Offer {
        kind: "application",
        subtype: "com.github.proto-openapi.spec.v2@v1.0+protobuf",
        format: Format::Protobuf,
        content_type: PROTOBUF_V2,
    },
    Offer {
        kind: "application",
        subtype: "com.github.proto-openapi.spec.v2.v1.0+protobuf",
        format: Format::Protobuf,
        content_type: PROTOBUF_V2,
    },
];

/// `/openapi/v3/<group-version>`, in kube-openapi's order.
pub const V3_OFFERS: &[Offer] = &[
    Offer { kind: "application", subtype: "json", format: Format::Json, content_type: "application/json" },
    Offer {
        kind: "application",
        subtype: "com.github.proto-openapi.spec.v3.v1.0+protobuf",
        format: Format::Protobuf,
        content_type: PROTOBUF_V3,
    },
    Offer {
        kind: "application",
        subtype: "com.github.proto-openapi.spec.v3@v1.0+protobuf",
        format: Format::Protobuf,
        content_type: PROTOBUF_V3,
    },
];

/// One clause of an Accept header, as goautoneg reads it.
#[derive(Debug, PartialEq)]
struct Clause<'a> {
    kind: &'a str,
    subtype: &'a str,
    q: f64,
}

/// goautoneg's `ParseAccept`: clauses split on `,` and `;`, only spaces
/// trimmed, a clause without `/` dropped (`*` alone is `*/*`), `q` read as a
/// float (unreadable is 0), then sorted with its comparison (higher q first;
/// a concrete type or subtype before `*`) by the insertion sort Go's
/// `sort.Sort` uses for short lists, so equal clauses keep the client's order.
fn parse(header: &str) -> Vec<Clause<'_>> {
    // goautoneg's nextSplitElement: before and after the first `sep`.
    fn split(s: &str, sep: char) -> (&str, &str) {
        s.split_once(sep).unwrap_or((s, ""))
    }
    fn trim(s: &str) -> &str {
        s.trim_matches(' ')
    }
    let mut clauses = Vec::new();
    for part in header.split(',') {
        let (range, params) = split(trim(part), ';');
        let (kind, rest) = split(range, '/');
        let kind = trim(kind);
        let subtype = match rest {
            "" if kind == "*" => "*",
            "" => continue,
            rest => match split(rest, '/') {
                (_, after) if !after.is_empty() => continue,
                (subtype, _) => trim(subtype),
            },
        };
        let mut q = 1.0;
        for param in params.split(';').filter(|p| !p.is_empty()) {
            let (key, rest) = split(param, '=');
            let (value, after) = split(rest, '=');
            if rest.is_empty() || !after.is_empty() {
                continue;
            }
            if trim(key) == "q" {
                q = value.parse::<f32>().map(f64::from).unwrap_or(0.0);
            }
        }
        clauses.push(Clause { kind, subtype, q });
    }
    let before = |a: &Clause<'_>, b: &Clause<'_>| {
        a.q > b.q || (a.kind != "*" && b.kind == "*") || (a.subtype != "*" && b.subtype == "*")
    };
    if clauses.len() <= GO_INSERTION_SORT_MAX {
        for i in 1..clauses.len() {
            let mut j = i;
            while j > 0 && before(&clauses[j], &clauses[j - 1]) {
                clauses.swap(j, j - 1);
                j -= 1;
            }
        }
    } else {
        // Past Go's insertion sort its order depends on pdqsort's pivots (the
        // comparison is not a strict order); insertion sort would also be
        // quadratic in a header of a megabyte. A stable sort by the same
        // keys gives the same order wherever the comparison is consistent.
        clauses.sort_by(|a, b| {
            b.q.total_cmp(&a.q)
                .then((a.kind == "*").cmp(&(b.kind == "*")))
                .then((a.subtype == "*").cmp(&(b.subtype == "*")))
        });
    }
    clauses
}

/// Go's `sort.Sort` sorts up to this many elements by insertion sort.
const GO_INSERTION_SORT_MAX: usize = 12;

/// The offer an Accept header gets (none or empty is `*/*`), or None: 406.
pub fn choose<'o>(accept: Option<&str>, offers: &'o [Offer]) -> Option<&'o Offer> {
    let accept = accept.filter(|a| !a.is_empty()).unwrap_or("*/*");
    parse(accept).iter().find_map(|clause| {
        offers.iter().find(|offer| {
            (clause.kind == offer.kind || clause.kind == "*")
                && (clause.subtype == offer.subtype || clause.subtype == "*")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(accept: Option<&str>, offers: &[Offer]) -> Option<&'static str> {
        choose(accept, offers).map(|o| o.content_type)
    }

    #[test]
    fn what_kubectl_versions_send() {
        // kubectl 1.27 and 1.28: protobuf only, the `@v1.0` spelling.
        let old = Some("application/com.github.proto-openapi.spec.v2@v1.0+protobuf");
        assert_eq!(answer(old, V2_OFFERS), Some(PROTOBUF_V2));
        // Later ones read OpenAPI v3 in JSON.
        assert_eq!(answer(Some("application/json"), V3_OFFERS), Some("application/json"));
        let v3 = Some("application/com.github.proto-openapi.spec.v3@v1.0+protobuf");
        assert_eq!(answer(v3, V3_OFFERS), Some(PROTOBUF_V3));
        assert_eq!(
            answer(Some("application/com.github.proto-openapi.spec.v3.v1.0+protobuf"), V3_OFFERS),
            Some(PROTOBUF_V3)
        );
    }

    #[test]
    fn wildcards_q_values_and_refusals() {
        assert_eq!(answer(None, V2_OFFERS), Some("application/json"));
        assert_eq!(answer(Some(""), V2_OFFERS), Some("application/json"));
        assert_eq!(answer(Some("*/*"), V2_OFFERS), Some("application/json"));
        assert_eq!(answer(Some("*"), V2_OFFERS), Some("application/json"));
        assert_eq!(answer(Some("application/*"), V3_OFFERS), Some("application/json"));
        // A protobuf clause weighted above JSON wins, whatever the order.
        let weighted = "application/json;q=0.5, application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
        assert_eq!(answer(Some(weighted), V2_OFFERS), Some(PROTOBUF_V2));
        let weighted = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf;q=0.9, application/json";
        assert_eq!(answer(Some(weighted), V2_OFFERS), Some("application/json"));
        // Concrete before `*` at equal q; q=0 does not refuse (goautoneg keeps it).
        assert_eq!(
            answer(Some("*/*, application/com.github.proto-openapi.spec.v2.v1.0+protobuf"), V2_OFFERS),
            Some(PROTOBUF_V2)
        );
        assert_eq!(answer(Some("application/json;q=0"), V2_OFFERS), Some("application/json"));
        // What neither handler serves, or the other version's protobuf.
        assert_eq!(answer(Some("application/yaml"), V2_OFFERS), None);
        assert_eq!(answer(Some("application/com.github.proto-openapi.spec.v3@v1.0+protobuf"), V2_OFFERS), None);
        assert_eq!(answer(Some("text/html, application/xml"), V3_OFFERS), None);
        assert_eq!(answer(Some("application"), V3_OFFERS), None);
    }

    #[test]
    fn long_headers_sort_by_the_same_keys() {
        let mut header = vec!["text/html"; 5_000];
        header.push("*/*;q=0.1");
        header.push("application/*");
        header.push("application/json;q=0.9");
        let header = header.join(", ");
        let clauses = parse(&header);
        assert_eq!(clauses.len(), 5_003);
        assert_eq!((clauses[0].kind, clauses[0].subtype), ("text", "html"));
        assert_eq!((clauses[4_999].kind, clauses[5_000].kind, clauses[5_000].subtype), ("text", "application", "*"));
        assert_eq!((clauses[5_001].subtype, clauses[5_002].kind), ("json", "*"));
        assert_eq!(answer(Some(&header), V3_OFFERS), Some("application/json"));
    }

    #[test]
    fn goautoneg_parsing() {
        let clauses = parse(" application/json ; q=0.5 ,text/*;q=x, */*;level=1, a/b/c");
        assert_eq!(
            clauses,
            [
                Clause { kind: "*", subtype: "*", q: 1.0 },
                Clause { kind: "application", subtype: "json", q: 0.5 },
                Clause { kind: "text", subtype: "*", q: 0.0 },
            ]
        );
    }
}
