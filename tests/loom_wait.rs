//! The engine's wake protocol, model-checked with loom: the real `Counter` code
//! (`src/engine/counter.rs`) with its atomics, mutex, spins, eventfd and event_listener's
//! parking swapped for loom's (`src/engine/sync.rs`, `src/engine/eventfd.rs`). loom runs each
//! model under every interleaving (and every weak-memory outcome it models) of its threads.
//! A waiter that sleeps with nobody left to wake it makes loom fail the model ("deadlock"), so
//! each `wait(…, Timeout::Never)` that returns at all proves the wakeup was not lost.
//!
//! Run (about a minute; a separate target dir keeps the normal build's cache):
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" cargo test --release --test loom_wait --target-dir target/loom
//! ```
//!
//! Waiters use a spin limit of 0 (one spin, then the sleep path) so the models stay small;
//! the spin phase only adds re-checks before the same registration. Timed waits are not
//! modelled (loom has no clock; event_listener refuses deadlines under loom): a timeout only
//! bounds the same sleep that `Timeout::Never` takes.
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;
use rscntr::engine::{
    Blocker, Counter, EventFd, Source, Timeout, Token, TryWaitError, WaitError, WaitStrategy, Wake,
};

fn counter(s: WaitStrategy) -> Arc<Counter> {
    Arc::new(Counter::with_spin_limit(s, 0).expect("counter"))
}

/// No lost wakeup: a waiter on an unmet threshold and an add that meets it, in any order.
#[test]
fn add_wakes_a_blocked_waiter() {
    loom::model(|| {
        let c = counter(WaitStrategy::Block);
        let c2 = c.clone();
        let adder = thread::spawn(move || c2.add(1).unwrap());
        assert_eq!(c.wait(1, Timeout::Never), Ok(()));
        adder.join().unwrap();
        assert!(!c.has_waiters(), "the waiter stayed registered");
    });
}

/// The same over an FD counter (the same sleep, plus the eventfd bit in `wake`).
#[test]
fn add_wakes_a_blocked_waiter_on_an_fd_counter() {
    loom::model(|| {
        let c = counter(WaitStrategy::Fd);
        let c2 = c.clone();
        let adder = thread::spawn(move || c2.add(1).unwrap());
        assert_eq!(c.wait(1, Timeout::Never), Ok(()));
        adder.join().unwrap();
    });
}

/// set is a mutation like add: it wakes a waiter whose threshold it meets.
#[test]
fn set_wakes_a_blocked_waiter() {
    loom::model(|| {
        let c = counter(WaitStrategy::Block);
        let c2 = c.clone();
        let setter = thread::spawn(move || c2.set(5).unwrap());
        assert_eq!(c.wait(5, Timeout::Never), Ok(()));
        setter.join().unwrap();
    });
}

/// No missed -FI_EAVAIL: once the wait has taken its reference error count, an adderr ends
/// it, whichever point of check, registration and sleep it lands on. Nothing else would wake
/// the waiter (the threshold is never met), so a miss is a loom deadlock.
#[test]
fn adderr_after_the_wait_began_gives_error_changed() {
    loom::model(|| {
        let c = counter(WaitStrategy::Block);
        let started = Arc::new(AtomicBool::new(false));
        let (c2, started2) = (c.clone(), started.clone());
        let mutator = thread::spawn(move || {
            while !started2.load(SeqCst) {
                thread::yield_now();
            }
            c2.add_err(1).unwrap();
        });
        let r = c.wait_observed(1, Timeout::Never, || started.store(true, SeqCst));
        assert_eq!(r, Err(WaitError::ErrorChanged));
        mutator.join().unwrap();
        assert!(!c.has_waiters());
    });
}

/// seterr counts as an error-count change too (even to a value the waiter never saw).
#[test]
fn seterr_after_the_wait_began_gives_error_changed() {
    loom::model(|| {
        let c = counter(WaitStrategy::Block);
        let started = Arc::new(AtomicBool::new(false));
        let (c2, started2) = (c.clone(), started.clone());
        let mutator = thread::spawn(move || {
            while !started2.load(SeqCst) {
                thread::yield_now();
            }
            c2.set_err(7).unwrap();
        });
        let r = c.wait_observed(1, Timeout::Never, || started.store(true, SeqCst));
        assert_eq!(r, Err(WaitError::ErrorChanged));
        mutator.join().unwrap();
    });
}

/// Unordered error and value changes: the wait always ends, with Ok (the threshold is checked
/// first) or ErrorChanged, never a hang.
#[test]
fn racing_error_and_value_never_hang() {
    loom::model(|| {
        let c = counter(WaitStrategy::Block);
        let c2 = c.clone();
        let mutator = thread::spawn(move || {
            c2.add_err(1).unwrap();
            c2.add(1).unwrap();
        });
        let r = c.wait(1, Timeout::Never);
        assert!(matches!(r, Ok(()) | Err(WaitError::ErrorChanged)), "{r:?}");
        mutator.join().unwrap();
    });
}

/// Two waiters, one add: notify wakes every registered waiter, not one.
#[test]
fn one_add_wakes_every_waiter() {
    let mut b = loom::model::Builder::new();
    // Three threads through event_listener's internals: unbounded, loom runs for more than
    // ten minutes here; 4 preemptions (loom suggests 2-3 find most bugs) takes ~20 s.
    b.preemption_bound = Some(4);
    b.check(|| {
        let c = counter(WaitStrategy::Block);
        let (c2, c3) = (c.clone(), c.clone());
        let w2 = thread::spawn(move || c2.wait(1, Timeout::Never));
        let w3 = thread::spawn(move || c3.wait(1, Timeout::Never));
        c.add(1).unwrap();
        assert_eq!(w2.join().unwrap(), Ok(()));
        assert_eq!(w3.join().unwrap(), Ok(()));
        assert!(!c.has_waiters());
    });
}

/// FI_WAIT_YIELD never sleeps: the spin/yield loop sees the add (loom's yield lets the adder
/// run, so a waiter that could never see the value would fail the model).
#[test]
fn yield_waiter_sees_the_add() {
    loom::model(|| {
        let c = counter(WaitStrategy::Yield);
        let c2 = c.clone();
        let adder = thread::spawn(move || c2.add(1).unwrap());
        assert_eq!(c.wait(1, Timeout::Never), Ok(()));
        adder.join().unwrap();
        assert!(!c.has_waiters(), "a yielding waiter registered itself");
    });
}

/// -FI_EAVAIL reaches a FI_WAIT_YIELD waiter too (it re-checks instead of sleeping).
#[test]
fn adderr_ends_a_yield_wait() {
    loom::model(|| {
        let c = counter(WaitStrategy::Yield);
        let started = Arc::new(AtomicBool::new(false));
        let (c2, started2) = (c.clone(), started.clone());
        let mutator = thread::spawn(move || {
            while !started2.load(SeqCst) {
                thread::yield_now();
            }
            c2.add_err(1).unwrap();
        });
        let r = c.wait_observed(1, Timeout::Never, || started.store(true, SeqCst));
        assert_eq!(r, Err(WaitError::ErrorChanged));
        mutator.join().unwrap();
    });
}

/// A poll (timeout 0) never blocks and never registers, whatever the add does meanwhile.
#[test]
fn poll_never_blocks() {
    loom::model(|| {
        let c = counter(WaitStrategy::Block);
        let c2 = c.clone();
        let adder = thread::spawn(move || c2.add(1).unwrap());
        let r = c.wait(1, Timeout::Poll);
        assert!(matches!(r, Ok(()) | Err(WaitError::TimedOut)), "{r:?}");
        adder.join().unwrap();
        assert!(!c.has_waiters());
    });
}

/// The fd contract (docs/user-guide.md, "The fd of an FI_WAIT_FD counter"): the application's loop
/// `while unmet(read()) { if trywait() == 0 { poll(fd) } }`. Whenever it decides to block
/// (trywait said 0 with the condition unmet), the mutation that will meet it must make the fd
/// readable, or poll() would sleep forever. Checked after both threads end.
fn fd_loop_never_misses(mutate: fn(&Counter), unmet: fn(&Counter) -> bool) {
    loom::model(move || {
        let c = counter(WaitStrategy::Fd);
        let c2 = c.clone();
        let mutator = thread::spawn(move || mutate(&c2));
        let mut blocked = false;
        // At most two rounds: the first trywait compares with the open-time snapshot; after a
        // -FI_EAGAIN the next one compares with what that call saw.
        for _ in 0..3 {
            let still_unmet = unmet(&c);
            match c.trywait() {
                Ok(()) => {
                    blocked = still_unmet;
                    break;
                }
                Err(TryWaitError::Pending) => continue,
                Err(TryWaitError::NoFd) => unreachable!(),
            }
        }
        mutator.join().unwrap();
        if blocked {
            assert!(c.fd_readable(), "poll() would sleep through the change");
        }
    });
}

#[test]
fn fd_is_signalled_after_trywait_by_add() {
    fd_loop_never_misses(|c| c.add(1).unwrap(), |c| c.read() < 1);
}

#[test]
fn fd_is_signalled_after_trywait_by_adderr() {
    fd_loop_never_misses(|c| c.add_err(1).unwrap(), |c| c.read_err() < 1);
}

/// A set back to the value trywait saw is still a change: trywait's snapshot counts sets, so
/// either trywait reports it (-FI_EAGAIN) or the set comes after the arming and signals.
#[test]
fn fd_is_signalled_after_trywait_by_a_set_to_the_same_value() {
    loom::model(|| {
        let c = counter(WaitStrategy::Fd);
        let c2 = c.clone();
        let setter = thread::spawn(move || c2.set(0).unwrap());
        let first = c.trywait();
        setter.join().unwrap();
        match first {
            Ok(()) => assert!(c.fd_readable(), "a set after arming went unnoticed"),
            Err(e) => assert_eq!(e, TryWaitError::Pending),
        }
    });
}

/// Two arm/signal rounds: the first change is consumed by the application (trywait says
/// -FI_EAGAIN or the fd fired), the re-armed fd must fire for the second.
#[test]
fn fd_rearms_for_the_next_change() {
    fd_loop_never_misses(
        |c| {
            c.add(1).unwrap();
            c.add(1).unwrap();
        },
        |c| c.read() < 2,
    );
}

// ---- Waiting on a counter that a source changes (a core provider, over a blocker) ----------

/// A core provider in the model: operations its "progress" completes (`completed`), which a
/// waiter takes into the counter by pulling, and the core's own blocking primitive, here a
/// condition variable that the core notifies after each completion (as a socket's readiness
/// or sockets' wait set does). The blocker is exact (no lost signal of its own), so a waiter
/// that sleeps with nobody to wake it is a lost wakeup of the counter's leader protocol.
struct ModelCore {
    completed: AtomicU64,
    seen: AtomicU64,
    /// The interrupt generation, and the condition variable the core and interrupts notify.
    generation: Mutex<u64>,
    cv: Condvar,
}

impl ModelCore {
    fn new() -> Arc<Self> {
        Arc::new(ModelCore {
            completed: AtomicU64::new(0),
            seen: AtomicU64::new(0),
            generation: Mutex::new(0),
            cv: Condvar::new(),
        })
    }

    /// The core completes one operation and wakes whoever blocks in it.
    fn complete(&self) {
        self.completed.fetch_add(1, SeqCst);
        let _g = self.generation.lock().unwrap();
        self.cv.notify_all();
    }
}

impl Blocker for ModelCore {
    fn prepare(&self) -> Token {
        Token(*self.generation.lock().unwrap())
    }
    fn arm(&self) -> bool {
        // Pending when the core completed something nobody pulled yet.
        self.completed.load(SeqCst) == self.seen.load(SeqCst)
    }
    fn block(&self, token: Token, _kick: &EventFd, _until: Option<std::time::Instant>) {
        let mut g = self.generation.lock().unwrap();
        while *g == token.0 && self.completed.load(SeqCst) == self.seen.load(SeqCst) {
            g = self.cv.wait(g).unwrap();
        }
    }
    fn interrupt(&self, _kick: &EventFd) {
        let mut g = self.generation.lock().unwrap();
        *g += 1;
        self.cv.notify_all();
    }
}

/// The source of one counter: pulling takes the core's new completions into it.
struct Bound<'a> {
    core: &'a ModelCore,
    counter: &'a Counter,
}

impl Source for Bound<'_> {
    fn pull(&self) {
        let now = self.core.completed.load(SeqCst);
        let last = self.core.seen.swap(now, SeqCst);
        if now > last {
            self.counter.add(now - last).unwrap();
        }
    }
    fn wake(&self) -> Wake<'_> {
        Wake::Block(self.core)
    }
}

fn wait_bound(c: &Counter, core: &ModelCore, threshold: u64) -> Result<(), WaitError> {
    c.wait_with(threshold, Timeout::Never, &Bound { core, counter: c })
}

/// A completion of the core wakes the waiter blocked in the core, wherever it lands.
#[test]
fn a_core_completion_wakes_the_blocked_leader() {
    loom::model(|| {
        let c = counter(WaitStrategy::Block);
        let core = ModelCore::new();
        let core2 = core.clone();
        let progress = thread::spawn(move || core2.complete());
        assert_eq!(wait_bound(&c, &core, 1), Ok(()));
        progress.join().unwrap();
        assert!(!c.has_waiters(), "the leader stayed registered");
    });
}

/// A mutation through the counter (fi_cntr_add from another thread) interrupts a waiter
/// blocked in the core, which nothing in the core would wake.
#[test]
fn an_add_interrupts_the_leader_blocked_in_the_core() {
    loom::model(|| {
        let c = counter(WaitStrategy::Fd);
        let core = ModelCore::new();
        let c2 = c.clone();
        let adder = thread::spawn(move || c2.add(1).unwrap());
        assert_eq!(wait_bound(&c, &core, 1), Ok(()));
        adder.join().unwrap();
    });
}

/// An error count changed after the wait began ends a wait blocked in the core.
#[test]
fn an_adderr_ends_a_wait_blocked_in_the_core() {
    loom::model(|| {
        let c = counter(WaitStrategy::Block);
        let core = ModelCore::new();
        let started = Arc::new(AtomicBool::new(false));
        let (c2, started2) = (c.clone(), started.clone());
        let mutator = thread::spawn(move || {
            while !started2.load(SeqCst) {
                thread::yield_now();
            }
            c2.add_err(1).unwrap();
        });
        let source = Bound {
            core: &core,
            counter: &c,
        };
        let r = c.wait_with_observed(1, Timeout::Never, &source, || started.store(true, SeqCst));
        assert_eq!(r, Err(WaitError::ErrorChanged));
        mutator.join().unwrap();
    });
}

/// Two waiters on one bound counter: one leads (blocks in the core), the other follows (on the
/// listener). The leader leaves at its threshold and the follower must take over: the second
/// completion is only seen by pulling, so a follower left asleep is a loom deadlock.
#[test]
fn a_follower_takes_over_when_the_leader_leaves() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(|| {
        let c = counter(WaitStrategy::Block);
        let core = ModelCore::new();
        let (c2, core2) = (c.clone(), core.clone());
        let second = thread::spawn(move || wait_bound(&c2, &core2, 2));
        let core3 = core.clone();
        let progress = thread::spawn(move || {
            core3.complete();
            core3.complete();
        });
        assert_eq!(wait_bound(&c, &core, 1), Ok(()));
        assert_eq!(second.join().unwrap(), Ok(()));
        progress.join().unwrap();
        assert!(!c.has_waiters());
    });
}

// ---- Waiters of several counters of one core domain: a room (src/engine/source.rs) ----------

use rscntr::engine::Room;

/// A core domain in the model: completions for either of two counters (`pending`), which the
/// progress of any waiter (a pull) counts straight into their counters, as tcp (hooked) and
/// FI_PEER cores do; one blocking primitive for the whole domain (tcp's progress fd), made
/// "readable" by every completion and by interrupts.
struct ModelDomain {
    pending: [AtomicU64; 2],
    counters: [Arc<Counter>; 2],
    generation: Mutex<u64>,
    cv: Condvar,
    room: Room,
}

impl ModelDomain {
    fn new(room: Room) -> Arc<Self> {
        Arc::new(ModelDomain {
            pending: [AtomicU64::new(0), AtomicU64::new(0)],
            counters: [counter(WaitStrategy::Block), counter(WaitStrategy::Block)],
            generation: Mutex::new(0),
            cv: Condvar::new(),
            room,
        })
    }

    /// The core completes an operation for counter `i`: only a pull counts it.
    fn complete(&self, i: usize) {
        self.pending[i].fetch_add(1, SeqCst);
        let _g = self.generation.lock().unwrap();
        self.cv.notify_all();
    }

    fn idle(&self) -> bool {
        self.pending.iter().all(|p| p.load(SeqCst) == 0)
    }

    /// Waiter `i` on its own counter, in the domain's room.
    fn wait(&self, i: usize) -> Result<(), WaitError> {
        self.counters[i].wait_with(1, Timeout::Never, &DomainSource(self))
    }
}

impl Blocker for ModelDomain {
    fn prepare(&self) -> Token {
        Token(*self.generation.lock().unwrap())
    }
    fn arm(&self) -> bool {
        self.idle()
    }
    fn block(&self, token: Token, _kick: &EventFd, _until: Option<std::time::Instant>) {
        let mut g = self.generation.lock().unwrap();
        while *g == token.0 && self.idle() {
            g = self.cv.wait(g).unwrap();
        }
    }
    fn interrupt(&self, _kick: &EventFd) {
        let mut g = self.generation.lock().unwrap();
        *g += 1;
        self.cv.notify_all();
    }
    fn room(&self) -> Option<&Room> {
        Some(&self.room)
    }
}

/// Every waiter's source: pulling drives the whole domain's progress.
struct DomainSource<'a>(&'a ModelDomain);

impl Source for DomainSource<'_> {
    fn pull(&self) {
        for (p, c) in self.0.pending.iter().zip(&self.0.counters) {
            let n = p.swap(0, SeqCst);
            if n > 0 {
                c.add(n).unwrap();
            }
        }
    }
    fn wake(&self) -> Wake<'_> {
        Wake::Block(self.0)
    }
}

/// The hand-off model: two waiters on two counters of one domain; the core completes the first
/// counter's operation, then the second's. Whoever leads when the first completes may be the
/// first waiter, which then leaves: the second completion is counted only by a pull, so a
/// follower left asleep without a leader is a loom deadlock.
fn handoff_model(room: fn() -> Room) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(move || {
        let d = ModelDomain::new(room());
        let d2 = d.clone();
        let second = thread::spawn(move || d2.wait(1));
        let d3 = d.clone();
        let progress = thread::spawn(move || {
            d3.complete(0);
            d3.complete(1);
        });
        assert_eq!(d.wait(0), Ok(()));
        assert_eq!(second.join().unwrap(), Ok(()));
        progress.join().unwrap();
        assert_eq!(d.room.members(), 0, "a member stayed in the room");
        assert!(d.counters.iter().all(|c| !c.has_waiters()));
    });
}

/// One completion per counter, two waiters in one room: each returns, whoever leads.
#[test]
fn a_room_leader_hands_off_to_a_follower() {
    handoff_model(Room::new);
}

/// The same with the hand-off planted out: the models must catch the lost wakeup.
#[test]
#[should_panic]
fn a_room_without_handoff_loses_a_wakeup() {
    handoff_model(Room::without_handoff);
}

/// A mutation of a follower's counter by another thread (fi_cntr_add) wakes it, without the
/// core, while another member leads.
#[test]
fn an_add_wakes_a_follower_in_a_room() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(|| {
        let d = ModelDomain::new(Room::new());
        let d2 = d.clone();
        let first = thread::spawn(move || d2.wait(0));
        let d3 = d.clone();
        let adder = thread::spawn(move || {
            d3.counters[1].add(1).unwrap();
            d3.complete(0);
        });
        assert_eq!(d.wait(1), Ok(()));
        assert_eq!(first.join().unwrap(), Ok(()));
        adder.join().unwrap();
        assert_eq!(d.room.members(), 0);
    });
}

// ---- triggered work (src/engine/trigger.rs) ------------------------------------------------------

use rscntr::engine::{Started, Starter, Tag, Work};

/// Work that records its start in `log` (its id), for the models below.
struct Record(Arc<Mutex<Vec<u32>>>, u32);
impl Work for Record {
    fn start(&mut self) -> Started {
        self.0.lock().unwrap().push(self.1);
        Started::Done
    }
}

fn record(log: &Arc<Mutex<Vec<u32>>>, id: u32) -> Box<dyn Work> {
    Box::new(Record(log.clone(), id))
}

const TAG: Tag = Tag { owner: 1, key: 0 };

/// Runs the starter until the counter's queue is empty (the models' stand-in for its thread).
fn drain(starter: &Starter, c: &Counter) {
    while c.triggers().is_some_and(|t| !t.is_empty()) {
        starter.run();
        thread::yield_now();
    }
}

/// No trigger lost: work queued while another thread adds the count that meets it starts,
/// whichever comes first (the push's own check, or the add's observation).
#[test]
fn an_add_racing_a_push_starts_the_work() {
    loom::model(|| {
        let c = counter(WaitStrategy::None);
        let starter = Starter::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        let c2 = c.clone();
        let adder = thread::spawn(move || c2.add(1).unwrap());
        c.trigger(&starter, 1, TAG, record(&log, 1));
        adder.join().unwrap();
        drain(&starter, &c);
        assert_eq!(*log.lock().unwrap(), vec![1]);
    });
}

/// Thresholds start in order even when one add meets several, and never early.
#[test]
fn a_jump_starts_work_in_threshold_order() {
    loom::model(|| {
        let c = counter(WaitStrategy::None);
        let starter = Starter::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        c.trigger(&starter, 2, TAG, record(&log, 2));
        c.trigger(&starter, 1, TAG, record(&log, 1));
        c.trigger(&starter, 3, TAG, record(&log, 3));
        let c2 = c.clone();
        let adder = thread::spawn(move || c2.add(2).unwrap());
        let s2 = starter.clone();
        let runner = thread::spawn(move || {
            s2.run();
        });
        adder.join().unwrap();
        runner.join().unwrap();
        starter.run();
        assert_eq!(*log.lock().unwrap(), vec![1, 2], "threshold 3 must wait");
    });
}

/// Cancel against the starter: the work starts or is cancelled, exactly once.
#[test]
fn cancel_racing_the_starter_takes_or_leaves_the_work_once() {
    loom::model(|| {
        let c = counter(WaitStrategy::None);
        let starter = Starter::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        c.trigger(&starter, 1, TAG, record(&log, 1));
        c.add(1).unwrap();
        let c2 = c.clone();
        let canceller = thread::spawn(move || c2.triggers().unwrap().cancel(|t| t == TAG));
        starter.run();
        let cancelled = canceller.join().unwrap();
        let started = log.lock().unwrap().len();
        assert_eq!(
            cancelled + started,
            1,
            "cancelled {cancelled}, started {started}"
        );
        assert!(c.triggers().unwrap().is_empty());
    });
}

// ---- closing what queued work names (src/engine/trigger.rs: Holds) ---------------------------

use rscntr::engine::Holds;

/// An object queued work names (a counter as its trigger, target or completion counter) that
/// the application closes: `freed` once its close succeeded. Every access of the work checks
/// it first (loom also runs the orders in which the close lands between the check and the
/// access, so a use after the close fails the model).
struct Closable {
    holds: Holds,
    freed: AtomicBool,
}

impl Closable {
    fn live(&self, what: &str) -> &Holds {
        assert!(
            !self.freed.load(SeqCst),
            "queued work used a closed object: {what}"
        );
        &self.holds
    }

    /// The close: -FI_EBUSY (false) while work holds the object or uses it past the wait.
    fn close(&self) -> bool {
        if self.holds.outstanding() != 0 {
            return false;
        }
        self.freed.store(true, SeqCst);
        true
    }
}

/// Work that uses `obj` as a triggered operation uses its counter (layer/trigger/endpoint.rs,
/// Triggered): held from submission; on start the hold becomes a use for the post; after a
/// post the core refuses for now (-FI_EAGAIN, `again` times) the use becomes a hold again and
/// the work stays queued; dropped unstarted (cancelled), it lets the hold go.
struct Holding {
    obj: Arc<Closable>,
    again: u32,
    held: bool,
    started: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
}

impl Work for Holding {
    fn start(&mut self) -> Started {
        let attempt = if self.again > 0 {
            "first start"
        } else {
            "last start"
        };
        self.obj.live(attempt).begin_use();
        self.held = false;
        if self.again > 0 {
            self.again -= 1;
            self.obj.live("held again after -FI_EAGAIN").hold_again();
            self.held = true;
            return Started::Again;
        }
        self.started.fetch_add(1, SeqCst);
        self.obj.live("use ends").end_use();
        Started::Done
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        if self.held {
            self.obj.live("cancelled: hold released").release();
            self.dropped.fetch_add(1, SeqCst);
        }
    }
}

/// Close against the starter: a counter's close (-FI_EBUSY while queued work holds it, then
/// the application cancels and closes again) races an add that makes the work due and the
/// starter starting it, whose first post the core refuses for now. The work starts once or is
/// cancelled once, never both, never neither; the close succeeds in the end, and nothing
/// touches the counter after it.
#[test]
fn close_racing_the_starter_frees_nothing_in_use() {
    // Unbounded: about 10 s (release).
    loom::model(|| {
        let c = counter(WaitStrategy::None);
        let starter = Starter::new();
        let obj = Arc::new(Closable {
            holds: Holds::new(),
            freed: AtomicBool::new(false),
        });
        let (started, dropped) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        obj.holds.hold();
        let work = Holding {
            obj: obj.clone(),
            again: 1,
            held: true,
            started: started.clone(),
            dropped: dropped.clone(),
        };
        c.trigger(&starter, 1, TAG, Box::new(work));
        let c2 = c.clone();
        let adder = thread::spawn(move || c2.add(1).unwrap());
        let (c3, s3) = (c.clone(), starter.clone());
        let runner = thread::spawn(move || drain(&s3, &c3));
        // The application: close, and on -FI_EBUSY cancel what is queued and close again.
        while !obj.close() {
            c.triggers().unwrap().cancel(|t| t == TAG);
            thread::yield_now();
        }
        adder.join().unwrap();
        runner.join().unwrap();
        let (s, d) = (started.load(SeqCst), dropped.load(SeqCst));
        assert_eq!(s + d, 1, "started {s}, cancelled {d}");
    });
}

/// A count owed to rscntr's own operation (`Counter::owe`) comes out of whichever core count
/// comes first, the operation's or the application's: in every interleaving the value never
/// reads more than the application's one operation, nor wraps, and ends at exactly 1.
#[test]
fn an_owed_count_never_shows() {
    loom::model(|| {
        let c = counter(WaitStrategy::Block);
        c.owe(1);
        let (ours, apps) = (c.clone(), c.clone());
        let ours = thread::spawn(move || ours.add_counted(1).unwrap());
        let apps = thread::spawn(move || apps.add_counted(1).unwrap());
        let seen = c.read();
        assert!(
            seen <= 1,
            "read {seen} with one operation of the application's"
        );
        ours.join().unwrap();
        apps.join().unwrap();
        assert_eq!((c.read(), c.owed()), (1, 0));
    });
}

/// Forgiving the owed count (the core refused the operation) while the application's count
/// comes: cancelled or given back, the value ends at exactly 1 and never reads more.
#[test]
fn a_forgiven_count_is_given_back_once() {
    loom::model(|| {
        let c = counter(WaitStrategy::Block);
        c.owe(1);
        let apps = c.clone();
        let apps = thread::spawn(move || apps.add_counted(1).unwrap());
        c.forgive(1).unwrap();
        let seen = c.read();
        assert!(
            seen <= 1,
            "read {seen} with one operation of the application's"
        );
        apps.join().unwrap();
        assert_eq!((c.read(), c.owed()), (1, 0));
    });
}

// ---- The doorbell (src/engine/bell.rs): sleepers over shared memory and a worker -----------

/// What one sleeper of the model waits for: its way's ring, a flag and a condition.
type Bell = Arc<(Mutex<bool>, Condvar)>;

/// A sleeper of `way`: arms, looks for work, arms again if a worker rang meanwhile, then sleeps
/// until rung. The sleep returns only when rung: a lost wake is a deadlock loom reports.
fn sleep_until_work(
    word: &rscntr::engine::bell::AtomicU32,
    way: u32,
    work: &AtomicU64,
    bell: &Bell,
) {
    use rscntr::engine::bell;
    let mut armed = bell::arm(word, way);
    loop {
        if work.load(Relaxed) != 0 {
            return;
        }
        if armed {
            // Asleep until rung: the worker's work is then visible (its ring came after).
            let mut r = bell.0.lock().unwrap();
            while !*r {
                r = bell.1.wait(r).unwrap();
            }
            *r = false;
        }
        armed = bell::arm(word, way);
    }
}

/// A worker publishes work (a plain store, as a core's queue write), then rings each way
/// `rings` says; sleepers of each of `ways` wait for it.
fn doorbell_model(rings: fn(&rscntr::engine::bell::AtomicU32) -> u32, ways: &'static [u32]) {
    use rscntr::engine::bell;
    let mut b = loom::model::Builder::new();
    // Three threads explore for minutes unbounded; a lost wake needs one preemption.
    if ways.len() > 1 {
        b.preemption_bound = Some(2);
    }
    b.check(move || {
        let word = Arc::new(bell::AtomicU32::new(0));
        let work = Arc::new(AtomicU64::new(0));
        let bells: Vec<Bell> = ways
            .iter()
            .map(|_| Arc::new((Mutex::new(false), Condvar::new())))
            .collect();
        let worker = {
            let (word, work, bells) = (word.clone(), work.clone(), bells.clone());
            thread::spawn(move || {
                work.store(1, Relaxed);
                let rung = rings(&word);
                for (way, b) in ways.iter().zip(&bells) {
                    if rung & way != 0 {
                        *b.0.lock().unwrap() = true;
                        b.1.notify_one();
                    }
                }
            })
        };
        let others: Vec<_> = ways[1..]
            .iter()
            .zip(&bells[1..])
            .map(|(&way, b)| {
                let (word, work, b) = (word.clone(), work.clone(), b.clone());
                thread::spawn(move || sleep_until_work(&word, way, &work, &b))
            })
            .collect();
        sleep_until_work(&word, ways[0], &work, &bells[0]);
        for o in others {
            o.join().unwrap();
        }
        worker.join().unwrap();
    });
}

/// No lost wake: the sleeper's look after arming sees the work, or the worker sees it armed.
#[test]
fn a_doorbell_rings_for_work_the_sleeper_missed() {
    doorbell_model(rscntr::engine::bell::rings, &[rscntr::engine::bell::FUTEX]);
}

/// Two sleepers that sleep two ways (a futex, a socket) on one word: each is rung its way.
#[test]
fn a_doorbell_rings_each_way_of_sleeping() {
    use rscntr::engine::bell::{FUTEX, SOCKET, rings};
    doorbell_model(rings, &[FUTEX, SOCKET]);
}

/// The planted lost wake: a worker that loads the armed word without its fence may load it
/// before its own work is visible; the models must catch it.
#[test]
#[should_panic]
fn a_doorbell_without_its_fence_loses_a_wake() {
    doorbell_model(
        rscntr::engine::bell::rings_after_fence,
        &[rscntr::engine::bell::FUTEX],
    );
}

/// A slot word (`engine::bell::rings_slots`, the layer's `SlotBlocker`): a sleeper arms its own
/// bit as a way; the worker wakes the bits its work is for.
#[test]
fn a_slot_doorbell_rings_for_work_the_sleeper_missed() {
    doorbell_model(|w| rscntr::engine::bell::rings_slots(w, 1 << 5), &[1 << 5]);
}

/// Two sleepers on their own bits of one slot word, both waiting for the work: each is rung.
#[test]
fn a_slot_doorbell_rings_each_slot() {
    doorbell_model(
        |w| rscntr::engine::bell::rings_slots(w, 1 << 3 | 1 << 30),
        &[1 << 3, 1 << 30],
    );
}

/// The planted lost wake of the slot words: the worker loads them without its fence.
#[test]
#[should_panic]
fn a_slot_doorbell_without_its_fence_loses_a_wake() {
    doorbell_model(
        |w| rscntr::engine::bell::rings_slots_after_fence(w, 1),
        &[1],
    );
}

/// How a worker of the hints model rings: publishes nothing itself (the model did), leaves
/// `bit` in `hints` as its hint, returns the ways to ring.
type HintedRing = fn(&rscntr::engine::bell::AtomicU32, &AtomicU64, u64) -> u32;

/// The hints (`engine::bell::RUNG`): two workers publish work in two places (a hint bit each)
/// and ring; the sleeper, once rung, looks after each arming only where the hints point. It
/// must see both works: a wake lost to a hint it took too early is a deadlock loom reports.
fn hinted_doorbell_model(ring: HintedRing) {
    use rscntr::engine::bell;
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(move || {
        let word = Arc::new(bell::AtomicU32::new(0));
        let hints = Arc::new(AtomicU64::new(0));
        let work = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let rung: Bell = Arc::new((Mutex::new(false), Condvar::new()));
        let workers: Vec<_> = (0..2)
            .map(|i| {
                let (word, hints, work, rung) =
                    (word.clone(), hints.clone(), work.clone(), rung.clone());
                thread::spawn(move || {
                    work[i].store(1, Relaxed);
                    if ring(&word, &hints, 1 << i) & bell::FUTEX != 0 {
                        *rung.0.lock().unwrap() = true;
                        rung.1.notify_one();
                    }
                })
            })
            .collect();
        let mut seen = [false, false];
        loop {
            let was = bell::arm_seeing(&word, bell::FUTEX);
            // The look: everywhere, or, the word rung, where the hints point.
            let look = if was & bell::RUNG != 0 {
                hints.swap(0, SeqCst)
            } else {
                0b11
            };
            for (i, s) in seen.iter_mut().enumerate() {
                if look & (1 << i) != 0 && work[i].load(Relaxed) != 0 {
                    *s = true;
                }
            }
            if seen == [true, true] {
                break;
            }
            if was & bell::FUTEX != 0 {
                // Armed before this look: asleep until rung.
                let mut r = rung.0.lock().unwrap();
                while !*r {
                    r = rung.1.wait(r).unwrap();
                }
                *r = false;
            }
        }
        for w in workers {
            w.join().unwrap();
        }
    });
}

/// No work lost to the hints: whatever a worker published after the ring that set `RUNG`, the
/// sleeper's hinted look finds, or the worker's second look sees it armed and rings.
#[test]
fn a_hinted_look_misses_no_work() {
    hinted_doorbell_model(|word, hints, bit| {
        rscntr::engine::bell::rings_telling(word, || {
            hints.fetch_or(bit, SeqCst);
        })
    });
}

/// The planted lost wake: a worker that leaves its hint and does not look at the word again.
#[test]
#[should_panic]
fn a_worker_without_its_second_look_loses_a_wake() {
    hinted_doorbell_model(|word, hints, bit| {
        rscntr::engine::bell::rings_without_second_look(word, || {
            hints.fetch_or(bit, SeqCst);
        })
    });
}
