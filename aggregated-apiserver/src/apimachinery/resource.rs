//! What names a resource and what may be asked of it: a kind's group,
//! version, kind and plural (a CRD's `names`), and the verbs kube-apiserver
//! spells in discovery and authorization. Every layer speaks these words.

/// The group, version and kind of what a scale subresource serves: an
/// `autoscaling/v1` Scale, whatever the kind scaled.
pub(crate) const SCALE_GROUP: &str = "autoscaling";
pub(crate) const SCALE_VERSION: &str = "v1";
pub(crate) const SCALE_KIND: &str = "Scale";

/// The names under which a kind is served: a CRD's `group`, `version` and
/// `names`.
#[derive(Debug, Clone, Copy)]
pub struct Names {
    /// The API group, e.g. `example.com`.
    pub group: &'static str,
    /// The version served, e.g. `v1`.
    pub version: &'static str,
    /// The kind, e.g. `Greeting`.
    pub kind: &'static str,
    /// The kind of a list of them, e.g. `GreetingList`.
    pub list_kind: &'static str,
    /// The resource in paths and RBAC rules, e.g. `greetings`.
    pub plural: &'static str,
    /// The lower-case singular name, e.g. `greeting` (`kubectl get greeting`).
    pub singular: &'static str,
    /// Short names kubectl accepts, e.g. `gr`.
    pub short_names: &'static [&'static str],
    /// Categories kubectl expands, e.g. `all`.
    pub categories: &'static [&'static str],
}

/// A kind's names for the unit tests that need one (example.com/v1 Widget).
#[cfg(test)]
pub(crate) static TEST_NAMES: Names = Names {
    group: "example.com",
    version: "v1",
    kind: "Widget",
    list_kind: "WidgetList",
    plural: "widgets",
    singular: "widget",
    short_names: &[],
    categories: &[],
};

impl Names {
    /// The `apiVersion` of the kind's objects: `group/version`.
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }
}

/// The verbs a kind supports, in kube-apiserver's discovery spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// Read one object.
    Get,
    /// Read a list of objects.
    List,
    /// Follow changes.
    Watch,
    /// Create an object.
    Create,
    /// Replace an object.
    Update,
    /// Change an object with a patch (JSON, merge, or server-side apply).
    Patch,
    /// Delete an object.
    Delete,
    /// Delete every object a selector names.
    DeleteCollection,
}

impl Verb {
    /// The verb as discovery and RBAC spell it (`deletecollection`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::DeleteCollection => "deletecollection",
        }
    }

    /// Every verb: a kind this server stores.
    pub const ALL: &'static [Verb] = &[
        Verb::Create,
        Verb::Delete,
        Verb::DeleteCollection,
        Verb::Get,
        Verb::List,
        Verb::Patch,
        Verb::Update,
        Verb::Watch,
    ];
    /// Get, list and watch: a read-only view.
    pub const READ_ONLY: &'static [Verb] = &[Verb::Get, Verb::List, Verb::Watch];
}
