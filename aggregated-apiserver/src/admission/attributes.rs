//! What admission is told about a write (k8s.io/apiserver's
//! `admission.Attributes`): the operation, the resource, the object before and
//! after, the request's options, dry run, and the user who asked.

use serde_json::{json, Map, Value};

use crate::admission::reinvocation::Reinvocation;
use crate::apimachinery::options::{DeleteOptions, FieldValidation, WriteOptions};
use crate::apimachinery::resource::Names;
use crate::apimachinery::typed::Shape;
use crate::audit::context::AuditContext;
use crate::auth::authn::UserInfo;

/// An admission operation (`admission.Operation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    /// As admissionregistration and AdmissionReview spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// Who asks for a write (the user the aggregator authenticated), and the
/// request's audit record, where admission's audit annotations go.
#[derive(Clone, Copy)]
pub struct Requester<'a> {
    pub user: &'a UserInfo,
    pub audit: Option<&'a AuditContext>,
}

/// One write, as the admission plugins see it.
pub struct Attributes<'a> {
    pub operation: Operation,
    pub names: &'a Names,
    /// `""`, or the subresource written (`status`, `scale`).
    pub subresource: &'a str,
    /// Whether the objects are the `autoscaling/v1` Scales of `/scale`, not
    /// objects of the kind.
    pub scale: bool,
    /// `""` for a cluster-scoped kind.
    pub namespace: &'a str,
    /// `""` while a create has only a generateName.
    pub name: &'a str,
    /// The object as it would be written (none for a delete); mutating
    /// plugins change it in place.
    pub object: Option<serde_json::Value>,
    /// The object as stored (updates and deletes).
    pub old_object: Option<&'a Value>,
    /// The operation's options object (`CreateOptions`, `UpdateOptions` or
    /// `DeleteOptions`), as kube sends it in an AdmissionReview.
    pub options: Value,
    pub dry_run: bool,
    pub user: &'a UserInfo,
    /// The request's audit record, when auditing is on.
    pub audit: Option<&'a AuditContext>,
    /// Warnings for the client, in the order the plugins gave them.
    pub warnings: Vec<String>,
    /// Audit annotations the plugins added (`<webhook name>/<key>` = value).
    pub audit_annotations: Vec<(String, String)>,
    /// The kind's shape, for merging an apply configuration (a
    /// MutatingAdmissionPolicy's `ApplyConfiguration`).
    pub shape: &'a Shape,
    /// What the mutating plugins ran, for their reinvocation.
    pub reinvocation: Reinvocation,
}

impl Attributes<'_> {
    /// Hands the audit annotations gathered so far to the audit record.
    pub fn flush_audit_annotations(&mut self) {
        let annotations = std::mem::take(&mut self.audit_annotations);
        if let Some(audit) = self.audit {
            for (key, value) in &annotations {
                audit.add_annotation(key, value);
            }
        }
    }

    /// The group-qualified resource, as errors name it (`widgets.example.com`).
    pub fn group_resource(&self) -> String {
        if self.names.group.is_empty() {
            self.names.plural.to_string()
        } else {
            format!("{}.{}", self.names.plural, self.names.group)
        }
    }
}

/// The options object of a create or update, as kube converts the request's
/// options for admission (a patch is an update with UpdateOptions, a create
/// by apply a create with CreateOptions; `force` is not among them): each
/// as the client sent it, left out when it sent none (not the manager or
/// the validation the server derived).
pub fn write_options_object(operation: Operation, options: &WriteOptions) -> Value {
    let kind = match operation {
        Operation::Create => "CreateOptions",
        _ => "UpdateOptions",
    };
    let mut object = Map::new();
    object.insert("kind".into(), json!(kind));
    object.insert("apiVersion".into(), json!("meta.k8s.io/v1"));
    if options.dry_run {
        object.insert("dryRun".into(), json!(["All"]));
    }
    if !options.field_manager.is_empty() {
        object.insert("fieldManager".into(), json!(options.field_manager));
    }
    if let Some(validation) = options.field_validation_sent {
        let validation = match validation {
            FieldValidation::Ignore => "Ignore",
            FieldValidation::Warn => "Warn",
            FieldValidation::Strict => "Strict",
        };
        object.insert("fieldValidation".into(), json!(validation));
    }
    Value::Object(object)
}

/// The DeleteOptions object of a delete, as sent (kind and apiVersion set).
pub fn delete_options_object(options: &DeleteOptions) -> Value {
    let mut object = match serde_json::to_value(options) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    object.insert("kind".into(), json!("DeleteOptions"));
    object.insert("apiVersion".into(), json!("meta.k8s.io/v1"));
    Value::Object(object)
}
