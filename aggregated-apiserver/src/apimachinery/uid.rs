//! New UIDs (k8s.io/apimachinery `pkg/util/uuid.NewUUID`): random (version
//! 4) UUIDs, for objects' `metadata.uid`, admission reviews and audit IDs.
//!
//! Drawn from the thread's generator (`rand`'s, seeded from the system once
//! per thread) rather than with `Uuid::new_v4`, which asks the kernel for
//! every UUID (a `getrandom` system call each create, each webhook call,
//! each audited request).

/// A new random UUID.
pub fn new_uid() -> uuid::Uuid {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_random_version_4_uuids() {
        let (a, b) = (new_uid(), new_uid());
        assert_ne!(a, b);
        assert_eq!(a.get_version(), Some(uuid::Version::Random));
        assert_eq!(a.get_variant(), uuid::Variant::RFC4122);
    }
}
