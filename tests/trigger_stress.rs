//! The trigger queue (`src/engine/trigger.rs`) under load, without libfabric: eight threads
//! change one counter (adds and adderrs, or a set that jumps it across many thresholds) while
//! the test's thread queues 20000 works on it, in step with them, with thresholds around the
//! count of the moment and ties (some met at submission, started in the submitting thread as
//! `AnyCntr::queue_work` does; some due later, started by the process's trigger thread), then
//! 200 more after the count's last change. Every work records its start. At the end:
//!
//! * every work started exactly once, and none was dropped unstarted;
//! * none started before its threshold was met (the count only grows in these tests);
//! * the starts are in threshold order, ties in submission order: when a work starts, no work
//!   with a lower (threshold, submission) that was queued before the previous start began is
//!   still waiting. (One queued after that may legitimately start later: the queue may have
//!   taken the starting work out before it came.)
//!
//! Variants: adds and adderrs; the same with one work in seven refused once (`Again`); a set
//! jumping across some 300 thresholds at a time. Each takes under 0.3 s, release or debug.
#![cfg(not(loom))]

use rscntr::engine::{Counter, Started, Starter, Tag, WaitStrategy, Work};
use std::collections::BTreeSet;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const THREADS: u64 = 8;
/// Works queued while the count changes, and after its last change.
const WORKS: usize = 20_000;
const LATE: usize = 200;
const ALL: usize = WORKS + LATE;
/// How long the end may take to settle (the trigger thread starting the last works).
const SETTLE: Duration = Duration::from_secs(5);

/// One stamp clock for submissions and starts, so that the two can be compared.
#[derive(Default)]
struct Shared {
    clock: AtomicU64,
    /// (work, stamp, count seen at the start), in start order (starts are one at a time per
    /// counter, so the stamps come out increasing).
    starts: Mutex<Vec<(usize, u64, u64)>>,
    /// Works dropped without having started.
    dropped: AtomicU64,
    /// Works that answered `Again` (retried later).
    refused: AtomicU64,
}

struct Record {
    id: usize,
    /// Times to answer `Again` before starting.
    again: u32,
    started: bool,
    counter: Arc<Counter>,
    shared: Arc<Shared>,
}

impl Work for Record {
    fn start(&mut self) -> Started {
        let count = self.counter.count();
        if self.again > 0 {
            self.again -= 1;
            self.shared.refused.fetch_add(1, SeqCst);
            return Started::Again;
        }
        // Checked at the end: a panic here would end the trigger thread.
        let stamp = self.shared.clock.fetch_add(1, SeqCst);
        self.shared
            .starts
            .lock()
            .unwrap()
            .push((self.id, stamp, count));
        self.started = true;
        Started::Done
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        if !self.started {
            self.shared.dropped.fetch_add(1, SeqCst);
        }
    }
}

/// A deterministic pseudo-random sequence (the tests must not depend on luck).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// What a variant's mutator threads do: thread `i` makes `ops(i)` changes, the `k`-th by
/// `op(i, k, counter)`; `total` is the count at the end. Their first nine tenths go in step
/// with the submissions (neither side more than a step of [`STEPS`] ahead), the last tenth
/// once the submitter is done, so that work is still waiting then, for the trigger thread.
struct Load {
    total: u64,
    ops: fn(u64) -> u64,
    op: fn(u64, u64, &Counter),
}

const STEPS: u64 = 50;

/// How far each side got, in steps.
struct Pace {
    submitter: AtomicU64,
    mutators: Vec<AtomicU64>,
    submitted: AtomicBool,
}

impl Pace {
    fn slowest_mutator(&self) -> u64 {
        self.mutators.iter().map(|m| m.load(SeqCst)).min().unwrap()
    }
}

/// What a work queued at submission `i` (of WORKS) saw.
struct Sub {
    threshold: u64,
    /// The stamp after its submission returned (it was in the queue by then).
    queued_at: u64,
}

fn run(load: Load, again_every: usize) {
    let t0 = Instant::now();
    let c = Arc::new(Counter::new(WaitStrategy::None).expect("counter"));
    let starter = Starter::global();
    let shared = Arc::new(Shared::default());
    let load = Arc::new(load);
    let pace = Arc::new(Pace {
        submitter: AtomicU64::new(0),
        mutators: (0..THREADS).map(|_| AtomicU64::new(0)).collect(),
        submitted: AtomicBool::new(false),
    });
    let mutators: Vec<_> = (0..THREADS)
        .map(|i| {
            let (c, load, pace) = (c.clone(), load.clone(), pace.clone());
            thread::spawn(move || {
                let n = (load.ops)(i);
                let in_step = n - n / 10;
                for k in 0..n {
                    if k < in_step {
                        let step = k * STEPS / in_step;
                        pace.mutators[i as usize].store(step, SeqCst);
                        while pace.submitter.load(SeqCst) + 1 < step {
                            thread::yield_now();
                        }
                    } else if k == in_step {
                        pace.mutators[i as usize].store(STEPS, SeqCst);
                        while !pace.submitted.load(SeqCst) {
                            thread::yield_now();
                        }
                    }
                    (load.op)(i, k, &c);
                }
            })
        })
        .collect();

    let tag = Tag { owner: 1, key: 0 };
    let spread = load.total / 8;
    let mut rng = Lcg(0x5eed);
    let mut subs: Vec<Sub> = Vec::with_capacity(ALL);
    let (mut met, mut waiting) = (0, 0);
    let mut submit = |subs: &mut Vec<Sub>, threshold: u64| {
        let id = subs.len();
        let work = Record {
            id,
            again: u32::from(again_every != 0 && id.is_multiple_of(again_every)),
            started: false,
            counter: c.clone(),
            shared: shared.clone(),
        };
        // As AnyCntr::queue_work: work due at submission starts in the submitting thread.
        let due = c.trigger(&starter, threshold, tag, Box::new(work));
        let queued_at = shared.clock.fetch_add(1, SeqCst);
        if due {
            met += 1;
            c.triggers().expect("queued").start_now();
        } else {
            waiting += 1;
        }
        subs.push(Sub {
            threshold,
            queued_at,
        });
    };
    let count_at_first = c.count();
    for id in 0..WORKS {
        let step = id as u64 * STEPS / WORKS as u64;
        pace.submitter.store(step, SeqCst);
        while pace.slowest_mutator() + 1 < step {
            assert!(t0.elapsed() < SETTLE, "the mutators do not keep up");
            thread::yield_now();
        }
        let threshold = if id % 4 == 3 {
            // A tie with the previous one.
            subs[id - 1].threshold
        } else {
            let now = c.count();
            let offset = rng.next() % (2 * spread + 1);
            (now + offset).saturating_sub(spread).clamp(1, load.total)
        };
        submit(&mut subs, threshold);
    }
    let count_at_last = c.count();
    pace.submitted.store(true, SeqCst);
    for m in mutators {
        m.join().unwrap();
    }
    assert_eq!(c.count(), load.total, "the mutators' count");
    // After the last change: met at submission, nothing else to make them due.
    for id in WORKS..ALL {
        let threshold = if id % 4 == 3 {
            subs[id - 1].threshold
        } else {
            1 + rng.next() % load.total
        };
        submit(&mut subs, threshold);
    }
    while shared.starts.lock().unwrap().len() < ALL && t0.elapsed() < SETTLE * 2 {
        thread::sleep(Duration::from_millis(1));
    }
    // Anything late would show here.
    thread::sleep(Duration::from_millis(20));
    let starts = shared.starts.lock().unwrap().clone();
    assert!(
        met > 0 && waiting > 0,
        "the submissions should meet some thresholds at once and leave others waiting: \
         {met} met, {waiting} waiting"
    );

    // Exactly once.
    let mut times = vec![0u32; ALL];
    for &(id, ..) in &starts {
        times[id] += 1;
    }
    let wrong: Vec<_> = (0..ALL).filter(|&id| times[id] != 1).collect();
    assert!(
        wrong.is_empty(),
        "{} works did not start exactly once (first: work {} x{}, threshold {})",
        wrong.len(),
        wrong[0],
        times[wrong[0]],
        subs[wrong[0]].threshold
    );
    assert_eq!(shared.dropped.load(SeqCst), 0, "works dropped unstarted");
    assert!(c.triggers().unwrap().is_empty(), "works left in the queue");
    assert!(
        starts.windows(2).all(|w| w[0].1 < w[1].1),
        "starts overlapped"
    );

    // Order: sweep the starts; `known` holds the works queued before the previous start
    // began and not started yet. The starting one must be the lowest of them.
    let key = |id: usize| (subs[id].threshold, id);
    let early: Vec<_> = starts
        .iter()
        .filter(|&&(id, _, count)| count < subs[id].threshold)
        .collect();
    assert!(
        early.is_empty(),
        "{} works started before their threshold (first: work {}, threshold {}, at count {})",
        early.len(),
        early[0].0,
        subs[early[0].0].threshold,
        early[0].2
    );
    let mut by_queued: Vec<usize> = (0..ALL).collect();
    by_queued.sort_by_key(|&id| subs[id].queued_at);
    let mut next = 0;
    let mut known: BTreeSet<(u64, usize)> = BTreeSet::new();
    let mut previous_start = 0;
    let mut started = vec![false; ALL];
    for (n, &(id, stamp, count)) in starts.iter().enumerate() {
        if n > 0 {
            while next < ALL && subs[by_queued[next]].queued_at < previous_start {
                let q = by_queued[next];
                if !started[q] {
                    known.insert(key(q));
                }
                next += 1;
            }
        }
        if let Some(&(lt, lid)) = known.first() {
            assert!(
                (lt, lid) >= key(id),
                "start {n}: work {id} (threshold {}, count {count}) started while work {lid} \
                 (threshold {lt}, queued before the previous start) still waited",
                subs[id].threshold
            );
        }
        known.remove(&key(id));
        started[id] = true;
        previous_start = stamp;
    }
    eprintln!(
        "{ALL} works ({met} met at submission, {waiting} waiting; {} answers Again), \
         submitted while the count went {count_at_first} -> {count_at_last} (of {}), in {:?}",
        shared.refused.load(SeqCst),
        load.total,
        t0.elapsed()
    );
}

const ADDS: u64 = 50_000;

/// fi_cntr_add and fi_cntr_adderr by eight threads: 1 in 8 changes adds an error, which
/// counts towards thresholds like a success.
fn add_load() -> Load {
    Load {
        total: THREADS * ADDS,
        ops: |_| ADDS,
        op: |_, k, c| {
            if k % 8 == 7 {
                c.add_err(1).unwrap()
            } else {
                c.add(1).unwrap()
            }
        },
    }
}

#[test]
fn adds_from_many_threads_start_each_work_once_in_order() {
    run(add_load(), 0);
}

/// The same with one work in seven refused once (a core's -FI_EAGAIN): it stays at the head
/// of the queue and is tried again, before anything queued after it.
#[test]
fn refused_starts_are_tried_again_in_order() {
    run(add_load(), 7);
}

const JUMPS: u64 = 50;
const JUMP: u64 = 8_000;
const ERRS: u64 = 10_000;

/// One thread sets the value in 50 jumps (each across some 300 thresholds) while seven add
/// errors; the count (value plus errors) only grows.
#[test]
fn a_set_jumping_across_thresholds_starts_them_in_order() {
    run(
        Load {
            total: JUMPS * JUMP + (THREADS - 1) * ERRS,
            ops: |i| if i == 0 { JUMPS } else { ERRS },
            op: |i, k, c| {
                if i == 0 {
                    c.set((k + 1) * JUMP).unwrap()
                } else {
                    c.add_err(1).unwrap()
                }
            },
        },
        0,
    );
}
