//! The process's open-files limit (`RLIMIT_NOFILE`).
//!
//! Every connection holds a file descriptor. A process inherits its parent's soft limit,
//! which is often 1,024 (systemd's default, and Docker's in many setups) even where the hard
//! limit is a million; accepting beyond it fails with EMFILE. Go raises the soft limit to
//! the hard one when a program starts (since Go 1.19), so kube-apiserver never meets 1,024;
//! [`raise_limit`] does the same here. What the server may hold is bounded by its flags
//! (`crate::server::connection` says why): connections without a request in flight by
//! `--max-connections`, connections with one by the in-flight limits and the watch caps
//! (one connection per request on HTTP/1.1) and, before those, by the TokenReview queue
//! (`--review-queue`), plus a margin for the listener, the cluster and etcd clients, and
//! the requests never refused for load (probes, `system:masters`, the aggregator). When
//! that does not fit the limit, a warning says so at start.
//! Should descriptors run out anyway, axum-server's accept loop waits 50 ms and tries again;
//! it never ends the server.

use crate::auth::options::ReviewOptions;
use crate::filters::options::RequestLimits;
use crate::server::connection::ConnectionLimits;

/// Descriptors kept for everything but the bounded connections.
const MARGIN: u64 = 256;

/// Raises the soft open-files limit to the hard limit and warns when the connections the
/// flags allow could need more. Failures are logged, never fatal: the server still runs
/// within the limit it has.
pub fn raise_limit(connections: &ConnectionLimits, requests: &RequestLimits, reviews: &ReviewOptions) {
    let limit = match raise_soft_to_hard() {
        Ok(Some((before, after))) => {
            if after > before {
                tracing::info!(
                    from = before,
                    to = after,
                    "raised the open-files limit (RLIMIT_NOFILE) to its hard limit"
                );
            }
            after
        }
        Ok(None) => return,
        Err(err) => {
            tracing::warn!(error = %err, "could not raise the open-files limit (RLIMIT_NOFILE)");
            return;
        }
    };
    let bounds = [
        connections.max_connections,
        requests.max_requests_inflight,
        requests.max_mutating_requests_inflight,
        requests.max_watches,
    ];
    if let Some(needed) = descriptors_needed(&bounds, reviews.review_queue) {
        if needed > limit {
            tracing::warn!(
                limit,
                needed,
                "the open-files limit is below what --max-connections, the in-flight limits, --max-watches and \
                 --review-queue allow; lower them or raise the limit"
            );
        }
    }
}

/// The descriptors the bounded connections and the margin may need: `bounds` are limits
/// where zero means none (then nothing can be said: None), `queued` requests waiting for a
/// TokenReview (zero means none wait).
fn descriptors_needed(bounds: &[usize], queued: usize) -> Option<u64> {
    let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    bounds.iter().try_fold(MARGIN.saturating_add(count(queued)), |sum, bound| match *bound {
        0 => None,
        n => Some(sum.saturating_add(count(n))),
    })
}

/// (soft limit before, soft limit now); None where there is no such limit to raise.
#[cfg(target_os = "linux")]
fn raise_soft_to_hard() -> std::io::Result<Option<(u64, u64)>> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit only writes the struct passed, which lives on this stack frame.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let before = limit.rlim_cur;
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
        // SAFETY: setrlimit only reads the struct passed; raising the soft limit up to the hard
        // limit needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(Some((before, limit.rlim_max)))
}

#[cfg(not(target_os = "linux"))]
fn raise_soft_to_hard() -> std::io::Result<Option<(u64, u64)>> {
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needed_descriptors_add_up_unless_a_bound_is_off() {
        assert_eq!(descriptors_needed(&[1000, 400, 200, 4000], 1000), Some(6600 + MARGIN));
        assert_eq!(descriptors_needed(&[1000, 400, 200, 4000], 0), Some(5600 + MARGIN));
        assert_eq!(descriptors_needed(&[1000, 0, 200, 4000], 1000), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_soft_limit_is_raised_to_the_hard_limit() {
        let (before, after) = raise_soft_to_hard().expect("raise").expect("a limit on Linux");
        assert!(after >= before);
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
        assert_eq!((limit.rlim_cur, limit.rlim_max), (after, after));
    }
}
