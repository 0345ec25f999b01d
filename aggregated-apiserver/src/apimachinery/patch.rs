//! PATCH bodies: RFC 6902 JSON patch, RFC 7396 merge patch, and the
//! configuration of a server-side apply. Strategic merge patch is refused
//! with 415, as kube-apiserver refuses it for custom resources, rather than
//! silently treated as a plain merge (which would replace lists such as
//! finalizers instead of merging); so is apply in CBOR.

use serde_json::Value;

use crate::apimachinery::errors::{ApiError, Reason, StatusDetails};
use crate::apimachinery::gojson::{decode_json, MAX_NESTING_DEPTH, VERSION_KIND_ERROR_PREFIX};
use crate::apimachinery::serializer::BodyType;

pub enum Patch {
    Json(json_patch::Patch),
    Merge { patch: Value, duplicates: Vec<String> },
}

const ACCEPTED: &str = "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

/// At most this many operations in one JSON patch, as kube-apiserver
/// (`maxJSONPatchOperations` in k8s.io/apiserver's patch handler): 413 beyond.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// The bytes that the `copy` operations of one JSON patch may add in all:
/// k8s.io/apiserver's default `JSONPatchMaxCopyBytes` (3 MiB), which it gives
/// evanphx/json-patch as `AccumulatedCopySizeLimit`. Without it, 24 copies of
/// a value into its own subtree make a 3 KB body grow an object to gigabytes.
pub const JSON_PATCH_MAX_COPY_BYTES: usize = 3 * 1024 * 1024;

/// Values of the document a JSON patch may walk to check the nesting of a
/// `move` to a deeper path (see [`GrowthGuard`]); kube has no such walk.
const JSON_PATCH_MAX_WALKED_VALUES: usize = 3 * 1024 * 1024;

/// kube answers a patch that does not apply, and one whose copies pass the
/// limit, with a generic 422 (NewGenericServerResponse): no details, no cause.
fn patch_did_not_apply() -> ApiError {
    ApiError::new(422, Reason::Invalid, "the server rejected our request due to an error in our request")
        .with_details(StatusDetails::default())
}

/// 422 for a patch that would nest the object deeper than any request body
/// may ([`MAX_NESTING_DEPTH`]): the result could never be decoded again, and
/// nesting without bound would exhaust the stack of whatever walks it.
fn nested_too_deep() -> ApiError {
    ApiError::new(
        422,
        Reason::Invalid,
        format!("the server rejected our request due to an error in our request: the patched object would nest deeper than {MAX_NESTING_DEPTH} levels"),
    )
    .with_details(StatusDetails::default())
}

/// Keeps what a JSON patch can make the server allocate proportional to its
/// body: the bytes added by `copy` are counted against
/// [`JSON_PATCH_MAX_COPY_BYTES`] before each copy is made (not after the
/// object has grown), and no operation may nest the document deeper than
/// [`MAX_NESTING_DEPTH`]. `add` and `replace` bring only what the body holds,
/// `move` and `remove` add nothing, and `test` reads.
///
/// Depth is tracked as an upper bound of the document's nesting, so most
/// operations cost nothing to check: a value placed at a path of `n` segments
/// reaches `n` plus its own depth. A body's value is measured once (its size is
/// the body's); a copied one while it is counted; a moved one only when it goes
/// deeper than it was and the bound alone cannot rule it out, and those walks
/// share [`JSON_PATCH_MAX_WALKED_VALUES`].
struct GrowthGuard {
    copied_bytes: usize,
    walk_budget: usize,
    depth_bound: usize,
}

impl GrowthGuard {
    fn new(doc: &Value) -> Self {
        Self { copied_bytes: 0, walk_budget: JSON_PATCH_MAX_WALKED_VALUES, depth_bound: depth_of(doc) }
    }

    /// Checks `op` against the limits before it is applied to `doc`.
    fn admit(&mut self, doc: &Value, op: &json_patch::PatchOperation) -> Result<(), ApiError> {
        use json_patch::PatchOperation as Op;
        let reached = match op {
            Op::Add(o) => o.path.count() + depth_of(&o.value),
            Op::Replace(o) => o.path.count() + depth_of(&o.value),
            Op::Copy(o) => {
                // A missing source fails in json_patch, as any patch that does not apply.
                let Some(source) = doc.pointer(o.from.as_str()) else { return Ok(()) };
                let room = JSON_PATCH_MAX_COPY_BYTES - self.copied_bytes;
                let size = encoded_len_within(source, room).ok_or_else(|| {
                    tracing::debug!(limit = JSON_PATCH_MAX_COPY_BYTES, "JSON patch copies exceed the limit");
                    patch_did_not_apply()
                })?;
                self.copied_bytes += size;
                // Walks no more values than the bytes just counted.
                o.path.count() + depth_of(source)
            }
            Op::Move(o) => {
                let (from, to) = (o.from.count(), o.path.count());
                if to <= from {
                    return Ok(());
                }
                let bound = to + self.depth_bound.saturating_sub(from);
                if bound <= MAX_NESTING_DEPTH {
                    bound
                } else {
                    let Some(source) = doc.pointer(o.from.as_str()) else { return Ok(()) };
                    to + nesting_depth(source, &mut self.walk_budget).ok_or_else(nested_too_deep)?
                }
            }
            Op::Remove(_) | Op::Test(_) => return Ok(()),
        };
        if reached > MAX_NESTING_DEPTH {
            return Err(nested_too_deep());
        }
        self.depth_bound = self.depth_bound.max(reached);
        Ok(())
    }
}

/// How deeply `v` nests arrays and objects (a scalar: 0, `[]`: 1), walked
/// without recursion; None when it has more than `budget` values (the budget
/// is spent by what was walked).
fn nesting_depth(v: &Value, budget: &mut usize) -> Option<usize> {
    let mut deepest = 0;
    let mut pending = vec![(v, 0usize)];
    while let Some((v, above)) = pending.pop() {
        *budget = budget.checked_sub(1)?;
        match v {
            Value::Array(items) => {
                deepest = deepest.max(above + 1);
                pending.extend(items.iter().map(|i| (i, above + 1)));
            }
            Value::Object(fields) => {
                deepest = deepest.max(above + 1);
                pending.extend(fields.values().map(|i| (i, above + 1)));
            }
            _ => {}
        }
    }
    Some(deepest)
}

/// [`nesting_depth`] of a value whose size is already bounded (the body's, a
/// counted copy's, the stored object's).
fn depth_of(v: &Value) -> usize {
    let mut unbounded = usize::MAX;
    nesting_depth(v, &mut unbounded).unwrap_or(usize::MAX)
}

/// The length of `v` encoded as compact JSON (what evanphx/json-patch counts
/// for a copy), or None as soon as it passes `limit`: the encoding stops there.
fn encoded_len_within(v: &Value, limit: usize) -> Option<usize> {
    struct Counter {
        written: usize,
        limit: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.written += buf.len();
            if self.written > self.limit {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter { written: 0, limit };
    serde_json::to_writer(&mut counter, v).ok().map(|()| counter.written)
}

impl Patch {
    pub fn parse(body_type: Option<BodyType>, body: &[u8]) -> Result<Self, ApiError> {
        match body_type {
            Some(BodyType::JsonPatch) => {
                // A JSON document that is not a list of operations gets Go's
                // unmarshal wording, as kube decodes into []jsonPatchOp.
                if let Ok(v) = serde_json::from_slice::<Value>(body) {
                    let go_type = match v {
                        Value::Object(_) => Some("object"),
                        Value::String(_) => Some("string"),
                        Value::Number(_) => Some("number"),
                        Value::Bool(_) => Some("bool"),
                        Value::Array(_) | Value::Null => None,
                    };
                    if let Some(t) = go_type {
                        return Err(ApiError::bad_request(format!(
                            "error decoding patch: json: cannot unmarshal {t} into Go value of type []handlers.jsonPatchOp"
                        )));
                    }
                }
                serde_json::from_slice::<json_patch::Patch>(body)
                    .map(Patch::Json)
                    .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
            }
            Some(BodyType::MergePatch) => {
                let (patch, duplicates) = decode_json(body).map_err(|e| {
                    let why = e.strip_prefix(VERSION_KIND_ERROR_PREFIX).unwrap_or(&e);
                    ApiError::bad_request(format!("error decoding patch: {why}"))
                })?;
                if !patch.is_object() {
                    return Err(ApiError::bad_request("error decoding patch: a merge patch must be a JSON object"));
                }
                Ok(Patch::Merge { patch, duplicates })
            }
            _ => Err(ApiError::unsupported_media_type(ACCEPTED)),
        }
    }

    pub fn apply(&self, mut doc: Value) -> Result<Value, ApiError> {
        match self {
            Patch::Json(p) => {
                if p.0.len() > MAX_JSON_PATCH_OPERATIONS {
                    return Err(ApiError::too_large(format_args!(
                        "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
                        p.0.len()
                    )));
                }
                let mut growth = GrowthGuard::new(&doc);
                // Applied one operation at a time so that `test` follows
                // kube-apiserver (evanphx/json-patch): testing a missing path
                // against null succeeds. Clients rely on it, e.g. kube-rs adds
                // its first finalizer with `test /metadata/finalizers == null`.
                // A failure discards the whole document, so the patch stays atomic.
                for op in &p.0 {
                    crate::heavy::check_deadline()?;
                    if let json_patch::PatchOperation::Test(t) = op {
                        if t.value.is_null() && doc.pointer(t.path.as_str()).is_none_or(Value::is_null) {
                            continue;
                        }
                    }
                    growth.admit(&doc, op)?;
                    json_patch::patch(&mut doc, std::slice::from_ref(op)).map_err(|_| patch_did_not_apply())?;
                }
            }
            Patch::Merge { patch, .. } => json_patch::merge(&mut doc, patch),
        }
        Ok(doc)
    }

    /// What applying the patch may add to an object beyond the patch's own
    /// body: a JSON patch that copies, up to the copy limit.
    pub fn growth_bytes(&self) -> usize {
        match self {
            Patch::Json(p) if p.0.iter().any(|op| matches!(op, json_patch::PatchOperation::Copy(_))) => {
                JSON_PATCH_MAX_COPY_BYTES
            }
            _ => 0,
        }
    }

    /// Duplicate fields found in a merge patch body (for fieldValidation).
    pub fn duplicates(&self) -> Option<&[String]> {
        match self {
            Patch::Merge { duplicates, .. } if !duplicates.is_empty() => Some(duplicates),
            _ => None,
        }
    }
}

/// Applies to `obj` the change from `before` to `after`: what a kind's
/// hook or conversion changed of a typed copy of `obj` (both the typed copy
/// encoded). What it left alone stays as the client wrote it, even where the
/// type would write it otherwise (a field it does not know, a time written
/// with more precision).
pub fn apply_changes(obj: &mut Value, before: &Value, after: &Value) {
    match (obj, before, after) {
        (Value::Object(obj), Value::Object(before), Value::Object(after)) => {
            for key in before.keys().filter(|k| !after.contains_key(*k)) {
                obj.remove(key);
            }
            for (key, now) in after {
                match (obj.get_mut(key), before.get(key)) {
                    (Some(field), Some(was)) if was != now => apply_changes(field, was, now),
                    (Some(_), Some(_)) => {}
                    (_, _) => {
                        obj.insert(key.clone(), now.clone());
                    }
                }
            }
        }
        (obj, before, after) => {
            if before != after {
                *obj = after.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_hook_changes_only_what_it_changed() {
        // The client's object keeps what the type would write otherwise.
        let mut obj = json!({"metadata": {"name": "a", "creationTimestamp": "2026-01-01T00:00:00.5Z"},
            "spec": {"message": "hi", "times": null, "tags": ["x"]}});
        let before = json!({"metadata": {"name": "a", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"message": "hi", "tags": ["x"]}});
        let after = json!({"metadata": {"name": "a", "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"l": "v"}},
            "spec": {"message": "hi", "times": 1}});
        apply_changes(&mut obj, &before, &after);
        assert_eq!(
            obj,
            json!({"metadata": {"name": "a", "creationTimestamp": "2026-01-01T00:00:00.5Z", "labels": {"l": "v"}},
                "spec": {"message": "hi", "times": 1}})
        );
    }

    fn json_patch(ops: Value) -> Patch {
        Patch::parse(Some(BodyType::JsonPatch), ops.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn test_of_a_missing_path_against_null_passes_like_kube() {
        let p = json_patch(json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["a/b"]}
        ]));
        let out = p.apply(json!({"metadata": {"name": "x"}})).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a/b"]));
        // Present and not null: the test fails, nothing is applied.
        let err = p.apply(json!({"metadata": {"finalizers": ["c/d"]}})).unwrap_err();
        assert_eq!(err.code, 422);
        let failing = json_patch(json!([{"op": "test", "path": "/spec/x", "value": 1}]));
        assert!(failing.apply(json!({"spec": {}})).is_err());
    }

    /// A 3 KB patch that, unbounded, grows an object until the kernel kills
    /// the server: one add of 1 KB, then copies of /spec into itself, each
    /// doubling it.
    fn doubling_copies(copies: usize) -> Value {
        let mut ops = vec![json!({"op": "add", "path": "/spec/d0", "value": "x".repeat(1024)})];
        for i in 1..=copies {
            ops.push(json!({"op": "copy", "from": "/spec", "path": format!("/spec/d{i}")}));
        }
        Value::Array(ops)
    }

    #[test]
    fn copies_are_capped_before_the_object_grows() {
        let doc = json!({"metadata": {"name": "x"}, "spec": {}});
        // 11 doublings stay under 3 MiB of copies (2 MiB of copied data).
        let out = json_patch(doubling_copies(11)).apply(doc.clone()).unwrap();
        assert!(serde_json::to_vec(&out).unwrap().len() > 2 << 20);
        // 12 pass it, as do the 24 of the attack: kube's generic 422.
        for copies in [12, 24] {
            let err = json_patch(doubling_copies(copies)).apply(doc.clone()).unwrap_err();
            assert_eq!(
                (err.code, err.message.as_str()),
                (422, "the server rejected our request due to an error in our request")
            );
        }
    }

    #[test]
    fn at_most_ten_thousand_operations() {
        let op = json!({"op": "test", "path": "/metadata/name", "value": "x"});
        let doc = json!({"metadata": {"name": "x"}});
        assert!(json_patch(Value::Array(vec![op.clone(); 10_000])).apply(doc.clone()).is_ok());
        let err = json_patch(Value::Array(vec![op; 10_001])).apply(doc).unwrap_err();
        assert_eq!(err.code, 413);
        assert_eq!(
            err.message,
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
        );
    }

    /// Values added, copied or moved to the bottom of a deep one: each op is
    /// small, the nesting is not.
    #[test]
    fn nesting_stays_within_what_a_body_may_hold() {
        let deep = |n: usize| (0..n).fold(json!(1), |v, _| json!({"a": v}));
        // spec.x nests 100 levels: the object 102.
        let doc = json!({"metadata": {"name": "x"}, "spec": {"x": deep(100), "y": deep(30)}});
        let bottom = format!("/spec/x{}", "/a".repeat(99));
        let add =
            |levels: usize| json_patch(json!([{"op": "add", "path": format!("{bottom}/b"), "value": deep(levels)}]));
        // At the bottom (102 segments) a value of 25 levels is the deepest a body may be (127).
        assert!(add(25).apply(doc.clone()).is_ok());
        assert_eq!(add(26).apply(doc.clone()).unwrap_err().code, 422);
        // A copy or a move of a 30-deep value to the bottom: 132.
        for op in ["copy", "move"] {
            let p = json_patch(json!([{"op": op, "from": "/spec/y", "path": format!("{bottom}/b")}]));
            assert_eq!(p.apply(doc.clone()).unwrap_err().code, 422, "{op}");
        }
        // Moving spec.y's own inside up and around goes no deeper: allowed.
        let shallow = json_patch(json!([
            {"op": "move", "from": "/spec/y/a", "path": "/spec/z"},
            {"op": "move", "from": "/spec/z/a", "path": "/spec/y/a"},
            {"op": "copy", "from": "/spec/y", "path": "/spec/w"},
            {"op": "move", "from": "/spec/w", "path": format!("{bottom}/b")},
        ]));
        let err = shallow.apply(doc.clone()).unwrap_err();
        assert_eq!(err.code, 422, "spec.w is 29 deep: 131 at the bottom");
        let fits = json_patch(json!([
            {"op": "move", "from": "/spec/y/a", "path": "/spec/z"},
            {"op": "move", "from": "/spec/z/a/a/a/a/a/a", "path": format!("{bottom}/b")},
        ]));
        assert!(fits.apply(doc).is_ok(), "a 24-deep value at the bottom: 126");
    }

    #[test]
    fn strategic_merge_is_refused() {
        let e = Patch::parse(Some(BodyType::StrategicMergePatch), b"{}").err().unwrap();
        assert_eq!(e.code, 415);
    }
}
