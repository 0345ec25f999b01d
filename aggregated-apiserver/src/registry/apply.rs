//! Server-side apply and managedFields in the registry: who owns what on
//! every write (kube's field manager around its REST handlers), and the apply
//! verb itself. The rules live in `crate::apimachinery::managed_fields`; this
//! is where a kind's writes meet them.

use serde_json::{json, Value};

use super::{meta_mut, meta_str, now_rfc3339, Part, Registry, WriteOutcome, WRITE_RETRIES};
use crate::admission::Requester;
use crate::apimachinery::errors::{self, ApiError, ApiResult, Reason, StatusDetails};
use crate::apimachinery::managed_fields::{self, conflicts_message, ApplyError, FieldManager, ManagedFields, Writer};
use crate::apimachinery::options::WriteOptions;
use crate::apimachinery::serializer::JsonBody;
use crate::apimachinery::typed;
use crate::heavy;
use crate::storage::StoreError;

impl Registry {
    /// The field manager of a write by `manager` to one part of the object.
    fn field_manager(&self, part: Part, manager: &str) -> ApiResult<FieldManager<'_>> {
        let now = serde_json::from_value(json!(now_rfc3339()))
            .map_err(|e| ApiError::internal(format!("formatting the time of a write: {e}")))?;
        Ok(FieldManager {
            shape: &self.shape,
            reset: managed_fields::reset_fields(self.kind.has_status_subresource(), part == Part::Status),
            writer: Writer {
                manager: manager.to_string(),
                api_version: self.kind.names().api_version(),
                subresource: part.subresource().into(),
            },
            // kube's scale handler gives the entries it maps back from a
            // Scale the object's time for that manager, which it never had.
            now: (part != Part::Scale).then_some(now),
            versions: self.versions.as_deref(),
        })
    }

    /// The object as a new, empty one of this kind (what a create starts from).
    pub(super) fn empty_object(&self) -> Value {
        let n = self.kind.names();
        json!({ "apiVersion": n.api_version(), "kind": n.kind })
    }

    /// Records the update `old` → `next` in next's managedFields. `sent` are the
    /// managedFields the client sent: used as they are when valid and not empty
    /// (clients may rewrite them), else the stored ones are kept, so clients
    /// that do not know the field cannot drop it. As kube does, a failure to
    /// track leaves the object without managedFields rather than failing the write.
    pub(super) fn track_update(
        &self,
        part: Part,
        manager: &str,
        old: &Value,
        next: &mut Value,
        sent: Option<&Value>,
    ) -> ApiResult<()> {
        // A single empty entry is kube's way to clear managedFields.
        let clears = sent
            .and_then(Value::as_array)
            .is_some_and(|list| matches!(list.as_slice(), [Value::Object(only)] if only.is_empty()));
        if clears && part == Part::Main {
            return set_managed_fields(next, None);
        }
        let base = match ManagedFields::decode(sent) {
            Ok(m) if !m.is_empty() && part == Part::Main => m,
            _ => ManagedFields::decode(old.pointer("/metadata/managedFields")).unwrap_or_default(),
        };
        let mut old_plain = old.clone();
        if let Some(m) = old_plain.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
        let mut tracked = self.field_manager(part, manager)?.update(&old_plain, next, base);
        if let (Ok(managed), Part::Scale) = (&mut tracked, part) {
            self.release_zero_replicas(managed, next);
        }
        set_managed_fields(next, tracked.ok().as_ref())
    }

    /// Records in `obj`'s managedFields what the request changes from `old`
    /// (an empty object for a create), as decided by `fields`. As in
    /// kube-apiserver's handlers this comes before mutating admission and
    /// the kind's strategy: what a webhook or policy changes afterwards is
    /// nobody's, and the strategy's resets are the field manager's to
    /// leave out ([`managed_fields::reset_fields`]).
    pub(super) fn record_fields(&self, part: Part, old: &Value, obj: &mut Value, fields: Fields<'_>) -> ApiResult<()> {
        match fields {
            Fields::Update(manager) => {
                let sent = meta_mut(obj)?.remove("managedFields");
                self.track_update(part, manager, old, obj, sent.as_ref())
            }
            Fields::Applied(managed) => set_managed_fields(obj, Some(&managed)),
        }
    }

    /// Server-side apply (a PATCH in `application/apply-patch+yaml`, YAML
    /// already turned into JSON): merges the configuration into the object, which is
    /// created if it does not exist (201), and records the applier as the
    /// owner of exactly the fields it applied; 409 on conflicts unless forced.
    #[allow(clippy::too_many_arguments)]
    pub async fn apply(
        &self,
        ns: &str,
        name: &str,
        part: Part,
        raw: &[u8],
        body: &JsonBody<'_>,
        wopts: &WriteOptions,
        user: Requester<'_>,
    ) -> ApiResult<WriteOutcome> {
        let mut warnings = Vec::new();
        // One parse for both pre-checks; an unparseable body is left to the
        // decoder, which words the error as kube does.
        if let Ok(config) = serde_json::from_slice::<Value>(&body.json) {
            self.check_applied_kind(&config)?;
            self.check_applied_fields(name, &config)?;
        }
        let work = self.write_work(raw.len());
        let mut config = heavy::run_async(work, async { self.decode_object(raw, body, wopts, &mut warnings) }).await?;
        if config.pointer("/metadata/managedFields").is_some_and(|v| !v.is_null()) {
            return Err(ApiError::bad_request("metadata.managedFields must be nil"));
        }
        self.settle_identity(&mut config, ns, name)?;
        let requested_rv = meta_str(&config, "resourceVersion").unwrap_or("").to_string();
        for _ in 0..WRITE_RETRIES {
            let exists = self.store.get(&self.key(ns, name)).map_err(|e| self.store_error(name, e))?.is_some();
            if !exists {
                if part == Part::Status {
                    return Err(ApiError::not_found(self.target(name)));
                }
                let (created, managed) = heavy::run_async(work, async {
                    let fm = self.field_manager(part, &wopts.manager)?;
                    fm.apply(&self.empty_object(), &config, ManagedFields::default(), wopts.force)
                        .map_err(|e| self.apply_error(e))
                })
                .await?;
                match self.insert(ns, created, wopts, warnings.clone(), Some(managed), user, work).await {
                    Err(e) if e.code == 409 && e.reason == Reason::AlreadyExists => continue,
                    other => return other,
                }
            }
            let result = self
                .write_current(ns, name, part, wopts, user, false, raw.len(), |current| {
                    if !requested_rv.is_empty() && requested_rv != current.rv.to_string() {
                        return Err(ApiError::conflict(self.target(name), StoreError::Conflict));
                    }
                    let mut live = current.value().map_err(|e| self.store_error(name, e))?;
                    let managed =
                        live.get_mut("metadata").and_then(Value::as_object_mut).and_then(|m| m.remove("managedFields"));
                    let managed = ManagedFields::decode(managed.as_ref()).unwrap_or_default();
                    let fm = self.field_manager(part, &wopts.manager)?;
                    let (merged, managed) =
                        fm.apply(&live, &config, managed, wopts.force).map_err(|e| self.apply_error(e))?;
                    Ok((merged, Fields::Applied(managed)))
                })
                .await;
            match result {
                // Deleted since it was looked up: create it.
                Err(e) if e.code == 404 && e.reason == Reason::NotFound => continue,
                Err(e) => return Err(e),
                Ok(mut out) => {
                    out.warnings.splice(0..0, warnings);
                    return Ok(out);
                }
            }
        }
        Err(ApiError::conflict(self.target(name), StoreError::Conflict))
    }

    /// An applied configuration of another kind or version, or one that does
    /// not say which (`{"k": "v"}`: `invalid object type: /, Kind=`), is
    /// kube's 400 (before any other check of the body).
    fn check_applied_kind(&self, config: &Value) -> ApiResult<()> {
        let Value::Object(config) = config else {
            return Ok(());
        };
        let text = |k: &str| config.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let (api_version, kind) = (text("apiVersion"), text("kind"));
        let n = self.kind.names();
        if api_version == n.api_version() && kind == n.kind {
            return Ok(());
        }
        let group_version = if api_version.contains('/') { api_version } else { format!("/{api_version}") };
        Err(ApiError::bad_request(format!("invalid object type: {group_version}, Kind={kind}")))
    }

    /// A configuration with fields the schema does not declare cannot be
    /// applied: it is never pruned, whatever fieldValidation says. kube answers
    /// a 500 without a reason, naming each field.
    fn check_applied_fields(&self, name: &str, config: &Value) -> ApiResult<()> {
        let undeclared = typed::undeclared_fields(config, &self.shape);
        if undeclared.is_empty() {
            return Ok(());
        }
        let errors = match undeclared.as_slice() {
            [one] => one.clone(),
            many => format!("errors:\n  {}", many.join("\n  ")),
        };
        let n = self.kind.names();
        let ns = meta_str(config, "namespace").unwrap_or("");
        let name = meta_str(config, "name").unwrap_or(name);
        Err(ApiError::new(
            500,
            Reason::Unknown,
            format!(
                "failed to create typed patch object ({ns}/{name}; {}, Kind={}): {errors}",
                n.api_version(),
                n.kind
            ),
        ))
    }

    fn apply_error(&self, e: ApplyError) -> ApiError {
        match e {
            ApplyError::Conflicts(c) => apply_conflict(&c),
            ApplyError::Invalid(why) => ApiError::bad_request(format!("failed to apply the configuration: {why}")),
        }
    }
}

/// How a write's managedFields are decided.
pub(super) enum Fields<'a> {
    /// An update by this manager: tracked from what it changed.
    Update(&'a str),
    /// Already decided by an apply.
    Applied(ManagedFields),
}

/// kube's warning when mutating admission left managedFields it cannot
/// decode (k8s.io/apiserver's
/// `InvalidManagedFieldsAfterMutatingAdmissionWarningFormat`).
const INVALID_MANAGED_FIELDS_AFTER_ADMISSION: &str = ".metadata.managedFields was in an invalid state after admission; this could be caused by an outdated mutating admission controller; please fix your requests";

/// Puts back the managedFields `obj` had before mutating admission when
/// the plugins left ones that do not decode, with kube's warning (its
/// managedFieldsValidatingAdmissionController): valid ones are kept as
/// the plugins left them.
pub(super) fn keep_managed_fields_valid(
    before: Option<Value>,
    obj: &mut Value,
    warnings: &mut Vec<String>,
) -> ApiResult<()> {
    let Err(why) = ManagedFields::decode(obj.pointer("/metadata/managedFields")) else {
        return Ok(());
    };
    let meta = meta_mut(obj)?;
    match before {
        Some(before) => meta.insert("managedFields".into(), before),
        None => meta.remove("managedFields"),
    };
    warnings.push(format!("{INVALID_MANAGED_FIELDS_AFTER_ADMISSION}: {why}"));
    Ok(())
}

/// Puts the managed fields into the object (none: the field is left out).
pub(super) fn set_managed_fields(obj: &mut Value, managed: Option<&ManagedFields>) -> ApiResult<()> {
    let meta = meta_mut(obj)?;
    match managed.filter(|m| !m.is_empty()) {
        Some(m) => meta.insert("managedFields".into(), m.encode()),
        None => meta.remove("managedFields"),
    };
    Ok(())
}

/// kube's 409 for apply conflicts: one FieldManagerConflict cause per field.
fn apply_conflict(conflicts: &[managed_fields::Conflict]) -> ApiError {
    let causes = conflicts
        .iter()
        .map(|c| errors::cause("FieldManagerConflict", format!("conflict with {}", c.manager), &c.path.to_string()))
        .collect();
    ApiError::new(409, Reason::Conflict, conflicts_message(conflicts))
        .with_details(StatusDetails { causes: Some(causes), ..Default::default() })
}
