//! One priority level's seats and queues (k8s.io/apiserver's
//! `queueset`): a request takes as many seats as its estimated work (its
//! width: one, or more for a large list), and runs when the level has that
//! many free; otherwise it
//! waits in one of the level's queues, chosen by shuffle sharding from its
//! flow, or is rejected when that queue is full or the level does not queue.
//! A freed seat goes to the queues in turn, so that one flow's backlog
//! delays its own requests, not every flow's.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;

/// How a level holds requests it has no seat for (a PriorityLevelConfiguration's
/// `limitResponse`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queuing {
    pub queues: usize,
    pub hand_size: usize,
    pub queue_length_limit: usize,
}

/// A limited priority level.
pub struct Level {
    /// Seats: requests that run at once.
    limit: usize,
    /// None: a request without a seat is rejected at once.
    queuing: Option<Queuing>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Seats taken by the requests running.
    executing: usize,
    /// Waiting requests: how to give each its seats, and how many it takes.
    queues: Vec<VecDeque<(oneshot::Sender<()>, usize)>>,
    /// How many wait in all the queues: admitting and releasing need not
    /// look at every queue while none waits.
    waiting: usize,
    /// The queue the next freed seat is offered to first.
    next: usize,
}

/// What became of a request at its level.
pub enum Admission {
    /// It runs now, holding a seat until the ticket drops.
    Now(Ticket),
    /// It waits for a seat; the ticket comes when one is free, or None after
    /// the longest wait.
    Queued(Waiting),
    Rejected,
}

/// A request's seats; freeing them gives them to the queued requests.
pub struct Ticket {
    level: Arc<Level>,
    width: usize,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.level.release(self.width);
    }
}

/// A queued request's wait for its seats.
pub struct Waiting {
    level: Arc<Level>,
    width: usize,
    seat: oneshot::Receiver<()>,
}

impl Waiting {
    /// The seat, or None when none came within `longest`.
    pub async fn seat(self, longest: Duration) -> Option<Ticket> {
        let Waiting { level, width, mut seat } = self;
        match tokio::time::timeout(longest, &mut seat).await {
            Ok(Ok(())) => Some(Ticket { level, width }),
            Ok(Err(_)) => None,
            Err(_) => {
                // A seat given between the timeout and now is this request's:
                // taken back, not lost.
                seat.close();
                match seat.try_recv() {
                    Ok(()) => drop(Ticket { level, width }),
                    Err(_) => level.forget_departed(),
                }
                None
            }
        }
    }
}

impl Level {
    pub fn new(limit: usize, queuing: Option<Queuing>) -> Arc<Self> {
        let queues = queuing.map_or(0, |q| q.queues);
        let state = State { queues: (0..queues).map(|_| VecDeque::new()).collect(), ..Default::default() };
        Arc::new(Self { limit: limit.max(1), queuing, state: Mutex::new(state) })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Counters and queues of senders: a poisoned lock still holds them whole.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The seats of this level.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// How requests without a seat wait, if they do.
    pub fn queuing(&self) -> Option<Queuing> {
        self.queuing
    }

    /// Admits a request of `flow` that takes `width` seats (at most the
    /// level's, so that every request can run).
    pub fn admit(self: &Arc<Self>, flow: &impl Hash, width: usize) -> Admission {
        let width = width.clamp(1, self.limit);
        let mut state = self.lock();
        if state.executing + width <= self.limit && state.waiting == 0 {
            state.executing += width;
            return Admission::Now(Ticket { level: self.clone(), width });
        }
        let Some(queuing) = self.queuing else { return Admission::Rejected };
        let queue = shortest_of_hand(&state.queues, queuing.hand_size, flow_hash(flow));
        if state.queues[queue].len() >= queuing.queue_length_limit {
            return Admission::Rejected;
        }
        let (give, seat) = oneshot::channel();
        state.queues[queue].push_back((give, width));
        state.waiting += 1;
        Admission::Queued(Waiting { level: self.clone(), width, seat })
    }

    /// Seats are free: they go to the queues in turn, to the request at the
    /// head of the next queue that has one still waiting, once there are
    /// enough for it.
    fn release(&self, width: usize) {
        let mut state = self.lock();
        state.executing = state.executing.saturating_sub(width);
        self.dispatch(&mut state);
    }

    fn dispatch(&self, state: &mut State) {
        let count = state.queues.len();
        while state.waiting > 0 {
            let Some(queue) = (0..count).map(|i| (state.next + i) % count).find(|&q| !state.queues[q].is_empty())
            else {
                return;
            };
            let width = state.queues[queue].front().map_or(1, |(_, width)| *width);
            if state.executing + width > self.limit {
                // Its turn waits for more seats; the later ones wait behind it.
                return;
            }
            state.next = (queue + 1) % count;
            if let Some((waiter, width)) = state.queues[queue].pop_front() {
                state.waiting -= 1;
                if waiter.send(()).is_ok() {
                    state.executing += width;
                }
            }
        }
    }

    /// A waiter gave up: its sender is dropped from the queues, so that it
    /// counts against no queue's length.
    fn forget_departed(&self) {
        let mut state = self.lock();
        for queue in &mut state.queues {
            queue.retain(|(waiter, _)| !waiter.is_closed());
        }
        state.waiting = state.queues.iter().map(VecDeque::len).sum();
    }
}

fn flow_hash(flow: &impl Hash) -> u64 {
    // SipHash with fixed keys: the same flow gets the same hand in every run.
    #[allow(deprecated)]
    let mut hasher = std::hash::SipHasher::new();
    flow.hash(&mut hasher);
    hasher.finish()
}

/// Shuffle sharding (kube's `Dealer`): `hand_size` distinct queues dealt from
/// the flow's hash, then the one with the fewest waiting requests.
fn shortest_of_hand<T>(queues: &[VecDeque<T>], hand_size: usize, mut hash: u64) -> usize {
    let count = queues.len();
    let mut dealt: Vec<usize> = Vec::with_capacity(hand_size.min(count));
    for i in 0..hand_size.min(count) {
        let remaining = (count - i) as u64;
        let mut pick = (hash % remaining) as usize;
        hash /= remaining;
        // The pick-th queue not dealt yet.
        let mut sorted = dealt.clone();
        sorted.sort_unstable();
        for taken in sorted {
            if taken <= pick {
                pick += 1;
            }
        }
        dealt.push(pick);
    }
    dealt.into_iter().min_by_key(|&q| queues[q].len()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (running, waiting) at `level`.
    fn counts(level: &Level) -> (usize, usize) {
        let state = level.lock();
        (state.executing, state.queues.iter().map(VecDeque::len).sum())
    }

    fn queued(admission: Admission) -> Waiting {
        match admission {
            Admission::Queued(waiting) => waiting,
            _ => panic!("not queued"),
        }
    }

    #[test]
    fn a_hand_is_distinct_queues_and_the_same_for_a_flow() {
        let queues: Vec<VecDeque<()>> = (0..8).map(|_| VecDeque::new()).collect();
        for hash in [0, 1, 7, 12345, u64::MAX] {
            let first = shortest_of_hand(&queues, 3, hash);
            assert!(first < 8);
            assert_eq!(shortest_of_hand(&queues, 3, hash), first);
        }
        assert_eq!(flow_hash(&("schema", "alice")), flow_hash(&("schema", "alice")));
    }

    /// Two flows whose hands of one queue differ.
    fn two_flows(queues: usize) -> (String, String) {
        let empty: Vec<VecDeque<()>> = (0..queues).map(|_| VecDeque::new()).collect();
        let queue_of = |f: &String| shortest_of_hand(&empty, 1, flow_hash(f));
        let a = "flow-a".to_string();
        let b = (0..100).map(|i| format!("flow-b-{i}")).find(|b| queue_of(b) != queue_of(&a)).unwrap();
        (a, b)
    }

    #[tokio::test]
    async fn seats_then_queues_then_rejection() {
        let level = Level::new(1, Some(Queuing { queues: 4, hand_size: 1, queue_length_limit: 1 }));
        let (a, b) = two_flows(4);
        let Admission::Now(first) = level.admit(&a, 1) else { panic!("the free seat") };
        let a1 = queued(level.admit(&a, 1));
        assert!(matches!(level.admit(&a, 1), Admission::Rejected), "a's queue is full");
        let b1 = queued(level.admit(&b, 1));
        assert_eq!(counts(&level), (1, 2));
        drop(first);
        let (a1, b1) = tokio::join!(a1.seat(Duration::from_millis(200)), b1.seat(Duration::from_millis(200)));
        assert_eq!(usize::from(a1.is_some()) + usize::from(b1.is_some()), 1, "one seat, one of them");
        assert_eq!(counts(&level), (1, 0), "the other left its queue at its limit");
        drop((a1, b1));
        assert_eq!(counts(&level).0, 0);
    }

    #[test]
    fn freed_seats_go_to_the_queues_in_turn() {
        let level = Level::new(1, Some(Queuing { queues: 2, hand_size: 1, queue_length_limit: 10 }));
        let (a, b) = two_flows(2);
        let Admission::Now(first) = level.admit(&a, 1) else { panic!("the free seat") };
        let mut waiting: Vec<(String, Waiting)> = Vec::new();
        for flow in [&a, &a, &a, &b] {
            waiting.push((flow.clone(), queued(level.admit(flow, 1))));
        }
        let mut served = Vec::new();
        let mut seat = first;
        for _ in 0..4 {
            drop(seat);
            let next = waiting.iter_mut().position(|(_, w)| w.seat.try_recv().is_ok()).expect("a seat was given");
            let (flow, w) = waiting.remove(next);
            served.push(flow);
            seat = Ticket { level: w.level, width: 1 };
        }
        drop(seat);
        assert!(served[..2].contains(&b), "b's one request waits for at most one of a's: {served:?}");
        assert_eq!(counts(&level).0, 0);
    }

    #[test]
    fn a_wide_request_runs_once_its_seats_are_free() {
        let level = Level::new(4, Some(Queuing { queues: 1, hand_size: 1, queue_length_limit: 10 }));
        let Admission::Now(one) = level.admit(&"a", 1) else { panic!("a free seat") };
        let Admission::Now(two) = level.admit(&"a", 2) else { panic!("two free seats") };
        let mut wide = queued(level.admit(&"b", 3));
        assert_eq!(counts(&level), (3, 1));
        drop(one);
        assert!(wide.seat.try_recv().is_err(), "two of its three seats are free");
        drop(two);
        assert!(wide.seat.try_recv().is_ok(), "its three seats are free");
        assert_eq!(counts(&level), (3, 0));
        let Admission::Now(capped) = level.admit(&"c", 1) else { panic!("the fourth seat") };
        drop(capped);
        let Admission::Queued(_) = level.admit(&"d", 100) else {
            panic!("wider than the level: it waits for all of it")
        };
    }

    #[test]
    fn a_level_that_does_not_queue_rejects_past_its_seats() {
        let level = Level::new(2, None);
        let held: Vec<_> = (0..2).map(|_| level.admit(&"x", 1)).collect();
        assert!(held.iter().all(|a| matches!(a, Admission::Now(_))));
        assert!(matches!(level.admit(&"y", 1), Admission::Rejected));
        drop(held);
        assert!(matches!(level.admit(&"y", 1), Admission::Now(_)));
    }
}
