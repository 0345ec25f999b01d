//! Deleting: one object (preconditions, propagation finalizers, graceful
//! deletion while finalizers remain, dry run) and collections.

use crate::admission::attributes::delete_options_object;
use crate::admission::Requester;
use crate::apimachinery::errors::StatusDetails;
use crate::apimachinery::resource::Names;
use bytes::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use serde_json::{json, Value};

use super::strategy::{finalizers, meta_mut, now_rfc3339};
use super::write::WRITE_RETRIES;
use super::{encode_value, DeleteOutcome, Part, Registry};
use crate::admission::Operation;
use crate::apimachinery::errors::{ApiError, ApiResult, Target};
use crate::apimachinery::options::{is_dry_run, DeleteOptions, ListOptions};
use crate::registry::encode::ListMeta;
use crate::storage::{Mutation, StoreError, StoredObject, Updated};

/// The finalizer a (validated) propagation policy asks for, as kube-apiserver
/// adds it: orphan for `Orphan` or the deprecated `orphanDependents: true`,
/// foregroundDeletion for `Foreground`, none otherwise.
fn wanted_finalizer(opts: &DeleteOptions) -> Option<&'static str> {
    match (opts.propagation_policy.as_deref(), opts.orphan_dependents) {
        (Some("Orphan"), _) | (None, Some(true)) => Some("orphan"),
        (Some("Foreground"), _) => Some("foregroundDeletion"),
        _ => None,
    }
}

/// The Success Status kube-apiserver answers a delete that removed the object
/// with; its details name the resource where a kind usually stands.
fn deleted_status(n: &Names, name: &str, uid: &str) -> Status {
    Status {
        status: Some("Success".into()),
        details: Some(StatusDetails {
            name: Some(name.into()),
            group: Some(n.group.into()),
            kind: Some(n.plural.into()),
            uid: Some(uid.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl Registry {
    /// DELETE of one object: what became of it, and admission's warnings.
    pub async fn delete(
        &self,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
        user: Requester<'_>,
    ) -> ApiResult<(DeleteOutcome, Vec<String>)> {
        let admission = self.admission_for(Operation::Delete, Part::Main, ns);
        let options = admission.map(|_| delete_options_object(opts));
        let mut warnings = Vec::new();
        if let (Some(admission), Some(options)) = (admission, &options) {
            // kube asks the mutating plugins with no object at all: they may
            // refuse a delete, not change it.
            let mut attributes = self.attributes(
                Operation::Delete,
                Part::Main,
                ns,
                name,
                None,
                None,
                options.clone(),
                is_dry_run(opts),
                user,
            );
            admission.mutate(&mut attributes).await?;
            warnings.append(&mut attributes.warnings);
        }
        let wanted_finalizer = wanted_finalizer(opts);
        let dry_run = is_dry_run(opts);
        let preconditions = opts.preconditions.clone().unwrap_or_default();
        let mut refused = None;
        let mut dry_run_pending = None;
        let mut uid = String::new();
        let decide = |current: &StoredObject| -> ApiResult<Mutation> {
            uid = current.index.uid.to_string();
            // kube's BeforeDelete checks the preconditions and names the kind
            // where a resource usually stands (`Widget.<group> "x"`).
            let n = self.kind.names();
            let by_kind = Target { resource: n.kind, ..self.target(name) };
            if let Some(want) = &preconditions.uid {
                if *want != uid {
                    return Err(ApiError::conflict(
                        by_kind,
                        format!("the UID in the precondition ({want}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"),
                    ));
                }
            }
            if let Some(want) = &preconditions.resource_version {
                if *want != current.rv.to_string() {
                    return Err(ApiError::conflict(
                        by_kind,
                        format!(
                            "the ResourceVersion in the precondition ({want}) does not match the ResourceVersion in record ({}). The object might have been modified",
                            current.rv
                        ),
                    ));
                }
            }
            let mut obj = current.value().map_err(|e| self.store_error(name, e))?;
            let mut fins = finalizers(&obj);
            if let Some(f) = wanted_finalizer {
                if !fins.iter().any(|x| x == f) {
                    fins.push(f.to_string());
                }
                // Orphan and foreground exclude each other, as in kube-apiserver.
                let other = if f == "orphan" { "foregroundDeletion" } else { "orphan" };
                fins.retain(|x| x != other);
            }
            if fins.is_empty() {
                return Ok(if dry_run { Mutation::Abort } else { Mutation::Delete });
            }
            let already_deleting = obj.pointer("/metadata/deletionTimestamp").is_some();
            if already_deleting && fins == finalizers(&obj) {
                return Ok(Mutation::Keep);
            }
            let generation = obj.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
            let meta = meta_mut(&mut obj)?;
            meta.insert("finalizers".into(), json!(fins));
            if !already_deleting {
                meta.insert("deletionTimestamp".into(), json!(now_rfc3339()));
                meta.insert("deletionGracePeriodSeconds".into(), json!(0));
                meta.insert("generation".into(), json!(generation + 1));
            }
            if dry_run {
                dry_run_pending = Some(obj);
                return Ok(Mutation::Abort);
            }
            Ok(Mutation::Put(obj))
        };
        let mut decide = decide;
        let key = self.key(ns, name);
        let mut attempts = 0;
        let updated = loop {
            // With admission, the object validating plugins saw is the one
            // deleted: the delete goes on only if it is still the stored one.
            let mut seen = None;
            if let (Some(admission), Some(options)) = (admission, &options) {
                let current = self.stored(&key, name).await?;
                let old = current.value().map_err(|e| self.store_error(name, e))?;
                let mut attributes = self.attributes(
                    Operation::Delete,
                    Part::Main,
                    ns,
                    name,
                    None,
                    Some(&old),
                    options.clone(),
                    dry_run,
                    user,
                );
                admission.validate(&mut attributes).await.map_err(|e| e.with_warnings(warnings.clone()))?;
                warnings.append(&mut attributes.warnings);
                seen = Some(current.rv);
            }
            let mut stale = false;
            let updated = self
                .store
                .guaranteed_update(&key, &mut |current| {
                    if seen.is_some_and(|rv| rv != current.rv) {
                        stale = true;
                        return Mutation::Abort;
                    }
                    decide(current).unwrap_or_else(|e| {
                        refused = Some(e);
                        Mutation::Abort
                    })
                })
                .await
                .map_err(|e| self.store_error(name, e))?;
            if !stale {
                break updated;
            }
            attempts += 1;
            if attempts >= WRITE_RETRIES * 4 {
                return Err(ApiError::conflict(self.target(name), StoreError::Conflict));
            }
        };
        let gone = || DeleteOutcome::Deleted(Box::new(deleted_status(self.kind.names(), name, &uid)));
        let outcome = match updated {
            Updated::Deleted(_) => gone(),
            Updated::Put(stored) | Updated::Kept(stored) => DeleteOutcome::Pending(stored.bytes.clone()),
            Updated::Aborted => match (refused, dry_run_pending) {
                (Some(e), _) => return Err(e.with_warnings(warnings)),
                (None, Some(obj)) => DeleteOutcome::Pending(encode_value(&obj)?),
                // A dry run of an immediate deletion.
                (None, None) => gone(),
            },
        };
        Ok((outcome, warnings))
    }

    /// DELETE on a collection: deletes every selected object as a single delete
    /// would, and answers with the list of what was deleted or marked.
    pub async fn delete_collection(
        &self,
        ns: &str,
        list: &ListOptions,
        opts: &DeleteOptions,
        user: Requester<'_>,
    ) -> ApiResult<(ListMeta, Vec<Bytes>, Vec<String>)> {
        let (meta, items) = self.list(Some(ns).filter(|_| self.kind.namespaced()), list).await?;
        let mut out = Vec::with_capacity(items.len());
        let mut warnings = Vec::new();
        for item in items {
            match self.delete(&item.key.namespace, &item.key.name, opts, user).await {
                Ok((outcome, mut more)) => {
                    warnings.append(&mut more);
                    match outcome {
                        DeleteOutcome::Pending(b) => out.push(b),
                        DeleteOutcome::Deleted(_) => out.push(item.bytes.clone()),
                    }
                }
                // Deleted by someone else meanwhile: fine.
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e.with_warnings(warnings)),
            }
        }
        Ok((meta, out, warnings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deleted_status_is_what_was_written_by_hand() {
        let names = Names { version: "v1alpha", ..crate::apimachinery::resource::TEST_NAMES };
        let status = deleted_status(&names, "dolly", "u-1");
        // As the handler encodes it: through a Value.
        let bytes = serde_json::to_vec(&serde_json::to_value(&status).unwrap()).unwrap();
        let by_hand = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": "dolly", "group": "example.com", "kind": "widgets", "uid": "u-1"},
        });
        assert_eq!(String::from_utf8(bytes).unwrap(), serde_json::to_string(&by_hand).unwrap());
    }
}
