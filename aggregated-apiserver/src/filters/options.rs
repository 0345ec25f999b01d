//! The limits the request path's filters enforce: deadlines and how many
//! requests and watches are served at once.

use std::time::Duration;

use clap::Args;

use crate::apimachinery::duration::parse_seconds;

#[derive(Args, Debug, Clone)]
pub struct RequestLimits {
    /// Non-long-running requests (all but watches) answer 504 Timeout after this long.
    #[arg(long, default_value = "60", value_parser = parse_seconds)]
    pub request_timeout: Duration,

    /// Read-only requests (get, list) served at once; beyond it 429 with Retry-After.
    /// Watches and health probes are not counted. 0: no limit.
    #[arg(long, default_value_t = 400)]
    pub max_requests_inflight: usize,

    /// Mutating requests (create, update, patch, delete) served at once; beyond it 429 with
    /// Retry-After. 0: no limit.
    #[arg(long, default_value_t = 200)]
    pub max_mutating_requests_inflight: usize,

    /// Watches open at once on this server; beyond it 429 with Retry-After. 0: no limit.
    #[arg(long, default_value_t = 4000)]
    pub max_watches: usize,

    /// Watches one user may have open at once; beyond it 429 with Retry-After. 0: no limit.
    #[arg(long, default_value_t = 1000)]
    pub max_watches_per_user: usize,

    /// API Priority and Fairness: requests are classified by the cluster's
    /// FlowSchemas and limited by their PriorityLevelConfigurations, sharing
    /// the two in-flight limits' sum as seats. Off (or before the
    /// configuration is read): the in-flight limits apply.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub enable_priority_and_fairness: bool,
}
