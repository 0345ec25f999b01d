//! Where the machine's CPU went while a case ran: the server under test, this
//! benchmark process (the client), every other process (the control plane),
//! and time the hypervisor gave to other guests (steal). On two cores shared
//! by client and server, wall-clock latency moves with all four; the split
//! says whether a slower run spent more of its own CPU or waited for someone
//! else's.
//!
//! Read from /proc in clock ticks (`USER_HZ`, 100 per second on Linux): a
//! case's totals are exact to 10 ms, so divide them over many requests.

// Each benchmark uses its part of these.
#![allow(dead_code)]

use std::time::Duration;

const TICK: Duration = Duration::from_millis(10);

/// Cumulative CPU counters at one instant.
#[derive(Clone, Copy, Default)]
pub struct CpuClock {
    busy: u64,
    steal: u64,
    server: u64,
    client: u64,
}

/// CPU spent between two [`CpuClock`] readings, summed over all cores.
#[derive(Clone, Copy, Default)]
pub struct CpuSpent {
    pub server: Duration,
    pub client: Duration,
    pub others: Duration,
    pub steal: Duration,
}

impl CpuClock {
    /// The counters now, with `server_pid`'s own time.
    pub fn now(server_pid: u32) -> Self {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        // cpu user nice system idle iowait irq softirq steal guest guest_nice
        let ticks: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .map(|t| t.parse().unwrap_or(0))
            .collect();
        let at = |i: usize| ticks.get(i).copied().unwrap_or(0);
        CpuClock {
            busy: at(0) + at(1) + at(2) + at(5) + at(6),
            steal: at(7),
            server: process_ticks(&server_pid.to_string()),
            client: process_ticks("self"),
        }
    }

    /// What was spent from `earlier` to `self`.
    pub fn since(&self, earlier: &CpuClock) -> CpuSpent {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let server = d(self.server, earlier.server);
        let client = d(self.client, earlier.client);
        CpuSpent {
            server: TICK * server as u32,
            client: TICK * client as u32,
            others: TICK * d(d(self.busy, earlier.busy), server + client) as u32,
            steal: TICK * d(self.steal, earlier.steal) as u32,
        }
    }
}

impl CpuSpent {
    /// The whole machine's busy time as /proc counts it: every process,
    /// interrupts, and steal.
    pub fn machine(&self) -> Duration {
        self.server + self.client + self.others + self.steal
    }

    /// Per request, in milliseconds: `server / client / others / steal`.
    pub fn per_request(&self, requests: usize) -> String {
        let n = requests.max(1) as f64;
        let ms = |d: Duration| d.as_secs_f64() * 1000.0 / n;
        format!("{:.2} / {:.2} / {:.2} / {:.2}", ms(self.server), ms(self.client), ms(self.others), ms(self.steal))
    }
}

/// utime + stime of `/proc/<pid>/stat` (fields 14 and 15; the command name,
/// field 2, is in parentheses and may hold spaces, so count after its `)`).
fn process_ticks(pid: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // `after_name` starts at field 3 (state), so field n is at index n - 3.
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    field(14) + field(15)
}
