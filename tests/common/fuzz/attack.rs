//! Attacking generators: requests shaped to make the server allocate or
//! compute far more than they weigh, aimed at Llamas that exist.
//!
//! The plain fuzzer mutates single requests at random and so never builds a
//! sequence of operations that amplifies: a 3 KB JSON patch of one `add` and
//! 24 doubling `copy` operations grew an object to gigabytes and went
//! unnoticed by a million of its requests. These generators know the grammar
//! of what the server parses (JSON patch operations and paths, merge patches,
//! apply configurations, YAML's anchors, aliases, merge keys, nesting and
//! directives, numbers, selectors, query parameters, Accept headers) and aim each at what grows:
//! the largest subtree, the deepest path, an array's edges, the widest map,
//! the most managers. Sizes are drawn log-uniformly, so most requests are
//! small and a few are near the 3 MiB body limit.
//!
//! Every generator draws from the fuzzer's one `StdRng`, so a seed replays a
//! run. The targets live in [`ATTACK_NS`], which the noise never names; they
//! are created before a run (and again by the `seed` kind, as noise may
//! delete them) and grown by the attacks themselves, up to the server's
//! stored-object limit.

use rand::seq::IndexedRandom;
use rand::Rng;
use reqwest::header::{HeaderName, HeaderValue};
use reqwest::Method;
use serde_json::{json, Map, Value};

use super::{Gen, Req, API_VERSION, GROUP, TRACKED_LABEL};

/// The namespace of the attacked Llamas: like the tracked one, lowercase
/// letters, digits and dashes of a length the noise's garbage never produces.
pub const ATTACK_NS: &str = "soak-attack-q7x";
/// The attacked Llamas. Few, so that each is grown by many attacks.
pub const TARGETS: &[&str] = &["big-0", "big-1", "big-2", "big-3"];

/// One family of attacking requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Attack {
    /// JSON patch: one `add`, then `copy` of a parent into its own child, each doubling it.
    Doubling,
    /// JSON patch: the largest subtree (the object, metadata, managedFields) copied to many places.
    Fanout,
    /// JSON patch: copies and moves of a value into its own subtree, of the root, onto the root.
    OwnSubtree,
    /// JSON patch: deep values, moves into them, paths deeper than any body may nest.
    DeepPaths,
    /// JSON patch: array indices `-`, huge, negative, leading zeros, past the end; inserts at the front.
    Indices,
    /// JSON patch: 10,000 operations (the limit) and just past it.
    ManyOps,
    /// Merge patch nesting objects or arrays deep.
    MergeDeep,
    /// Merge patch with many keys, labels, annotations, finalizers, conditions.
    MergeWide,
    /// Server-side apply of a deep configuration.
    ApplyDeep,
    /// Server-side apply of a wide configuration (finalizers, labels, conditions, owners).
    ApplyWide,
    /// Server-side apply by many field managers, each owning a field of its own.
    ApplyManagers,
    /// YAML with anchors, aliases (of maps, lists and long strings) and merge keys.
    YamlAliases,
    /// YAML on which libyaml's own work grows faster than the body: deep
    /// nesting written in every style, and `%TAG` directives by the thousand.
    YamlParser,
    /// Numbers at the edges of what JSON, YAML, f64, int64 and parsers hold.
    Numbers,
    /// Label and field selectors with thousands of values and terms.
    Selectors,
    /// Repeated and absurd query parameters.
    Params,
    /// Accept headers with thousands of media types, many Accept headers.
    Accept,
    /// Creates an attacked Llama (again): a Llama with wide metadata.
    Seed,
}

impl Attack {
    pub const ALL: &'static [Attack] = &[
        Attack::Doubling,
        Attack::Fanout,
        Attack::OwnSubtree,
        Attack::DeepPaths,
        Attack::Indices,
        Attack::ManyOps,
        Attack::MergeDeep,
        Attack::MergeWide,
        Attack::ApplyDeep,
        Attack::ApplyWide,
        Attack::ApplyManagers,
        Attack::YamlAliases,
        Attack::YamlParser,
        Attack::Numbers,
        Attack::Selectors,
        Attack::Params,
        Attack::Accept,
        Attack::Seed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Attack::Doubling => "jsonpatch-doubling",
            Attack::Fanout => "jsonpatch-fanout",
            Attack::OwnSubtree => "jsonpatch-own-subtree",
            Attack::DeepPaths => "jsonpatch-deep-paths",
            Attack::Indices => "jsonpatch-indices",
            Attack::ManyOps => "jsonpatch-many-ops",
            Attack::MergeDeep => "merge-deep",
            Attack::MergeWide => "merge-wide",
            Attack::ApplyDeep => "apply-deep",
            Attack::ApplyWide => "apply-wide",
            Attack::ApplyManagers => "apply-managers",
            Attack::YamlAliases => "yaml-aliases",
            Attack::YamlParser => "yaml-parser",
            Attack::Numbers => "numbers",
            Attack::Selectors => "selectors",
            Attack::Params => "query-params",
            Attack::Accept => "accept-headers",
            Attack::Seed => "seed",
        }
    }

    /// The label of its requests in statistics.
    pub fn label(self) -> String {
        format!("attack/{}", self.name())
    }
}

/// The body of a Llama to attack: wide metadata, so that its largest subtrees
/// (annotations, managedFields once written) are worth copying.
pub fn seed_body(name: &str) -> Vec<u8> {
    let annotations: Map<String, Value> =
        (0..16).map(|i| (format!("example.com/note-{i}"), Value::String("n".repeat(1024)))).collect();
    let labels: Map<String, Value> = (0..16)
        .map(|i| (format!("l{i}"), json!("v")))
        .chain(std::iter::once((TRACKED_LABEL.0.to_string(), json!(TRACKED_LABEL.1))))
        .collect();
    let obj = json!({"apiVersion": API_VERSION, "kind": "Llama",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"weight": 1, "height": 1}});
    serde_json::to_vec(&obj).unwrap_or_default()
}

pub fn collection() -> String {
    format!("{GROUP}/namespaces/{ATTACK_NS}/llamas")
}

fn headers(content_type: &str) -> Vec<(HeaderName, HeaderValue)> {
    vec![
        (HeaderName::from_static("content-type"), HeaderValue::from_str(content_type).unwrap()),
        (HeaderName::from_static("accept"), HeaderValue::from_static("application/json")),
    ]
}

const JSON_PATCH: &str = "application/json-patch+json";
const MERGE_PATCH: &str = "application/merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

/// `{"a":{"a":...leaf}}` or `[[...leaf]]`, `depth` levels, built without recursion.
fn nest(depth: usize, arrays: bool, leaf: Value) -> Value {
    let mut v = leaf;
    for _ in 0..depth {
        v = if arrays { Value::Array(vec![v]) } else { json!({ "a": v }) };
    }
    v
}

/// A condition of type `t` as metav1.Condition requires it.
fn condition(t: &str, message_len: usize) -> Value {
    json!({"type": t, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
        "reason": "Fed", "message": "m".repeat(message_len)})
}

fn owner(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "name": format!("o{i}"),
        "uid": format!("00000000-0000-0000-0000-{i:012}")})
}

fn op(op: &str, path: &str) -> Value {
    json!({"op": op, "path": path})
}

fn op_value(op: &str, path: &str, value: Value) -> Value {
    json!({"op": op, "path": path, "value": value})
}

fn op_from(op: &str, from: &str, path: &str) -> Value {
    json!({"op": op, "from": from, "path": path})
}

impl Gen {
    /// A number in `lo..=hi`, log-uniform: small ones common, large ones rare.
    fn sized(&mut self, lo: usize, hi: usize) -> usize {
        let (l, h) = ((lo.max(1) as f64).ln(), (hi.max(lo + 1) as f64).ln());
        (self.rng.random_range(l..=h).exp() as usize).clamp(lo, hi)
    }

    /// [`Self::sized`] for the bulk of a request (items, bytes), its upper
    /// end scaled by the run's `attack_scale`.
    fn bulk(&mut self, lo: usize, hi: usize) -> usize {
        let hi = ((hi as f64 * self.attack_scale) as usize).max(lo);
        self.sized(lo, hi)
    }

    /// A value of about `bytes` bytes of JSON, in the shape that costs the
    /// most memory per byte once parsed: a long string, many small keys, or
    /// many tiny array items (each a 32-byte `Value` for 2 bytes of text).
    fn blob(&mut self, bytes: usize) -> Value {
        match self.rng.random_range(0..3) {
            0 => Value::String("x".repeat(bytes)),
            1 => Value::Object((0..bytes / 10).map(|i| (format!("k{i}"), json!(1))).collect()),
            _ => Value::Array(vec![json!(0); bytes / 2]),
        }
    }

    /// An attacking request of a kind drawn at random.
    pub(super) fn attack(&mut self) -> Req {
        let kind = *Attack::ALL.choose(&mut self.rng).unwrap();
        self.attack_of(kind)
    }

    /// An attacked Llama's path, its name, and whether it is the status subresource.
    fn target(&mut self, status_share: f64) -> (String, &'static str, bool) {
        let name = *TARGETS.choose(&mut self.rng).unwrap();
        let status = self.chance(status_share);
        let path = format!("{}/{name}{}", collection(), if status { "/status" } else { "" });
        (path, name, status)
    }

    pub(super) fn attack_of(&mut self, kind: Attack) -> Req {
        let (method, path, query, headers, body) = match kind {
            Attack::Doubling => self.doubling(),
            Attack::Fanout => self.fanout(),
            Attack::OwnSubtree => self.own_subtree(),
            Attack::DeepPaths => self.deep_paths(),
            Attack::Indices => self.indices(),
            Attack::ManyOps => self.many_ops(),
            Attack::MergeDeep => self.merge_deep(),
            Attack::MergeWide => self.merge_wide(),
            Attack::ApplyDeep => self.apply_deep(),
            Attack::ApplyWide => self.apply_wide(),
            Attack::ApplyManagers => self.apply_managers(),
            Attack::YamlAliases => self.yaml_aliases(),
            Attack::YamlParser => self.yaml_parser(),
            Attack::Numbers => self.numbers(),
            Attack::Selectors => self.selectors(),
            Attack::Params => self.params(),
            Attack::Accept => self.accept(),
            Attack::Seed => {
                let name = *TARGETS.choose(&mut self.rng).unwrap();
                (Method::POST, collection(), String::new(), headers("application/json"), Some(seed_body(name)))
            }
        };
        let watch = query.split('&').any(|kv| kv == "watch=true" || kv == "watch=1");
        Req {
            method,
            path,
            query,
            headers,
            body,
            label: kind.label(),
            watch,
            http2: self.chance(0.5),
            anonymous: false,
            tracked: None,
            attack: true,
        }
    }

    fn json_patch(&mut self, path: String, ops: Vec<Value>) -> Parts {
        let body = serde_json::to_vec(&Value::Array(ops)).unwrap_or_default();
        (Method::PATCH, path, String::new(), headers(JSON_PATCH), Some(body))
    }

    /// One `add`, then copies of a parent into its own children: each copy
    /// doubles what the next one copies. The original bug was this with a
    /// 1 KB value under /spec and 24 copies.
    fn doubling(&mut self) -> Parts {
        let (path, _, status) = self.target(0.2);
        let base = if status {
            "/status"
        } else {
            *["/spec", "/spec", "/metadata", "/metadata/annotations", "/metadata/labels", ""]
                .choose(&mut self.rng)
                .unwrap()
        };
        let value = {
            let n = self.sized(16, 4096);
            self.blob(n)
        };
        let mut ops = Vec::new();
        // Members that surely exist take a new child; the others are made whole.
        if matches!(base, "/spec" | "/metadata" | "") {
            ops.push(op_value("add", &format!("{base}/d0"), value));
        } else {
            ops.push(op_value("add", base, json!({ "d0": value })));
        }
        let copies = self.rng.random_range(4..=30);
        // Sometimes each copy goes one level deeper than the last, so depth grows as well.
        let deeper = self.chance(0.2);
        let mut into = base.to_string();
        for i in 1..=copies {
            let to = format!("{into}/d{i}");
            ops.push(op_from("copy", base, &to));
            if deeper {
                into = to;
            }
        }
        self.json_patch(path, ops)
    }

    /// The largest subtrees copied to many places (each copy is counted by
    /// the server's copy limit; the places are many small writes).
    fn fanout(&mut self) -> Parts {
        let (path, _, status) = self.target(0.1);
        let from = *["", "/metadata", "/metadata/managedFields", "/metadata/annotations", "/spec"]
            .choose(&mut self.rng)
            .unwrap();
        let into = if status {
            "/status"
        } else {
            *["/spec", "/metadata/annotations", "/metadata/labels"].choose(&mut self.rng).unwrap()
        };
        let n = self.sized(2, 3000);
        let ops = (0..n).map(|i| op_from("copy", from, &format!("{into}/c{i}"))).collect();
        self.json_patch(path, ops)
    }

    fn own_subtree(&mut self) -> Parts {
        let (path, _, _) = self.target(0.2);
        let n = self.rng.random_range(1..=8);
        let mut ops = Vec::new();
        for _ in 0..n {
            let o = match self.rng.random_range(0..14) {
                0 => op_from("copy", "", "/spec/self"),
                1 => op_from("copy", "/metadata", "/metadata/annotations/m"),
                2 => op_from("move", "/spec", "/spec/x"),
                3 => op_from("move", "/metadata", "/metadata/labels/x"),
                4 => op_from("move", "", "/spec/x"),
                5 => op_from("copy", "/metadata/managedFields", "/metadata/managedFields/0"),
                6 => op_from("copy", "/metadata/managedFields", "/metadata/managedFields/-"),
                7 => op_from("copy", "", ""),
                8 => op_from("move", "/spec", ""),
                9 => op_from("copy", "/metadata/annotations", "/metadata/annotations/-"),
                10 => op_value("test", "", json!({})),
                11 => op("remove", ""),
                12 => {
                    let n = self.bulk(16, 100_000);
                    let v = self.blob(n);
                    op_value("replace", "", v)
                }
                _ => op_from("copy", "/metadata/labels", "/metadata/labels/~1~0"),
            };
            ops.push(o);
        }
        self.json_patch(path, ops)
    }

    fn deep_paths(&mut self) -> Parts {
        let (path, _, _) = self.target(0.1);
        let depth = self.sized(8, 200);
        let arrays = self.chance(0.3);
        let step = if arrays { "/0" } else { "/a" };
        let mut ops = vec![op_value("add", "/spec/n", nest(depth, arrays, json!(1)))];
        match self.rng.random_range(0..5) {
            // A value moved to the bottom of the deep one.
            0 => {
                let at = self.rng.random_range(1..=depth);
                let inner = self.sized(1, 200);
                ops.insert(0, op_value("add", "/spec/m", nest(inner, false, json!(1))));
                ops.push(op_from("move", "/spec/m", &format!("/spec/n{}/m", step.repeat(at - 1))));
            }
            // A path deeper than any object may nest, with or without parents.
            1 => {
                let p = self.bulk(100, 100_000);
                ops.push(op_value("add", &format!("/spec/n{}", step.repeat(p)), json!(1)));
            }
            // Moves back and forth between two places, each checked for depth.
            2 => {
                let m = self.sized(2, 5000);
                for i in 0..m {
                    let (a, b) = if i % 2 == 0 { ("/spec/n", "/spec/o") } else { ("/spec/o", "/spec/n") };
                    ops.push(op_from("move", a, b));
                }
            }
            // The deep value copied into its own deepest point, repeatedly.
            3 => {
                let m = self.rng.random_range(1..=8);
                for _ in 0..m {
                    let at = self.rng.random_range(1..=depth);
                    ops.push(op_from("copy", "/spec/n", &format!("/spec/n{}/c", step.repeat(at - 1))));
                }
            }
            // The whole object moved under a deep path of its own.
            _ => ops.push(op_from("copy", "", &format!("/spec/n{}/o", step.repeat(depth.saturating_sub(1))))),
        }
        self.json_patch(path, ops)
    }

    fn indices(&mut self) -> Parts {
        let (path, _, status) = self.target(0.25);
        let list = if status {
            "/status/conditions"
        } else {
            *["/metadata/finalizers", "/metadata/ownerReferences", "/metadata/managedFields"]
                .choose(&mut self.rng)
                .unwrap()
        };
        let item = |i: usize| -> Value {
            match list {
                "/status/conditions" => condition(&format!("T{i}"), 0),
                "/metadata/ownerReferences" => owner(i),
                "/metadata/managedFields" => json!({"manager": format!("m{i}"), "operation": "Update",
                    "apiVersion": API_VERSION, "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:weight": {}}}}),
                _ => json!(format!("example.com/f{i}")),
            }
        };
        let mut ops = Vec::new();
        if self.chance(0.7) && list != "/metadata/managedFields" {
            let n = self.sized(1, 200);
            ops.push(op_value("add", list, Value::Array((0..n).map(item).collect())));
        }
        match self.rng.random_range(0..3) {
            // Index games.
            0 => {
                let n = self.rng.random_range(1..=24);
                for i in 0..n {
                    let idx = match self.rng.random_range(0..18) {
                        0 => "-".to_string(),
                        1 => "0".into(),
                        2 => "01".into(),
                        3 => "00".into(),
                        4 => "-1".into(),
                        5 => "-0".into(),
                        6 => "+1".into(),
                        7 => "1e2".into(),
                        8 => "18446744073709551616".into(),
                        9 => "9223372036854775807".into(),
                        10 => "4294967296".into(),
                        11 => " 1".into(),
                        12 => String::new(),
                        13 => "9".repeat(self.sized(20, 10_000)),
                        14 => "0x1".into(),
                        _ => self.rng.random_range(0..400).to_string(),
                    };
                    let at = format!("{list}/{idx}");
                    let o = match self.rng.random_range(0..6) {
                        0 => op_value("add", &at, item(1000 + i)),
                        1 => op_value("replace", &at, item(1000 + i)),
                        2 => op("remove", &at),
                        3 => op_from("copy", &format!("{list}/0"), &at),
                        4 => op_from("move", &at, &format!("{list}/-")),
                        _ => op_value("test", &at, item(0)),
                    };
                    ops.push(o);
                }
            }
            // Inserts at the front: each moves every item after it.
            1 => {
                let n = self.bulk(10, 9_990);
                ops.extend((0..n).map(|i| op_value("add", &format!("{list}/0"), item(i))));
            }
            // Removes from the front of a long list.
            _ => {
                let n = self.bulk(10, 4_990);
                ops.push(op_value("add", list, Value::Array((0..n).map(item).collect())));
                ops.extend((0..n).map(|_| op("remove", &format!("{list}/0"))));
            }
        }
        self.json_patch(path, ops)
    }

    fn many_ops(&mut self) -> Parts {
        let (path, _, _) = self.target(0.1);
        let n = *[9_999usize, 10_000, 10_000, 10_001, 20_000, 100_000].choose(&mut self.rng).unwrap();
        let ops: Vec<Value> = match self.rng.random_range(0..4) {
            0 => (0..n).map(|i| op_value("replace", "/spec/weight", json!(i + 1))).collect(),
            1 => (0..n).map(|i| op_from("copy", "/spec/weight", &format!("/spec/w{i}"))).collect(),
            2 => (0..n)
                .map(|i| {
                    if i % 2 == 0 {
                        op_value("add", "/metadata/labels/flip", json!("v"))
                    } else {
                        op("remove", "/metadata/labels/flip")
                    }
                })
                .collect(),
            _ => (0..n)
                .map(|i| {
                    op_from(
                        "move",
                        if i % 2 == 0 { "/spec/weight" } else { "/spec/w" },
                        if i % 2 == 0 { "/spec/w" } else { "/spec/weight" },
                    )
                })
                .collect(),
        };
        self.json_patch(path, ops)
    }

    fn merge_deep(&mut self) -> Parts {
        let (path, _, status) = self.target(0.25);
        let depth = self.sized(8, 400);
        let arrays = self.chance(0.4);
        let deep = nest(depth, arrays, if self.chance(0.3) { Value::Null } else { json!(1) });
        let patch = if status {
            json!({"status": {"deep": deep}})
        } else {
            match self.rng.random_range(0..4) {
                0 => json!({"spec": {"deep": deep}}),
                1 => json!({"metadata": {"annotations": {"deep": deep}}}),
                2 => json!({"metadata": {"labels": deep}}),
                _ => json!({"metadata": {"deep": deep}}),
            }
        };
        let body = serde_json::to_vec(&patch).unwrap_or_default();
        (Method::PATCH, path, String::new(), headers(MERGE_PATCH), Some(body))
    }

    /// A map or list of `n` items where an attacked Llama keeps such things.
    fn wide_part(&mut self, n: usize, status: bool) -> Value {
        if status {
            return json!({"status": {"conditions": (0..n).map(|i| condition(&format!("T{i}"), 8)).collect::<Vec<_>>()}});
        }
        match self.rng.random_range(0..6) {
            0 => json!({"metadata": {"labels": (0..n).map(|i| (format!("l{i}"), json!("v"))).collect::<Map<_, _>>()}}),
            1 => {
                let len = self.bulk(1, 4096);
                let v = "a".repeat(len);
                json!({"metadata": {"annotations": (0..n).map(|i| (format!("a{i}"), json!(v))).collect::<Map<_, _>>()}})
            }
            2 => json!({"metadata": {"finalizers": (0..n).map(|i| format!("example.com/f{i}")).collect::<Vec<_>>()}}),
            3 => json!({"metadata": {"ownerReferences": (0..n).map(owner).collect::<Vec<_>>()}}),
            4 => json!({"spec": (0..n).map(|i| (format!("u{i}"), json!(i))).collect::<Map<_, _>>()}),
            _ => {
                json!({"metadata": {"managedFields": (0..n).map(|i| json!({"manager": format!("m{i}"), "operation": "Apply",
                "apiVersion": API_VERSION, "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {format!("f:l{i}"): {}}}}})).collect::<Vec<_>>()}})
            }
        }
    }

    fn merge_wide(&mut self) -> Parts {
        let (path, _, status) = self.target(0.25);
        let n = self.bulk(10, 60_000);
        let patch = self.wide_part(n, status);
        let body = serde_json::to_vec(&patch).unwrap_or_default();
        (Method::PATCH, path, String::new(), headers(MERGE_PATCH), Some(body))
    }

    /// The path and query of an apply to an attacked Llama by `manager`.
    fn apply_to(&mut self, status_share: f64, manager: &str) -> (String, &'static str, bool, String) {
        let (path, name, status) = self.target(status_share);
        let mut query = format!("fieldManager={manager}");
        if self.chance(0.5) {
            query.push_str("&force=true");
        }
        (path, name, status, query)
    }

    fn apply_deep(&mut self) -> Parts {
        let (path, name, status, query) = self.apply_to(0.25, "deep");
        let depth = self.sized(8, 400);
        let deep = nest(depth, self.chance(0.4), json!("leaf"));
        let mut config = json!({"apiVersion": API_VERSION, "kind": "Llama", "metadata": {"name": name}});
        match (status, self.rng.random_range(0..3)) {
            (true, _) => config["status"] = json!({"deep": deep}),
            (false, 0) => config["spec"] = json!({"weight": 1, "height": 1, "deep": deep}),
            (false, 1) => config["metadata"]["annotations"] = json!({"deep": deep}),
            (false, _) => config["metadata"]["labels"] = deep,
        }
        let body = self.json_or_yaml(&config);
        (Method::PATCH, path, query, headers(APPLY), Some(body))
    }

    fn apply_wide(&mut self) -> Parts {
        let manager = format!("wide-{}", self.rng.random_range(0..50));
        let (path, name, status, query) = self.apply_to(0.25, &manager);
        let n = self.bulk(10, 30_000);
        let mut config = self.wide_part(n, status);
        config["apiVersion"] = json!(API_VERSION);
        config["kind"] = json!("Llama");
        config["metadata"]["name"] = json!(name);
        let body = self.json_or_yaml(&config);
        (Method::PATCH, path, query, headers(APPLY), Some(body))
    }

    /// Many managers, each owning one field and sharing another: every entry
    /// they add to managedFields is walked by every later write.
    fn apply_managers(&mut self) -> Parts {
        let m = self.rng.random_range(0..5000);
        let manager = format!("mgr-{m}");
        let (path, name, status, query) = self.apply_to(0.25, &manager);
        let mut config = json!({"apiVersion": API_VERSION, "kind": "Llama", "metadata": {"name": name}});
        if status {
            config["status"] = json!({"observedGeneration": 1, "conditions": [condition(&format!("M{m}"), 16)]});
        } else {
            config["metadata"]["labels"] = json!({format!("m-{m}"): "v"});
            config["spec"] = json!({"weight": 1, "height": 1});
        }
        let body = self.json_or_yaml(&config);
        (Method::PATCH, path, query, headers(APPLY), Some(body))
    }

    fn json_or_yaml(&mut self, v: &Value) -> Vec<u8> {
        if self.chance(0.3) {
            super::yaml_of(v).into_bytes()
        } else {
            serde_json::to_vec(v).unwrap_or_default()
        }
    }

    fn yaml_aliases(&mut self) -> Parts {
        let name = *TARGETS.choose(&mut self.rng).unwrap();
        let head = format!("apiVersion: {API_VERSION}\nkind: Llama\nmetadata:\n  name: {name}\n");
        let mut y = String::new();
        match self.rng.random_range(0..5) {
            // A map of n keys aliased m times.
            0 => {
                let (n, m) = (self.bulk(1, 20_000), self.bulk(1, 20_000));
                y.push_str(&head);
                y.push_str("spec:\n  weight: 1\n  height: 1\n  base: &b {");
                y.push_str(&(0..n).map(|i| format!("k{i}: 1")).collect::<Vec<_>>().join(", "));
                y.push_str("}\n");
                for i in 0..m {
                    y.push_str(&format!("  x{i}: *b\n"));
                }
            }
            // A long string aliased as many annotation values.
            1 => {
                let (len, m) = (self.bulk(1, 1 << 20), self.bulk(1, 50_000));
                y.push_str(&format!("x-s: &s \"{}\"\n", "s".repeat(len)));
                y.push_str(&format!(
                    "apiVersion: {API_VERSION}\nkind: Llama\nmetadata:\n  name: {name}\n  annotations:\n"
                ));
                for i in 0..m {
                    y.push_str(&format!("    a{i}: *s\n"));
                }
                y.push_str("spec: {weight: 1, height: 1}\n");
            }
            // A chain of merge keys: each level merges the one before it.
            2 => {
                let l = self.bulk(2, 5000);
                y.push_str(&head);
                y.push_str("spec:\n  weight: 1\n  height: 1\n  c0: &c0 {k0: 1}\n");
                for i in 1..l {
                    y.push_str(&format!("  c{i}: &c{i} {{<<: *c{}, k{i}: 1}}\n", i - 1));
                }
            }
            // One merge key with a list of many aliases.
            3 => {
                let (n, m) = (self.bulk(1, 2000), self.bulk(1, 50_000));
                y.push_str(&head);
                y.push_str("  labels: &l {");
                y.push_str(&(0..n).map(|i| format!("k{i}: v")).collect::<Vec<_>>().join(", "));
                y.push_str("}\n  annotations:\n    <<: [");
                y.push_str(&vec!["*l"; m].join(", "));
                y.push_str("]\nspec: {weight: 1, height: 1}\n");
            }
            // A list aliased as finalizers and as many list items (nested aliases).
            _ => {
                let (n, m) = (self.bulk(1, 5000), self.bulk(1, 5000));
                y.push_str(&format!(
                    "x-f: &f [{}]\n",
                    (0..n).map(|i| format!("example.com/f{i}")).collect::<Vec<_>>().join(", ")
                ));
                y.push_str(&format!("x-g: &g [{}]\n", vec!["*f"; m.min(64)].join(", ")));
                y.push_str(&head);
                y.push_str("  finalizers: *f\nspec:\n  weight: 1\n  height: 1\n  lists: [");
                y.push_str(&vec!["*g"; m].join(", "));
                y.push_str("]\n");
            }
        }
        let body = Some(y.into_bytes());
        match self.rng.random_range(0..3) {
            0 => (Method::POST, collection(), String::new(), headers("application/yaml"), body),
            1 => (Method::PUT, format!("{}/{name}", collection()), String::new(), headers("application/yaml"), body),
            _ => (Method::PATCH, format!("{}/{name}", collection()), "fieldManager=yaml".into(), headers(APPLY), body),
        }
    }

    /// Deep nesting in the styles a lexical check can miss (a quote inside a
    /// plain scalar, block indicators, tags and anchors, JSON's own), or
    /// thousands of `%TAG` directives, each of which libyaml checks against
    /// every one before it.
    fn yaml_parser(&mut self) -> Parts {
        let (path, name, status) = self.target(0.2);
        let body = if self.chance(0.6) {
            let level = *["{a: ", "[", "{\"a\":", "- ", "? ", "!t &a [", "[a 'b, ", "{k: a \"b, x: "]
                .choose(&mut self.rng)
                .unwrap();
            let prefix = if self.chance(0.5) { "{k: a \"b, x: " } else { "" };
            format!("{prefix}{}1", level.repeat(self.bulk(100, 200_000)))
        } else {
            let n = self.bulk(10, 100_000);
            let mut y: String = (0..n).map(|i| format!("%TAG !t{i}! t:{i}\n")).collect();
            let part =
                if status { "status: !t0!s {observedGeneration: 1}" } else { "spec: !t0!s {weight: 1, height: 1}" };
            y.push_str(&format!("---\napiVersion: {API_VERSION}\nkind: Llama\nmetadata:\n  name: {name}\n{part}\n"));
            y
        };
        (Method::PATCH, path, "fieldManager=yaml".into(), headers(APPLY), Some(body.into_bytes()))
    }

    /// A number's text at an edge: f64's, int64's, JSON's and parsers'.
    fn edge_number(&mut self) -> String {
        match self.rng.random_range(0..24) {
            0 => "1e308".into(),
            1 => "-0".into(),
            2 => "1e-400".into(),
            3 => "9007199254740993".into(),
            4 => "18446744073709551616".into(),
            5 => "1e999999999".into(),
            6 => "-1e999999999".into(),
            7 => "4.9e-324".into(),
            8 => "2.2250738585072011e-308".into(),
            9 => "1.7976931348623157e308".into(),
            10 => "1.7976931348623159e308".into(),
            11 => "9223372036854775808".into(),
            12 => "-9223372036854775809".into(),
            13 => "0.1e-999999999999999999999".into(),
            14 => format!("1e{}", "9".repeat(self.bulk(10, 100_000))),
            15 => format!("1{}", "0".repeat(self.bulk(10, 1_000_000))),
            16 => format!("0.{}1", "0".repeat(self.bulk(10, 1_000_000))),
            17 => format!("1.{}", "3".repeat(self.bulk(10, 1_000_000))),
            18 => format!("{}e-{}", "7".repeat(self.bulk(10, 100_000)), self.sized(1, 100_000)),
            19 => "1E+2".into(),
            20 => "123456789012345678901234567890e-30".into(),
            21 => "0.000000000000000000000000000001e30".into(),
            22 => "9007199254740993.0".into(),
            _ => format!("{}", self.rng.random::<f64>() * 1e300),
        }
    }

    fn numbers(&mut self) -> Parts {
        let (path, name, status) = self.target(0.25);
        let n = self.edge_number();
        let (field_json, field_yaml) = if status {
            (format!("\"status\":{{\"observedGeneration\":{n}}}"), format!("status:\n  observedGeneration: {n}\n"))
        } else if self.chance(0.8) {
            let f = *["weight", "height"].choose(&mut self.rng).unwrap();
            (format!("\"spec\":{{\"{f}\":{n}}}"), format!("spec:\n  {f}: {n}\n"))
        } else {
            (format!("\"metadata\":{{\"generation\":{n}}}"), format!("metadata:\n  generation: {n}\n"))
        };
        let full_json = |fields: &str| {
            format!("{{\"apiVersion\":\"{API_VERSION}\",\"kind\":\"Llama\",\"metadata\":{{\"name\":\"{name}\",\"namespace\":\"soak-attack-q7x\"}},{fields}}}")
        };
        match self.rng.random_range(0..5) {
            0 => (
                Method::PATCH,
                path,
                String::new(),
                headers(MERGE_PATCH),
                Some(format!("{{{field_json}}}").into_bytes()),
            ),
            1 => {
                let p = if status { "/status/observedGeneration" } else { "/spec/weight" };
                let body = format!("[{{\"op\":\"replace\",\"path\":\"{p}\",\"value\":{n}}}]");
                (Method::PATCH, path, String::new(), headers(JSON_PATCH), Some(body.into_bytes()))
            }
            2 => {
                let body = format!("apiVersion: {API_VERSION}\nkind: Llama\nmetadata:\n  name: {name}\n{field_yaml}");
                (Method::PATCH, path, "fieldManager=numbers".into(), headers(APPLY), Some(body.into_bytes()))
            }
            3 => (
                Method::PUT,
                path,
                String::new(),
                headers("application/json"),
                Some(full_json(&field_json).into_bytes()),
            ),
            _ => (
                Method::POST,
                collection(),
                String::new(),
                headers("application/json"),
                Some(full_json(&field_json).into_bytes()),
            ),
        }
    }

    /// A list (or watch) path: the attacked namespace or all of them.
    fn list_path(&mut self) -> String {
        if self.chance(0.7) {
            collection()
        } else {
            format!("{GROUP}/llamas")
        }
    }

    fn selectors(&mut self) -> Parts {
        let path = self.list_path();
        let n = self.bulk(10, 20_000);
        let hex = |n: usize, f: fn(usize) -> String| within((0..n).map(f), ",");
        let mut query = match self.rng.random_range(0..6) {
            0 => format!("labelSelector=app+in+({})", hex(n, |i| format!("{i:x}"))),
            1 => format!("labelSelector=app+notin+({})", hex(n, |i| format!("{i:x}"))),
            2 => format!("labelSelector={}", hex(n, |i| format!("k{i:x}%3Dv"))),
            3 => format!("fieldSelector={}", hex(n, |i| format!("metadata.name!%3D{i:x}"))),
            4 => format!("fieldSelector=metadata.name%3D{}", "n".repeat((n * 8).min(URL_BUDGET))),
            _ => format!("labelSelector=app+in+({}),!gone,l0", hex(n, |_| "dup".to_string())),
        };
        match self.rng.random_range(0..4) {
            0 => query.push_str("&watch=true&timeoutSeconds=1"),
            1 => query.push_str("&limit=1"),
            _ => {}
        }
        let accept = if self.chance(0.3) { "application/json;as=Table;v=v1;g=meta.k8s.io" } else { "application/json" };
        let headers = vec![(HeaderName::from_static("accept"), HeaderValue::from_static(accept))];
        (Method::GET, path, query, headers, None)
    }

    fn params(&mut self) -> Parts {
        let absurd = [
            "99999999999999999999",
            "9223372036854775807",
            "-9223372036854775808",
            "1e308",
            "-1",
            "0x7fffffff",
            "+5",
            "%201",
            "",
        ];
        let query = match self.rng.random_range(0..4) {
            // One parameter repeated (kube reads the first).
            0 => {
                let key = *["limit", "labelSelector", "resourceVersion", "timeoutSeconds", "continue", "fieldSelector"]
                    .choose(&mut self.rng)
                    .unwrap();
                let n = self.bulk(2, 20_000);
                within((0..n).map(|i| format!("{key}={}", i + 1)), "&")
            }
            // Absurd values.
            1 => {
                let mut q = Vec::new();
                for key in ["limit", "timeoutSeconds", "resourceVersion"] {
                    if self.chance(0.7) {
                        q.push(format!("{key}={}", absurd.choose(&mut self.rng).unwrap()));
                    }
                }
                if self.chance(0.3) {
                    q.push("resourceVersionMatch=NotOlderThan".into());
                }
                q.join("&")
            }
            // A continue token that decodes to something large.
            2 => {
                let n = self.bulk(10, 40_000);
                let inner = format!("{{\"v\":\"meta.k8s.io/v1\",\"rv\":1,\"start\":\"{}\"}}", "s".repeat(n));
                format!("limit=1&continue={}", super::pct(&b64(inner.as_bytes())))
            }
            // Many distinct unknown parameters.
            _ => {
                let n = self.bulk(10, 20_000);
                within((0..n).map(|i| format!("p{i}=v")), "&")
            }
        };
        let path = if self.chance(0.8) {
            self.list_path()
        } else {
            let (p, _, _) = self.target(0.2);
            p
        };
        let headers = vec![(HeaderName::from_static("accept"), HeaderValue::from_static("application/json"))];
        (Method::GET, path, query, headers, None)
    }

    fn accept(&mut self) -> Parts {
        let path = match self.rng.random_range(0..4) {
            0 => "/apis".to_string(),
            1 => self.list_path(),
            _ => {
                let (p, _, _) = self.target(0.2);
                p
            }
        };
        let kinds = [
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            "application/yaml;q=0.1",
            "text/html;q=0.9",
            "application/x-nope",
            "*/*;q=0",
        ];
        let mut headers = Vec::new();
        if self.chance(0.5) {
            // One header of many media types, below the server's 1 MiB header
            // limit (over it, 431 on HTTP/1.1; a refused stream on HTTP/2).
            let n = self.bulk(10, 20_000);
            let mut v = String::new();
            for _ in 0..n {
                let k = *kinds.choose(&mut self.rng).unwrap();
                if v.len() + k.len() + 2 > 900_000 {
                    break;
                }
                if !v.is_empty() {
                    v.push_str(", ");
                }
                v.push_str(k);
            }
            if let Ok(v) = HeaderValue::from_str(&v) {
                headers.push((HeaderName::from_static("accept"), v));
            }
        } else {
            let n = self.sized(2, 90);
            for _ in 0..n {
                let k = *kinds.choose(&mut self.rng).unwrap();
                headers.push((HeaderName::from_static("accept"), HeaderValue::from_static(k)));
            }
        }
        (Method::GET, path, String::new(), headers, None)
    }
}

/// The most bytes of query an attack sends: a URI is at most 64 KiB to the
/// `http` crate (the client's and hyper's), so longer ones cannot be sent.
const URL_BUDGET: usize = 60_000;

/// `items` joined by `sep`, as many as fit in [`URL_BUDGET`].
fn within(items: impl Iterator<Item = String>, sep: &str) -> String {
    let mut out = String::new();
    for item in items {
        if out.len() + sep.len() + item.len() > URL_BUDGET {
            break;
        }
        if !out.is_empty() {
            out.push_str(sep);
        }
        out.push_str(&item);
    }
    out
}

/// What each generator returns: method, path, query, headers, body.
type Parts = (Method, String, String, Vec<(HeaderName, HeaderValue)>, Option<Vec<u8>>);

/// Standard base64 (for continue tokens), without a dependency.
fn b64(bytes: &[u8]) -> String {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
