//! The authorizer's cache key, and a view of it through references so that a
//! cache hit needs no copy of the user and the attributes.
//!
//! An owned key for every lookup would clone the user's name, groups and
//! extra and the request's attributes (a dozen allocations) and drop them
//! again, which costs more than the lookup itself (measured:
//! docs/performance.md, "Authentication and authorization lookups").

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::{Attributes, AttributesRef, User};

/// What a decision is cached under.
pub type CacheKey = (User, Attributes);

/// A key whichever way it is held: owned (in the cache) or borrowed (a lookup).
pub trait KeyView {
    fn user(&self) -> &User;
    fn attributes(&self) -> AttributesRef<'_>;
}

impl KeyView for CacheKey {
    fn user(&self) -> &User {
        &self.0
    }
    fn attributes(&self) -> AttributesRef<'_> {
        self.1.view()
    }
}

impl KeyView for (&User, AttributesRef<'_>) {
    fn user(&self) -> &User {
        self.0
    }
    fn attributes(&self) -> AttributesRef<'_> {
        self.1
    }
}

/// The cache holds `Arc<CacheKey>`; a lookup may name it as a `dyn KeyView`.
impl<'a> Borrow<dyn KeyView + 'a> for Arc<CacheKey> {
    fn borrow(&self) -> &(dyn KeyView + 'a) {
        self.as_ref()
    }
}

/// Hashes as the tuple `(User, Attributes)` does (each part in order, nothing
/// else; [`AttributesRef`] hashes as [`Attributes`]), as `Borrow` requires of
/// a borrowed form.
impl Hash for dyn KeyView + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.user().hash(state);
        self.attributes().hash(state);
    }
}

impl PartialEq for dyn KeyView + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.user() == other.user() && self.attributes() == other.attributes()
    }
}

impl Eq for dyn KeyView + '_ {}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::auth::authz::tests::{non_res, res, user};

    #[test]
    fn a_borrowed_key_hashes_and_compares_as_the_owned_one() {
        let state = crate::auth::cache::KeyHasher::new();
        let mut someone = user("someone");
        someone.groups = vec!["system:authenticated".into()];
        someone.extra.insert("scopes".into(), vec!["a".into(), "b".into()]);
        for attrs in [res("get", "widgets", "", "ns", "dolly"), non_res("get", "/apis")] {
            let owned: Arc<CacheKey> = Arc::new((someone.clone(), attrs.clone()));
            let borrowed = (&someone, attrs.view());
            let as_view: &dyn KeyView = &borrowed;
            let owned_view: &dyn KeyView = owned.borrow();
            assert_eq!(state.hash_one(&owned), state.hash_one(as_view));
            assert_eq!(state.hash_one(&attrs), state.hash_one(attrs.view()), "the view hashes as the attributes");
            assert!(owned_view == as_view);
            let other = res("get", "widgets", "", "ns", "other");
            let different: &dyn KeyView = &(&someone, other.view());
            assert!(owned_view != different);
        }
    }
}
