//! The order kube gives API versions (k8s.io/apimachinery
//! `version.CompareKubeAwareVersionStrings`): GA before beta before alpha,
//! then the higher major, then the higher minor (`v2` > `v1` > `v1beta2` >
//! `v1beta1` > `v1alpha1`); a version not of that form (`v1alpha`, `foo`)
//! after every one that is, in alphabetical order.

use std::cmp::Ordering;

/// How `a` compares with `b` in priority: `Greater` when `a` comes first.
pub fn compare_kube_aware(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    match (parse(a), parse(b)) {
        (None, None) => b.cmp(a),
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => a.cmp(&b),
    }
}

/// `v<major>[(alpha|beta)<minor>]` as (stability, major, minor).
fn parse(version: &str) -> Option<(u8, u64, u64)> {
    let rest = version.strip_prefix('v')?;
    let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    let major = rest[..digits].parse().ok()?;
    let (stability, minor) = match &rest[digits..] {
        "" => (2, ""),
        tail => match (tail.strip_prefix("alpha"), tail.strip_prefix("beta")) {
            (Some(minor), _) => (0, minor),
            (_, Some(minor)) => (1, minor),
            _ => return None,
        },
    };
    if stability == 2 {
        return Some((2, major, 0));
    }
    if minor.is_empty() || !minor.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((stability, major, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_as_kube_sorts_them() {
        let mut versions =
            vec!["v1alpha", "foo", "v1alpha1", "v2beta1", "v1", "v1beta2", "v11alpha2", "v2", "v1beta1", "bar"];
        versions.sort_by(|a, b| compare_kube_aware(b, a));
        assert_eq!(
            versions,
            ["v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v11alpha2", "v1alpha1", "bar", "foo", "v1alpha"]
        );
    }
}
