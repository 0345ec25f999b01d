//! The types a MutatingAdmissionPolicy's expressions construct, as
//! k8s.io/apiserver's `pkg/cel/mutation` declares them: `JSONPatch{op, path,
//! from, value}` and `Object{...}` with nested `Object.<field>{...}` (no
//! schema behind them: any field name, any value).
//!
//! The `cel` crate 0.13 parses message construction (`T{f: v}`) but cannot
//! evaluate it (its interpreter has `todo!()` there), and the newer `cel`
//! releases that can are not the ones kube-cel's libraries build on. So an
//! environment that offers these types rewrites each construction, after
//! parsing, into a call of a function no source can name ([`CONSTRUCT`],
//! `@` is not an identifier character) with the type name and a map of the
//! fields: `Object.spec{replicas: 1}` runs as `@construct('Object.spec',
//! {'replicas': 1})`, which builds a [`Constructed`] value. An optional field
//! (`?f: optional.none()`) becomes an optional map entry, which the crate's
//! interpreter leaves out as cel-go leaves the field unset. Environments
//! without these types refuse any construction when compiling, as cel-go's
//! checker does for an undeclared type.

use std::collections::BTreeMap;
use std::sync::Arc;

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedEntryExpr, LiteralValue, MapEntryExpr, MapExpr};
use cel::objects::Key;
use cel::{ExecutionError, FunctionContext, IdedExpr, Value};
use kube_cel::cel;
use serde_json::Value as Json;

/// The function a construction is rewritten into.
pub(super) const CONSTRUCT: &str = "@construct";

/// kube's `JSONPatchTypeName` and `ObjectTypeName`.
const JSON_PATCH: &str = "JSONPatch";
const OBJECT: &str = "Object";

/// A value built by `T{...}`: its type name and fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constructed {
    pub type_name: String,
    pub fields: BTreeMap<String, Value>,
}

impl cel::objects::Opaque for Constructed {
    fn runtime_type_name(&self) -> &str {
        &self.type_name
    }

    /// An `Object` as the map it stands for (no type names checked: see
    /// [`object_json`]); a JSONPatch as its fields.
    fn json(&self) -> Option<Json> {
        let mut out = serde_json::Map::new();
        for (k, v) in &self.fields {
            out.insert(k.clone(), v.json().ok()?);
        }
        Some(Json::Object(out))
    }
}

/// Rewrites every construction in `e` into a [`CONSTRUCT`] call; with
/// `allowed` false (an environment without these types), the first one is
/// an error in cel-go's words.
pub(super) fn rewrite(e: &mut IdedExpr, allowed: bool) -> Result<(), String> {
    match &mut e.expr {
        Expr::Struct(s) => {
            let known = s.type_name == JSON_PATCH
                || s.type_name == OBJECT
                || s.type_name.strip_prefix("Object.").is_some_and(|rest| !rest.is_empty());
            if !allowed || !known {
                return Err(format!("ERROR: <input>: undeclared reference to '{}' (in container '')", s.type_name));
            }
            let mut entries = Vec::with_capacity(s.entries.len());
            for entry in std::mem::take(&mut s.entries) {
                let EntryExpr::StructField(mut field) = entry.expr else {
                    return Err("ERROR: <input>: Syntax error: map entry in a message construction".into());
                };
                rewrite(&mut field.value, allowed)?;
                let key = IdedExpr { id: entry.id, expr: Expr::Literal(LiteralValue::String(field.field.into())) };
                entries.push(IdedEntryExpr {
                    id: entry.id,
                    expr: EntryExpr::MapEntry(MapEntryExpr { key, value: field.value, optional: field.optional }),
                });
            }
            let type_name =
                IdedExpr { id: e.id, expr: Expr::Literal(LiteralValue::String(s.type_name.clone().into())) };
            let fields = IdedExpr { id: e.id, expr: Expr::Map(MapExpr { entries }) };
            e.expr = Expr::Call(CallExpr { func_name: CONSTRUCT.into(), target: None, args: vec![type_name, fields] });
            Ok(())
        }
        Expr::Select(s) => rewrite(&mut s.operand, allowed),
        Expr::Call(c) => {
            if let Some(t) = c.target.as_deref_mut() {
                rewrite(t, allowed)?;
            }
            c.args.iter_mut().try_for_each(|a| rewrite(a, allowed))
        }
        Expr::List(l) => l.elements.iter_mut().try_for_each(|x| rewrite(x, allowed)),
        Expr::Map(m) => m.entries.iter_mut().try_for_each(|entry| match &mut entry.expr {
            EntryExpr::MapEntry(me) => {
                rewrite(&mut me.key, allowed)?;
                rewrite(&mut me.value, allowed)
            }
            EntryExpr::StructField(f) => rewrite(&mut f.value, allowed),
        }),
        Expr::Comprehension(c) => {
            for x in [&mut c.iter_range, &mut c.accu_init, &mut c.loop_cond, &mut c.loop_step, &mut c.result] {
                rewrite(x, allowed)?;
            }
            Ok(())
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Ok(()),
    }
}

/// `@construct(type, fields)`: a JSONPatch checks its fields as kube's
/// `JSONPatchType.Val` does; an Object takes any.
pub(super) fn construct(ftx: &FunctionContext, type_name: Arc<String>, fields: Value) -> Result<Value, ExecutionError> {
    let Value::Map(map) = fields else {
        return Err(ftx.error("message fields must be a map"));
    };
    let mut out = BTreeMap::new();
    for (key, value) in map.map.iter() {
        let Key::String(name) = key else {
            return Err(ftx.error("message field names must be strings"));
        };
        if type_name.as_str() == JSON_PATCH {
            match name.as_str() {
                "op" | "path" | "from" if !matches!(value, Value::String(_)) => {
                    return Err(
                        ftx.error(format!("unexpected type {} for JSONPatchType '{name}' field", value.type_of()))
                    )
                }
                "op" | "path" | "from" | "value" => {}
                other => return Err(ftx.error(format!("unexpected JSONPatchType field: {other}"))),
            }
        }
        out.insert(name.to_string(), value.clone());
    }
    Ok(Value::Opaque(Arc::new(Constructed { type_name: type_name.to_string(), fields: out })))
}

/// The value of an `ApplyConfiguration` expression as the JSON object it
/// stands for: it must be an `Object{...}`, and every nested construction
/// named for its place (`Object.spec.template{...}` under `spec.template`),
/// kube's `CheckTypeNamesMatchFieldPathNames`.
pub fn object_json(value: &Value) -> Result<Json, String> {
    match constructed(value) {
        Some(c) if c.type_name == OBJECT => to_json(value, &mut vec![OBJECT.to_string()]),
        _ => Err(format!("unsupported return type from ApplyConfiguration expression: {}", type_name(value))),
    }
}

/// One operation of a `JSONPatch` expression's list.
#[derive(Debug, Clone, PartialEq)]
pub struct PatchOperation {
    pub op: String,
    pub path: String,
    pub from: String,
    pub value: Option<Json>,
}

impl PatchOperation {
    /// As RFC 6902 writes it (kube leaves `from` out when empty).
    pub fn to_json(&self) -> Json {
        let mut out = serde_json::Map::new();
        out.insert("op".into(), Json::String(self.op.clone()));
        out.insert("path".into(), Json::String(self.path.clone()));
        if !self.from.is_empty() {
            out.insert("from".into(), Json::String(self.from.clone()));
        }
        if let Some(v) = &self.value {
            out.insert("value".into(), v.clone());
        }
        Json::Object(out)
    }
}

/// The operations of a `JSONPatch` expression's value (a list of
/// `JSONPatch{...}`), in kube's words when it is not one.
pub fn json_patch(value: &Value) -> Result<Vec<PatchOperation>, String> {
    let Value::List(items) = value else {
        return Err("type mismatch: JSONPatchType.expression should evaluate to array".into());
    };
    items
        .iter()
        .map(|item| {
            let Some(c) = constructed(item).filter(|c| c.type_name == JSON_PATCH) else {
                return Err(format!(
                    "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch, got element of {}",
                    type_name(item)
                ));
            };
            let text = |name: &str| match c.fields.get(name) {
                Some(Value::String(s)) => s.to_string(),
                _ => String::new(),
            };
            let value = match c.fields.get("value") {
                None => None,
                Some(v) => {
                    // An Object in a value is checked from its own name down.
                    let mut path = match constructed(v) {
                        Some(inner) => vec![inner.type_name.clone()],
                        None => Vec::new(),
                    };
                    Some(to_json(v, &mut path).map_err(|e| match e.strip_prefix("type mismatch: ") {
                        Some(_) => e,
                        None => {
                            format!("JSONPath valueExpression evaluated to a type that could not marshal to JSON: {e}")
                        }
                    })?)
                }
            };
            Ok(PatchOperation { op: text("op"), path: text("path"), from: text("from"), value })
        })
        .collect()
}

fn constructed(value: &Value) -> Option<&Constructed> {
    match value {
        Value::Opaque(o) => o.downcast_ref::<Constructed>(),
        _ => None,
    }
}

fn type_name(value: &Value) -> String {
    match constructed(value) {
        Some(c) => c.type_name.clone(),
        None => value.type_of().to_string(),
    }
}

/// JSON of a CEL value; constructions must be named `path` joined by dots
/// (an empty path checks nothing: a construction met first names it).
fn to_json(value: &Value, path: &mut Vec<String>) -> Result<Json, String> {
    if path.len() > crate::apimachinery::schema::MAX_WALK_DEPTH {
        return Err("value nested too deeply".into());
    }
    Ok(match value {
        Value::Opaque(_) => {
            let Some(c) = constructed(value) else {
                return Err(format!("unable to convert {} to JSON", type_name(value)));
            };
            if c.type_name == JSON_PATCH {
                return Err("unable to convert JSONPatch to JSON".into());
            }
            let expected = path.join(".");
            if !path.is_empty() && c.type_name != expected {
                return Err(format!(
                    "type mismatch: unexpected type name {:?}, expected {expected:?}, which matches field name path from root Object type",
                    c.type_name
                ));
            }
            let rooted = path.is_empty();
            if rooted {
                path.push(c.type_name.clone());
            }
            let mut out = serde_json::Map::new();
            for (k, v) in &c.fields {
                path.push(k.clone());
                let converted = to_json(v, path);
                path.pop();
                out.insert(k.clone(), converted?);
            }
            if rooted {
                path.pop();
            }
            Json::Object(out)
        }
        Value::List(items) => Json::Array(items.iter().map(|i| to_json(i, path)).collect::<Result<_, _>>()?),
        Value::Map(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map.map.iter() {
                let Key::String(name) = k else {
                    return Err(format!("map key {k} is not a string"));
                };
                out.insert(name.to_string(), to_json(v, path)?);
            }
            Json::Object(out)
        }
        other => other.json().map_err(|e| e.to_string())?,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::apimachinery::cel::{Activation, DeclType, Env, PER_CALL_LIMIT};

    fn eval(src: &str, object: serde_json::Value) -> Result<Value, String> {
        let env = Env::new(u64::MAX).variable("object", DeclType::any()).with_mutation_types();
        let e = env.compile(src).map_err(|e| e.to_string())?;
        let any = DeclType::any();
        e.evaluate(&Activation::new().json("object", &object, &any), PER_CALL_LIMIT)
            .map(|o| o.value)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn objects_are_constructed_with_nested_names() {
        let v = eval(
            "Object{metadata: Object.metadata{labels: {'a': 'b'}}, spec: Object.spec{n: object.spec.n + 1, l: [1, 2]}}",
            json!({"spec": {"n": 1}}),
        )
        .unwrap();
        assert_eq!(
            object_json(&v).unwrap(),
            json!({"metadata": {"labels": {"a": "b"}}, "spec": {"n": 2, "l": [1, 2]}})
        );
    }

    #[test]
    fn misnamed_nested_objects_are_a_type_mismatch() {
        let v = eval("Object{spec: Object.spec.wrong{n: 1}}", json!({})).unwrap();
        assert_eq!(
            object_json(&v).unwrap_err(),
            "type mismatch: unexpected type name \"Object.spec.wrong\", expected \"Object.spec\", which matches field name path from root Object type"
        );
        let v = eval("Object.spec{n: 1}", json!({})).unwrap();
        assert_eq!(
            object_json(&v).unwrap_err(),
            "unsupported return type from ApplyConfiguration expression: Object.spec",
            "an ApplyConfiguration is rooted in Object"
        );
        let v = eval("{'a': 1}", json!({})).unwrap();
        assert_eq!(object_json(&v).unwrap_err(), "unsupported return type from ApplyConfiguration expression: map");
    }

    #[test]
    fn optional_fields_are_left_out_when_none() {
        let v = eval("Object{spec: Object.spec{?n: optional.none(), ?m: optional.of(3)}}", json!({})).unwrap();
        assert_eq!(object_json(&v).unwrap(), json!({"spec": {"m": 3}}));
    }

    #[test]
    fn json_patches_are_read_as_operations() {
        let v = eval(
            "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('a/b~c'), value: 'x'}, \
              JSONPatch{op: 'replace', path: '/spec', value: Object.spec{n: 1}}, JSONPatch{op: 'remove', path: '/x'}]",
            json!({}),
        )
        .unwrap();
        let ops = json_patch(&v).unwrap();
        let ops: Vec<_> = ops.iter().map(PatchOperation::to_json).collect();
        assert_eq!(
            ops,
            vec![
                json!({"op": "add", "path": "/metadata/labels/a~1b~0c", "value": "x"}),
                json!({"op": "replace", "path": "/spec", "value": {"n": 1}}),
                json!({"op": "remove", "path": "/x"}),
            ]
        );
        assert_eq!(
            eval("[JSONPatch{op: 1, path: '/x'}]", json!({})).unwrap_err(),
            "unexpected type int for JSONPatchType 'op' field"
        );
        assert_eq!(
            eval("[JSONPatch{op: 'add', paths: '/x'}]", json!({})).unwrap_err(),
            "unexpected JSONPatchType field: paths"
        );
        let v = eval("[{'op': 'add'}]", json!({})).unwrap();
        assert_eq!(
            json_patch(&v).unwrap_err(),
            "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch, got element of map"
        );
        let v = eval("JSONPatch{op: 'add'}", json!({})).unwrap();
        assert_eq!(json_patch(&v).unwrap_err(), "type mismatch: JSONPatchType.expression should evaluate to array");
    }

    #[test]
    fn environments_without_the_types_refuse_constructions() {
        let env = Env::new(u64::MAX).variable("object", DeclType::any());
        assert_eq!(
            env.compile("Object{spec: 1}").unwrap_err().to_string(),
            "ERROR: <input>: undeclared reference to 'Object' (in container '')"
        );
        let env = env.with_mutation_types();
        assert_eq!(
            env.compile("[1].map(x, Pod{a: x})").unwrap_err().to_string(),
            "ERROR: <input>: undeclared reference to 'Pod' (in container '')"
        );
        assert!(env.compile("[1].map(x, JSONPatch{op: 'add', path: '/a', value: x})").is_ok());
    }
}
