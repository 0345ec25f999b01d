//! Robustness of the whole decode-and-validate pipeline a request body goes
//! through (decode, ObjectMeta type checks, pruning, schema and ObjectMeta
//! validation, update preparation): random bytes, mutated valid documents and
//! random values must never panic, and values deeper than the walks' guard
//! must be handled without overflowing the stack.

use serde_json::{json, Map, Value};

use crate::apimachinery::gojson::{decode_error_message, decode_json, strict_decoding_error, strict_warnings};
use crate::apimachinery::objectmeta::{
    check_object_meta_types, prepare_meta_for_update, validate_object_meta, validate_object_meta_update,
    validate_type_meta,
};
use crate::apimachinery::schema::prune::prune_unknown_fields;
use crate::apimachinery::schema::validate::validate_against_schema;
use crate::apimachinery::schema::MAX_WALK_DEPTH;
use crate::apimachinery::test_fixtures::{widget, widget_schema};

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const ALPHABET: &[u8] = b"{}[]:,\"\\ \n0123456789-+.eEtrufalsn/abxyzK\x00\x01\x7f\xc3\xa9\xff\xf0\x9f";

fn exercise(body: &[u8]) {
    let schema = widget_schema();
    match decode_json(body) {
        Ok((mut v, dups)) => {
            assert!(v.is_object());
            let _ = strict_decoding_error(&dups, &[]);
            let meta = v.get("metadata").cloned().unwrap_or(Value::Null);
            let _ = check_object_meta_types(&meta);
            let unknown = prune_unknown_fields(&mut v, &schema);
            let _ = strict_warnings(&dups, &unknown);
            for e in validate_against_schema(&v, &schema) {
                let _ = e.full_message();
            }
            let _ = validate_type_meta(&v, "example.com/v1alpha", "Widget");
            let meta = v.get("metadata").cloned().unwrap_or(Value::Null);
            let _ = validate_object_meta(&meta, true);
            let _ = validate_object_meta(&meta, false);
            let mut new = meta.clone();
            prepare_meta_for_update(&mut new, &meta);
            let _ = validate_object_meta_update(&new, &meta);
            let _ = validate_object_meta_update(&meta, &new);
        }
        Err(e) => {
            assert!(!e.is_empty());
            let _ = decode_error_message(&e, body, "Widget", "v1alpha");
        }
    }
}

fn random_value(rng: &mut XorShift, depth: usize) -> Value {
    match rng.below(if depth > 4 { 6 } else { 9 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 1),
        2 => json!(rng.next() as i64 >> rng.below(64)),
        3 => json!((rng.next() as i64 as f64) / 1e3),
        4 => json!(
            ["", "a", "Bad Name", "2024-01-01T00:00:00Z", "orphan", "foregroundDeletion", "x/y/z", "é-"][rng.below(8)]
        ),
        5 => json!(rng.below(3)),
        6 => Value::Array((0..rng.below(4)).map(|_| random_value(rng, depth + 1)).collect()),
        _ => {
            let keys = [
                "name",
                "kind",
                "apiVersion",
                "uid",
                "controller",
                "type",
                "status",
                "weight",
                "labels",
                "x",
                "operation",
                "manager",
            ];
            let mut m = Map::new();
            for _ in 0..rng.below(5) {
                m.insert(keys[rng.below(keys.len())].to_string(), random_value(rng, depth + 1));
            }
            Value::Object(m)
        }
    }
}

#[test]
fn fuzz_random_bytes_never_panic() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for _ in 0..3000 {
        let len = rng.below(48);
        let body: Vec<u8> = (0..len)
            .map(|_| if rng.below(8) == 0 { rng.next() as u8 } else { ALPHABET[rng.below(ALPHABET.len())] })
            .collect();
        exercise(&body);
    }
}

#[test]
fn fuzz_mutated_valid_json_never_panics() {
    let mut rng = XorShift(0xD1B5_4A32_D192_ED03);
    let mut seed = widget();
    seed["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "Team", "name": "f", "uid": "u", "controller": true}]);
    seed["metadata"]["managedFields"] =
        json!([{"manager": "m", "operation": "Update", "time": "2024-01-01T00:00:00Z"}]);
    seed["metadata"]["finalizers"] = json!(["a/b"]);
    let base = serde_json::to_vec(&seed).unwrap();
    let mut parsed = 0;
    for _ in 0..3000 {
        let mut body = base.clone();
        for _ in 0..=rng.below(4) {
            let at = rng.below(body.len() + 1);
            match rng.below(5) {
                0 if at < body.len() => {
                    body.remove(at);
                }
                1 => body.insert(at, ALPHABET[rng.below(ALPHABET.len())]),
                2 if at < body.len() => body[at] = ALPHABET[rng.below(ALPHABET.len())],
                3 => {
                    let start = rng.below(body.len());
                    let end = (start + rng.below(16)).min(body.len());
                    let piece = body[start..end].to_vec();
                    body.splice(at..at, piece);
                }
                _ => {
                    let start = rng.below(body.len());
                    let end = (start + rng.below(8)).min(body.len());
                    body.drain(start..end);
                }
            }
        }
        if decode_json(&body).is_ok() {
            parsed += 1;
        }
        exercise(&body);
    }
    assert!(parsed > 50, "mutations should leave some valid documents ({parsed})");
}

#[test]
fn fuzz_random_values_in_a_widget_never_panic() {
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    let spots = [
        "/spec/weight",
        "/spec/colour",
        "/spec",
        "/status",
        "/status/conditions",
        "/status/conditions/0",
        "/status/conditions/0/lastTransitionTime",
        "/status/observedGeneration",
        "/metadata",
        "/metadata/labels",
        "/metadata/name",
        "/kind",
        "/apiVersion",
    ];
    for i in 0..2000 {
        let mut obj = widget();
        obj["metadata"]["ownerReferences"] = json!([]);
        obj["metadata"]["managedFields"] = json!([]);
        obj["metadata"]["finalizers"] = json!([]);
        let spot = spots[rng.below(spots.len())];
        let spot = if i % 3 == 0 {
            ["/metadata/ownerReferences", "/metadata/managedFields", "/metadata/finalizers", "/metadata/annotations"]
                [rng.below(4)]
        } else {
            spot
        };
        let value = random_value(&mut rng, 0);
        if let Some(slot) = obj.pointer_mut(spot) {
            *slot = value;
        } else if let Some(m) = obj.pointer_mut("/metadata").and_then(Value::as_object_mut) {
            m.insert(spot.rsplit('/').next().unwrap_or("x").to_string(), value);
        }
        // both straight and through the decoder
        exercise(&serde_json::to_vec(&obj).unwrap());
        let schema = if i % 2 == 0 { widget_schema() } else { random_value(&mut rng, 0) };
        let _ = validate_against_schema(&obj, &schema);
        let _ = prune_unknown_fields(&mut obj, &schema);
    }
}

#[test]
fn hand_built_deep_values_are_walked_safely() {
    let mut v = json!(1);
    for _ in 0..(MAX_WALK_DEPTH + 50) {
        v = Value::Array(vec![v]);
    }
    let mut obj = json!({"spec": v});
    let _ = prune_unknown_fields(&mut obj, &json!({"properties": {"spec": {}}}));
    let schema_items =
        (0..(MAX_WALK_DEPTH + 50)).fold(json!({"type": "string"}), |s, _| json!({"type": "array", "items": s}));
    let errs = validate_against_schema(&obj, &json!({"properties": {"spec": schema_items}}));
    assert!(!errs.is_empty());
    // tear the value down iteratively so the test itself cannot overflow
    let mut stack = vec![obj];
    while let Some(mut v) = stack.pop() {
        match &mut v {
            Value::Array(a) => stack.append(a),
            Value::Object(m) => stack.extend(std::mem::take(m).into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}
