//! Reinvocation of the mutating plugins (k8s.io/apiserver's `reinvoker` and
//! the plugins' reinvocation contexts): after the mutating plugins ran,
//! when one of them changed the object after a webhook or policy with
//! `reinvocationPolicy: IfNeeded` had run, all run once more, and each
//! calls again only those of its webhooks or policies that ran before a
//! change (and were called in the first pass). A plugin also reinvokes
//! its own when the object changed since it last ran (a later plugin
//! changed it).

use std::collections::HashSet;

use serde_json::Value;

/// The reinvocation state of one write.
#[derive(Debug, Default)]
pub struct Reinvocation {
    /// This is the second pass.
    pub is_reinvoke: bool,
    /// A plugin asks for a second pass.
    pub should_reinvoke: bool,
    pub webhooks: Invoked,
    pub policies: Invoked,
}

/// What one plugin ran (kube's `webhookReinvokeContext`,
/// `policyReinvokeContext`), by a key of its own choosing.
#[derive(Debug, Default)]
pub struct Invoked {
    /// The object as the plugin last left it, kept only while some of its
    /// hooks may be reinvoked (the one use of it).
    last_output: Option<Option<Value>>,
    previously_invoked: HashSet<String>,
    reinvoke: HashSet<String>,
}

impl Invoked {
    /// At the start of a pass: in the second, a change since the plugin
    /// last ran reinvokes those of its hooks that may be.
    pub fn begin(&mut self, is_reinvoke: bool, object: Option<&Value>) {
        if is_reinvoke && self.last_output.as_ref().is_some_and(|last| last.as_ref() != object) {
            self.require_reinvoking_previously_invoked();
        }
    }

    /// At the end of a pass.
    pub fn end(&mut self, object: Option<&Value>) {
        self.last_output = (!self.previously_invoked.is_empty()).then(|| object.cloned());
    }

    pub fn should_reinvoke(&self, key: &str) -> bool {
        self.reinvoke.contains(key)
    }

    pub fn add_reinvocable(&mut self, key: &str) {
        self.previously_invoked.insert(key.to_string());
    }

    pub fn require_reinvoking_previously_invoked(&mut self) {
        self.reinvoke.extend(self.previously_invoked.drain());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn hooks_run_before_a_change_are_reinvoked() {
        let mut invoked = Invoked::default();
        let first = json!({"a": 1});
        invoked.begin(false, Some(&first));
        invoked.add_reinvocable("early");
        invoked.require_reinvoking_previously_invoked();
        invoked.add_reinvocable("late");
        invoked.end(Some(&first));
        assert!(invoked.should_reinvoke("early"));
        assert!(!invoked.should_reinvoke("late"), "nothing changed after it");
        // A later plugin changed the object: the late one runs again too.
        let changed = json!({"a": 2});
        invoked.begin(true, Some(&changed));
        assert!(invoked.should_reinvoke("late"));
    }

    #[test]
    fn an_unchanged_object_reinvokes_nothing_more() {
        let mut invoked = Invoked::default();
        let object = json!({"a": 1});
        invoked.begin(false, Some(&object));
        invoked.add_reinvocable("only");
        invoked.end(Some(&object));
        invoked.begin(true, Some(&object));
        assert!(!invoked.should_reinvoke("only"));
    }
}
