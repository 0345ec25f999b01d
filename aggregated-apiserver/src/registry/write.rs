//! The registry's writes: create, update and patch, from the decoded body
//! through the kind's strategy, managed fields and validation to the store's
//! compare-and-swap (apply is [`super::apply`], delete [`super::delete`]).

use serde_json::{json, Value};

use super::apply::{keep_managed_fields_valid, Fields};
use super::strategy::{self, finalizers, meta_mut};
use crate::admission::attributes::write_options_object;
use crate::admission::Requester;
use crate::apimachinery::errors::{ApiError, ApiResult};
use crate::apimachinery::field_error::FieldError;
use crate::apimachinery::managed_fields::ManagedFields;
use crate::apimachinery::options::{FieldValidation, WriteOptions};
use crate::apimachinery::schema::prune::prune_unknown_fields;
use crate::apimachinery::serializer::{BodyFormat, JsonBody};
use crate::apimachinery::{gojson, objectmeta};
use crate::heavy;
use crate::storage::{Mutation, StoreError, StoredObject, Updated};
use bytes::Bytes;

use super::{encode_value, meta_str, Decision, Part, Registry, WriteOutcome};
use crate::admission::{Admission, Operation};

/// How often a write racing other writers is retried before giving up with 409.
pub(super) const WRITE_RETRIES: usize = 8;

/// A create, update or patch body as kube decodes a custom resource's: its
/// metadata goes through the typed ObjectMeta, which leaves out what Go
/// omits when empty or null (`labels: {}`), before anything records who set
/// what. Not an applied configuration: what it names, even empty, its
/// applier owns.
fn as_written(mut obj: Value) -> Value {
    strategy::drop_empty_meta_fields(&mut obj);
    obj
}

/// kube-apiserver's generateName suffix: 5 characters from a consonant/digit alphabet.
pub(super) fn generate_suffix() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect()
}

impl Registry {
    /// Decodes a request body as an object of this kind, applying fieldValidation
    /// (kube-apiserver's order: syntax, apiVersion/kind, metadata types, pruning).
    /// `raw` is the body as sent, which messages quote; `body` its JSON.
    pub(super) fn decode_object(
        &self,
        raw: &[u8],
        body: &JsonBody<'_>,
        wopts: &WriteOptions,
        warnings: &mut Vec<String>,
    ) -> ApiResult<Value> {
        let n = self.kind.names();
        let wrap = |e: &str| ApiError::bad_request(gojson::decode_error_message(e, raw, n.kind, n.version));
        if body.format == BodyFormat::Yaml && *body.json == *b"null" {
            // An empty YAML stream or a null document: kube quotes the body as sent.
            let why = format!("Object 'Kind' is missing in '{}'", String::from_utf8_lossy(raw));
            return Err(ApiError::bad_request(gojson::unrecognized_object_message(&why, raw, n.kind)));
        }
        let (mut obj, duplicates) = gojson::decode_json(&body.json).map_err(|e| wrap(&e))?;
        self.check_type(&obj, raw)?;
        if let Some(meta) = obj.get("metadata") {
            objectmeta::check_object_meta_types(meta).map_err(|e| wrap(&e))?;
        }
        let unknown = prune_unknown_fields(&mut obj, &self.schema);
        match wopts.field_validation {
            FieldValidation::Ignore => {}
            FieldValidation::Warn => {
                // go-yaml's duplicate keys first, one warning each, as kube sends them.
                warnings.extend(body.yaml_duplicates.iter().cloned());
                warnings.extend(gojson::strict_warnings(&duplicates, &unknown));
            }
            FieldValidation::Strict => {
                let mut findings = Vec::new();
                if !body.yaml_duplicates.is_empty() {
                    // go-yaml's TypeError text: `yaml: unmarshal errors:\n  line 5: key "a" already set in map`.
                    findings.push(format!("yaml: unmarshal errors:\n  {}", body.yaml_duplicates.join("\n  ")));
                }
                findings.extend(gojson::strict_warnings(&duplicates, &unknown));
                if !findings.is_empty() {
                    return Err(wrap(&format!("strict decoding error: {}", findings.join(", "))));
                }
            }
        }
        Ok(obj)
    }

    /// The body must be an object of this group-version with a kind; a wrong
    /// kind is a 422 like apiextensions' ValidateTypeMeta.
    pub(super) fn check_type(&self, obj: &Value, body: &[u8]) -> ApiResult<()> {
        let names = self.kind.names();
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind.is_empty() {
            let shown = String::from_utf8_lossy(body);
            return Err(ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): Object 'Kind' is missing in '{}' ({})",
                names.kind,
                shown.trim(),
                gojson::summarize_data(body, 30)
            )));
        }
        let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        if api_version != names.api_version() {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                names.api_version()
            )));
        }
        let errs = objectmeta::validate_type_meta(obj, &names.api_version(), names.kind);
        if !errs.is_empty() {
            // kube names the kind the body claims (`Alpaca.<group> "x" is invalid`).
            let name = meta_str(obj, "name").unwrap_or("");
            return Err(ApiError::invalid(names.group, kind, name, &errs));
        }
        Ok(())
    }

    /// Puts the URL's namespace and name into an object written to that URL
    /// (update, apply), refusing different ones.
    pub(super) fn settle_identity(&self, obj: &mut Value, ns: &str, name: &str) -> ApiResult<()> {
        if obj.get("metadata").is_none() {
            obj["metadata"] = json!({});
        }
        self.settle_namespace(obj, ns)?;
        match meta_str(obj, "name") {
            Some(n) if n == name => Ok(()),
            None | Some("") => {
                meta_mut(obj)?.insert("name".into(), json!(name));
                Ok(())
            }
            Some(n) => Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            ))),
        }
    }

    /// Puts the URL's namespace into the object, refusing a different one.
    pub(super) fn settle_namespace(&self, obj: &mut Value, ns: &str) -> ApiResult<()> {
        if !self.kind.namespaced() {
            return Ok(());
        }
        let meta = meta_mut(obj)?;
        match meta.get("namespace").and_then(Value::as_str) {
            None | Some("") => {
                meta.insert("namespace".into(), json!(ns));
                Ok(())
            }
            Some(body_ns) if body_ns == ns => Ok(()),
            Some(_) => Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            )),
        }
    }

    /// POST: `raw` is the body as sent, `body` the JSON it converts to.
    pub async fn create(
        &self,
        ns: &str,
        raw: &[u8],
        body: &JsonBody<'_>,
        wopts: &WriteOptions,
        user: Requester<'_>,
    ) -> ApiResult<WriteOutcome> {
        let mut warnings = Vec::new();
        let work = self.write_work(raw.len());
        // An empty body fails decoding like any other undecodable one, as in kube.
        let obj = heavy::run_async(work, async { self.decode_object(raw, body, wopts, &mut warnings).map(as_written) })
            .await?;
        self.insert(ns, obj, wopts, warnings, None, user, work).await
    }

    /// What a mutating admission plugin may not change, put back as kube's
    /// create and update checks find it: the namespace stays the request's,
    /// and fields the schema does not declare are pruned.
    fn settle_mutated(&self, obj: &mut Value, ns: &str) -> ApiResult<()> {
        if !obj.is_object() {
            return Err(ApiError::internal_error("admission returned an object that is not a JSON object"));
        }
        if obj.get("metadata").is_none() {
            obj["metadata"] = json!({});
        }
        self.settle_namespace(obj, ns)?;
        prune_unknown_fields(obj, &self.schema);
        Ok(())
    }

    /// Creates a decoded object: kube's create rules, managed fields tracked
    /// as an update by the writer unless an apply decided them. `work` is
    /// what its computing steps are taken to cost ([`heavy`]): each takes a
    /// turn of its own when large, and no turn is held while admission
    /// plugins answer (the handler of a write without them holds one turn
    /// for all of it, in which these run in place).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn insert(
        &self,
        ns: &str,
        mut obj: Value,
        wopts: &WriteOptions,
        mut warnings: Vec<String>,
        applied: Option<ManagedFields>,
        user: Requester<'_>,
        work: usize,
    ) -> ApiResult<WriteOutcome> {
        if obj.get("metadata").is_none() {
            obj["metadata"] = json!({});
        }
        self.settle_namespace(&mut obj, ns)?;
        let admission = self.admission_for(Operation::Create, Part::Main, ns);
        if let (Some(admission), true) = (&self.namespace_admission, self.kind.namespaced()) {
            // kube names the object by its generateName while it has no name.
            let shown = meta_str(&obj, "name")
                .filter(|n| !n.is_empty())
                .or_else(|| meta_str(&obj, "generateName"))
                .unwrap_or("");
            admission.admit_create(ns, self.target(shown)).await?;
        }
        if meta_str(&obj, "resourceVersion").is_some_and(|rv| !rv.is_empty()) {
            return Err(ApiError::bad_request("resourceVersion should not be set on objects to be created"));
        }
        let managed_fields_droppable = applied.is_none();
        let fields = match applied {
            Some(managed) => Fields::Applied(managed),
            None => Fields::Update(&wopts.manager),
        };
        heavy::run_async(work, async { self.record_fields(Part::Main, &self.empty_object(), &mut obj, fields) })
            .await?;
        let options = admission.map(|_| write_options_object(Operation::Create, wopts));
        let mut before_admission = None;
        if let (Some(admission), Some(options)) = (admission, &options) {
            // Mutating admission sees the object before the strategy gives it
            // its system fields (no uid, no name yet for a generateName),
            // with the request's own changes recorded in its managedFields.
            before_admission = Some(obj.pointer("/metadata/managedFields").cloned());
            let name = meta_str(&obj, "name").unwrap_or("").to_string();
            let mut attributes = self.attributes(
                Operation::Create,
                Part::Main,
                ns,
                &name,
                Some(obj),
                None,
                options.clone(),
                wopts.dry_run,
                user,
            );
            admission.mutate(&mut attributes).await.map_err(|e| e.with_warnings(warnings.clone()))?;
            warnings.append(&mut attributes.warnings);
            obj = attributes.object.take().unwrap_or(Value::Null);
        }
        heavy::run_async(work, async {
            if let Some(before) = before_admission {
                self.settle_mutated(&mut obj, ns)?;
                keep_managed_fields_valid(before, &mut obj, &mut warnings)?;
            }
            strategy::prepare_for_create(self.kind.as_ref(), &mut obj)
        })
        .await?;
        let generate = meta_str(&obj, "name").is_none_or(str::is_empty)
            && meta_str(&obj, "generateName").is_some_and(|g| !g.is_empty());
        for attempt in 0.. {
            if generate {
                let prefix = meta_str(&obj, "generateName").unwrap_or("").to_string();
                meta_mut(&mut obj)?.insert("name".into(), json!(format!("{prefix}{}", generate_suffix())));
            }
            let (obj, more_warnings) = heavy::run_async(work, async {
                let plain = obj.clone();
                let mut more_warnings = self.validate(Part::Main, &plain, None)?;
                more_warnings.extend(strategy::warnings(&plain, None));
                Ok::<_, ApiError>((plain, more_warnings))
            })
            .await?;
            if attempt == 0 {
                warnings.extend(more_warnings);
            }
            let name = meta_str(&obj, "name").unwrap_or("").to_string();
            let obj = match (admission, &options) {
                (Some(admission), Some(options)) => {
                    // Lent to the validating plugins (who may not change it) and taken back.
                    let mut attributes = self.attributes(
                        Operation::Create,
                        Part::Main,
                        ns,
                        &name,
                        Some(obj),
                        None,
                        options.clone(),
                        wopts.dry_run,
                        user,
                    );
                    admission.validate(&mut attributes).await.map_err(|e| e.with_warnings(warnings.clone()))?;
                    if attempt == 0 {
                        warnings.append(&mut attributes.warnings);
                    }
                    attributes.object.take().unwrap_or(Value::Null)
                }
                _ => obj,
            };
            let stored = heavy::run_async(work, async {
                // A write computed past its request's deadline is not made:
                // its client has its 504 (crate::heavy).
                heavy::check_deadline()?;
                Ok::<_, ApiError>(self.store_new(ns, &name, obj, wopts.dry_run, managed_fields_droppable).await)
            })
            .await?;
            match stored {
                Ok(body) => return Ok(WriteOutcome { code: 201, body, warnings }),
                Err(StoreError::AlreadyExists) if generate && !wopts.dry_run && attempt < WRITE_RETRIES => continue,
                Err(e) => return Err(self.store_error(&name, e)),
            }
        }
        Err(ApiError::internal("unreachable: create loop ended"))
    }

    /// Stores a new object (nothing with `dry_run`), answering the body to
    /// send. `managed_fields_droppable`: an object too large to store is
    /// stored without its managedFields, as kube-apiserver's create handler
    /// does (they can be most of an object); not for an apply, whose
    /// managedFields are what it decided.
    async fn store_new(
        &self,
        ns: &str,
        name: &str,
        obj: Value,
        dry_run: bool,
        managed_fields_droppable: bool,
    ) -> Result<Bytes, StoreError> {
        let key = self.key(ns, name);
        if dry_run {
            if self.store.get(&key)?.is_some() {
                return Err(StoreError::AlreadyExists);
            }
            return serde_json::to_vec(&obj).map(Bytes::from).map_err(|e| StoreError::Internal(e.to_string()));
        }
        let mut created = self.store.create(&key, obj.clone()).await;
        if matches!(created, Err(StoreError::ObjectTooLarge)) && managed_fields_droppable {
            let mut bare = obj;
            if let Some(meta) = bare.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("managedFields");
            }
            created = self.store.create(&key, bare).await;
        }
        created.map(|stored| stored.bytes.clone())
    }

    /// PUT: a whole object with the resourceVersion it was read at.
    #[allow(clippy::too_many_arguments)]
    pub async fn update(
        &self,
        ns: &str,
        name: &str,
        part: Part,
        raw: &[u8],
        body: &JsonBody<'_>,
        wopts: &WriteOptions,
        user: Requester<'_>,
    ) -> ApiResult<WriteOutcome> {
        if part == Part::Scale {
            return self.update_scale(ns, name, body, wopts, user).await;
        }
        let mut warnings = Vec::new();
        let work = self.write_work(raw.len());
        let mut obj =
            heavy::run_async(work, async { self.decode_object(raw, body, wopts, &mut warnings).map(as_written) })
                .await?;
        self.settle_identity(&mut obj, ns, name)?;
        let requested_rv = meta_str(&obj, "resourceVersion").unwrap_or("").to_string();
        // A uid in the body is a precondition, checked before anything else
        // about the stored object (kube's storage preconditions).
        let requested_uid = meta_str(&obj, "uid").unwrap_or("").to_string();
        let mut out = self
            .write_current(ns, name, part, wopts, user, true, raw.len(), |current| {
                if !requested_uid.is_empty() && *requested_uid != *current.index.uid {
                    return Err(self.failed_precondition(
                        ns,
                        name,
                        &format!(
                            "Precondition failed: UID in precondition: {requested_uid}, UID in object meta: {}",
                            current.index.uid
                        ),
                    ));
                }
                if requested_rv.is_empty() {
                    // kube's generic store names the resource where the kind
                    // belongs here (`widgets.<group> "x" is invalid`).
                    let n = self.kind.names();
                    return Err(ApiError::invalid(
                        n.group,
                        n.plural,
                        name,
                        &[FieldError::invalid_raw("metadata.resourceVersion", "0", "must be specified for an update")],
                    ));
                }
                if requested_rv != current.rv.to_string() {
                    return Err(ApiError::conflict(self.target(name), StoreError::Conflict));
                }
                Ok((obj.clone(), Fields::Update(&wopts.manager)))
            })
            .await
            .map_err(|e| e.with_warnings(warnings.clone()))?;
        out.warnings.splice(0..0, warnings);
        Ok(out)
    }

    /// PATCH: applies the patch to the current object and writes the result;
    /// the store retries it on the newer state when another writer got there
    /// first (a patch that pins a resourceVersion then fails with 409).
    ///
    /// `body_bytes` is the size of the patch as sent.
    #[allow(clippy::too_many_arguments)]
    pub async fn patch(
        &self,
        ns: &str,
        name: &str,
        part: Part,
        patch: &crate::apimachinery::patch::Patch,
        body_bytes: usize,
        wopts: &WriteOptions,
        user: Requester<'_>,
    ) -> ApiResult<WriteOutcome> {
        if part == Part::Scale {
            return self.patch_scale(ns, name, patch, body_bytes, wopts, user).await;
        }
        let mut warnings = Vec::new();
        let input_bytes = body_bytes + patch.growth_bytes();
        let mut out = self
            .write_current(ns, name, part, wopts, user, true, input_bytes, |current| {
                warnings.clear();
                let patched = patch.apply(current.value().map_err(|e| self.store_error(name, e))?)?;
                let patched_bytes = serde_json::to_vec(&patched).map_err(ApiError::internal_error)?;
                // Under Strict, unknown or duplicate fields of the patched
                // object are kube's 422 on the field "patch", showing the
                // patched object, not a decoding 400.
                let strict = wopts.field_validation == FieldValidation::Strict;
                let lenient = WriteOptions { field_validation: FieldValidation::Warn, ..wopts.clone() };
                let mut strict_findings = Vec::new();
                let mut obj = if strict {
                    self.decode_object(&patched_bytes, &JsonBody::json(&patched_bytes), &lenient, &mut strict_findings)
                        .map(as_written)?
                } else {
                    self.decode_object(&patched_bytes, &JsonBody::json(&patched_bytes), wopts, &mut warnings)
                        .map(as_written)?
                };
                if !strict_findings.is_empty() {
                    let shown = Value::String(String::from_utf8_lossy(&patched_bytes).into_owned());
                    return Err(ApiError::invalid(
                        "",
                        "",
                        "",
                        &[FieldError::invalid(
                            "patch",
                            &shown,
                            format!("strict decoding error: {}", strict_findings.join(", ")),
                        )],
                    ));
                }
                if let Some(dups) = patch.duplicates() {
                    match wopts.field_validation {
                        FieldValidation::Ignore => {}
                        FieldValidation::Warn => warnings.extend(gojson::strict_warnings(dups, &[])),
                        FieldValidation::Strict => {
                            if let Some(e) = gojson::strict_decoding_error(dups, &[]) {
                                return Err(ApiError::bad_request(e));
                            }
                        }
                    }
                }
                self.settle_namespace(&mut obj, ns)?;
                if meta_str(&obj, "resourceVersion").is_some_and(|rv| rv != current.rv.to_string()) {
                    return Err(ApiError::conflict(self.target(name), StoreError::Conflict));
                }
                if meta_str(&obj, "name") != Some(name) {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({}) does not match the name on the URL ({name})",
                        meta_str(&obj, "name").unwrap_or("")
                    )));
                }
                Ok((obj, Fields::Update(&wopts.manager)))
            })
            .await
            .map_err(|e| e.with_warnings(warnings.clone()))?;
        out.warnings.splice(0..0, warnings);
        Ok(out)
    }

    /// Writes what `propose` makes of the current object (the object the
    /// request asks for, and how its managed fields are decided) through the
    /// shared rules of [`Self::prepare_update`], inside the store's
    /// read-mutate-compare-and-swap loop (nothing with dry run: the would-be
    /// result is answered instead).
    ///
    /// When an admission plugin may act on the update, the proposal is
    /// admitted between reading and writing: mutating plugins before the
    /// strategy, validating ones on the result. Their calls wait on the
    /// network, so the proposal is written only if the object is still the
    /// one it was made from, and made again from the newer object otherwise.
    ///
    /// An object too large to store is written again without its
    /// managedFields when `managed_fields_droppable` (updates and patches, not
    /// applies), as kube-apiserver's handlers do: they can be most of it.
    ///
    /// `propose` works on the stored object plus `input_bytes`: the
    /// request's body and what it may add beyond it (a JSON patch's copies).
    /// When that is large the write's computing steps run off the async
    /// workers, in turn (see [`heavy`]): the whole write as one when no
    /// admission plugin may act on it; else each step on its own, so that
    /// no turn is held while a webhook answers.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn write_current<'f>(
        &self,
        ns: &str,
        name: &str,
        part: Part,
        wopts: &'f WriteOptions,
        user: Requester<'_>,
        managed_fields_droppable: bool,
        input_bytes: usize,
        mut propose: impl FnMut(&StoredObject) -> ApiResult<(Value, Fields<'f>)> + Send,
    ) -> ApiResult<WriteOutcome> {
        let key = self.key(ns, name);
        let work_bytes = self.write_work(self.store.cached_size(&key).unwrap_or(0) + input_bytes);
        let admission = self.admission_for(Operation::Update, part, ns);
        let write = async {
            let mut drop_managed_fields = false;
            let mut attempts = 0;
            loop {
                let mut warnings = Vec::new();
                let mut refused = None;
                let mut decided = None;
                let mut stale = false;
                let written = match admission {
                    None => {
                        self.store
                            .guaranteed_update(&key, &mut |current| {
                                warnings.clear();
                                let decision = propose(current).and_then(|(mut obj, fields)| {
                                    let old = current.value().map_err(|e| self.store_error(name, e))?;
                                    self.record_fields(part, &old, &mut obj, fields)?;
                                    self.prepare_update(part, current, &old, obj, &mut warnings)
                                });
                                self.mutation(decision, wopts.dry_run, drop_managed_fields, &mut refused, &mut decided)
                            })
                            .await
                    }
                    Some(admission) => {
                        let current = self.stored(&key, name).await?;
                        let decision = self
                            .admitted_update(admission, ns, name, part, wopts, user, &current, work_bytes, &mut propose)
                            .await?;
                        warnings = decision.1;
                        let decision = Ok(decision.0);
                        heavy::run_async(work_bytes, async {
                            let mutation =
                                self.mutation(decision, wopts.dry_run, drop_managed_fields, &mut refused, &mut decided);
                            let mut mutation = Some(mutation);
                            self.store
                                .guaranteed_update(&key, &mut |now| {
                                    if now.rv != current.rv {
                                        stale = true;
                                        return Mutation::Abort;
                                    }
                                    mutation.take().unwrap_or(Mutation::Abort)
                                })
                                .await
                        })
                        .await
                    }
                };
                let updated = match written {
                    Err(StoreError::ObjectTooLarge) if managed_fields_droppable && !drop_managed_fields => {
                        drop_managed_fields = true;
                        continue;
                    }
                    other => other.map_err(|e| self.store_error(name, e))?,
                };
                let body = match updated {
                    // The write that removed the last finalizer answers with the
                    // object as written (finalizers gone), not as it was stored.
                    Updated::Deleted(stored) => match decided {
                        Some(Decision::Delete(next)) => encode_value(&next)?,
                        _ => stored.bytes.clone(),
                    },
                    Updated::Put(stored) | Updated::Kept(stored) => stored.bytes.clone(),
                    Updated::Aborted if stale => {
                        attempts += 1;
                        if attempts >= WRITE_RETRIES * 4 {
                            return Err(ApiError::conflict(self.target(name), StoreError::Conflict));
                        }
                        continue;
                    }
                    Updated::Aborted => match (refused, decided) {
                        (Some(e), _) => return Err(e),
                        (None, Some(Decision::Write(next) | Decision::Delete(next))) => encode_value(&next)?,
                        _ => return Err(ApiError::internal("the store refused a write without a reason")),
                    },
                };
                return Ok(WriteOutcome { code: 200, body, warnings });
            }
        };
        // Without admission the whole write is one computation; with it, only
        // its computing steps take turns ([`Self::admitted_update`]): a turn
        // held while a webhook answers would stall every large write.
        match admission {
            None => heavy::run_async(work_bytes, write).await,
            Some(_) => write.await,
        }
    }

    /// What the store is asked to do with a decision: refusals and dry runs
    /// abort (keeping the refusal, or the would-be object), a deletion keeps
    /// the object it answers with.
    fn mutation(
        &self,
        decision: ApiResult<Decision>,
        dry_run: bool,
        drop_managed_fields: bool,
        refused: &mut Option<ApiError>,
        decided: &mut Option<Decision>,
    ) -> Mutation {
        // A write computed past its request's deadline is not made: its
        // client has its 504 (crate::heavy).
        let decision = decision.and_then(|d| crate::heavy::check_deadline().map(|()| d).map_err(ApiError::from));
        match decision {
            Err(e) => {
                *refused = Some(e);
                Mutation::Abort
            }
            Ok(Decision::Unchanged) => Mutation::Keep,
            Ok(decision) if dry_run => {
                *decided = Some(decision);
                Mutation::Abort
            }
            Ok(Decision::Write(mut next)) => {
                if drop_managed_fields {
                    if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.remove("managedFields");
                    }
                }
                Mutation::Put(next)
            }
            Ok(Decision::Delete(next)) => {
                *decided = Some(Decision::Delete(next));
                Mutation::Delete
            }
        }
    }

    /// An update through admission: the proposal made from `current`,
    /// mutated, decided by the shared rules, then validated. The decision
    /// and the warnings gathered on the way.
    #[allow(clippy::too_many_arguments)]
    async fn admitted_update<'f>(
        &self,
        admission: &Admission,
        ns: &str,
        name: &str,
        part: Part,
        wopts: &WriteOptions,
        user: Requester<'_>,
        current: &StoredObject,
        work_bytes: usize,
        propose: &mut (impl FnMut(&StoredObject) -> ApiResult<(Value, Fields<'f>)> + Send),
    ) -> ApiResult<(Decision, Vec<String>)> {
        // Who changed what is recorded before mutating admission, as kube's
        // update and patch handlers do: the plugins' changes are nobody's.
        let (proposed, old) = heavy::run_async(work_bytes, async {
            let (mut proposed, fields) = propose(current)?;
            let old = current.value().map_err(|e| self.store_error(name, e))?;
            self.record_fields(part, &old, &mut proposed, fields)?;
            Ok::<_, ApiError>((proposed, old))
        })
        .await?;
        let before_admission = proposed.pointer("/metadata/managedFields").cloned();
        let options = write_options_object(Operation::Update, wopts);
        // A write to /scale shows admission Scales: the object is kept
        // aside, and takes the replicas a mutating plugin leaves.
        let (shown, aside, old_scale) = match part {
            Part::Scale => {
                (self.scale_for_admission(&proposed)?, Some(proposed), Some(self.scale_for_admission(&old)?))
            }
            _ => (proposed, None, None),
        };
        let mut attributes = self.attributes(
            Operation::Update,
            part,
            ns,
            name,
            Some(shown),
            Some(old_scale.as_ref().unwrap_or(&old)),
            options,
            wopts.dry_run,
            user,
        );
        admission.mutate(&mut attributes).await?;
        let mut mutated = attributes.object.take().unwrap_or(Value::Null);
        if let Some(mut obj) = aside {
            self.take_admitted_scale(mutated, &mut obj)?;
            mutated = obj;
        }
        let mut warnings = std::mem::take(&mut attributes.warnings);
        // Validation sees what would be stored (the stored object itself
        // for a write that changes nothing, which kube validates too), lent
        // to the validating plugins and taken back.
        let (next, rebuild) = heavy::run_async(work_bytes, async {
            self.settle_mutated(&mut mutated, ns)?;
            keep_managed_fields_valid(before_admission, &mut mutated, &mut warnings)?;
            let decision = self.prepare_update(part, current, &old, mutated, &mut warnings)?;
            let lent: (Value, fn(Value) -> Decision) = match decision {
                Decision::Unchanged => (old.clone(), |_| Decision::Unchanged),
                Decision::Write(next) => (next, Decision::Write),
                Decision::Delete(next) => (next, Decision::Delete),
            };
            Ok::<_, ApiError>(lent)
        })
        .await?;
        // A write to /scale lends its Scale and keeps the object.
        let kept = match part {
            Part::Scale => {
                attributes.object = Some(self.scale_for_admission(&next)?);
                Some(next)
            }
            _ => {
                attributes.object = Some(next);
                None
            }
        };
        admission.validate(&mut attributes).await.map_err(|e| e.with_warnings(warnings.clone()))?;
        warnings.append(&mut attributes.warnings);
        let decision = rebuild(kept.unwrap_or_else(|| attributes.object.take().unwrap_or(Value::Null)));
        Ok((decision, warnings))
    }

    /// The shared rules of update, patch and apply for the object as it is
    /// now (`current`, decoded as `old`): the kind's strategy
    /// ([`strategy::prepare_for_update`]), validation, no-op detection, and
    /// finalizer completion. `new` carries the managedFields already
    /// recorded for the request ([`Self::record_fields`]), which the
    /// strategy does not change.
    pub(super) fn prepare_update(
        &self,
        part: Part,
        current: &StoredObject,
        old: &Value,
        mut new: Value,
        warnings: &mut Vec<String>,
    ) -> ApiResult<Decision> {
        // Taken out and put back: the strategy of /status keeps the stored
        // metadata, and neither drops what the request recorded.
        let managed_fields =
            new.get_mut("metadata").and_then(Value::as_object_mut).and_then(|m| m.remove("managedFields"));
        let mut next = strategy::prepare_for_update(self.kind.as_ref(), part, old, new, current.rv)?;
        if let Some(managed_fields) = managed_fields {
            meta_mut(&mut next)?.insert("managedFields".into(), managed_fields);
        }
        let deleting = old.pointer("/metadata/deletionTimestamp").is_some();
        warnings.extend(self.validate(part, &next, Some(old))?);
        if part == Part::Main {
            warnings.extend(strategy::warnings(&next, Some(old)));
        }
        if next == *old {
            return Ok(Decision::Unchanged);
        }
        if deleting && finalizers(&next).is_empty() {
            // The last finalizer is gone: the object is deleted now.
            return Ok(Decision::Delete(next));
        }
        Ok(Decision::Write(next))
    }
}
