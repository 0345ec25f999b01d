//! What names a resource and what may be asked of it: a kind's group,
//! version, kind and plural (a CRD's `names`), and the verbs kube-apiserver
//! spells in discovery and authorization. Every layer speaks these words.

/// The names under which a kind is served.
#[derive(Debug, Clone, Copy)]
pub struct Names {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub list_kind: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub short_names: &'static [&'static str],
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
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }
}

/// The verbs a kind supports, in kube-apiserver's discovery spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

impl Verb {
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
    pub const READ_ONLY: &'static [Verb] = &[Verb::Get, Verb::List, Verb::Watch];
}
