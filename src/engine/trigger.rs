//! Work that waits on a counter: triggered operations and deferred work.
//!
//! A counter with such work has a [`Triggers`] queue of it, ordered by threshold and then by
//! submission (fi_trigger(3): "in the order of the threshold values ... even if the counter
//! increments by a value greater than 1", ties in submission order). The work is due once the
//! counter's count, its value plus its error count, reaches the threshold. One [`Starter`]
//! starts what is due, in that order, from its own thread.
//!
//! A mutation of the counter never starts work itself: it runs inside whatever changed the
//! counter, often a core provider's progress under the core's own lock, where posting more
//! work to the core could deadlock or recurse. It only notes the count it saw (`due`) and
//! hands the queue to the starter, which wakes at once.
//!
//! # No trigger lost
//! A push inserts the work and lowers `next` (the lowest queued threshold) under the queue's
//! lock, then sets the counter's `TRIGGERS` bit in `wake`, then reads the count and checks it
//! itself. A mutation writes the count, then loads `wake`, and with the bit set reads the count
//! and compares it with `next`. Both sides write, then read the other side's word, `SeqCst`: so
//! either the mutation sees the bit (and, after it, `next`), or the push's own read sees the
//! mutation. The counter side is in `counter.rs`; `tests/loom_wait.rs` models both, and the
//! starter against cancel.
//!
//! A counter that never had triggered work has the bit clear and pays nothing; one that had
//! keeps it, and each mutation then also reads the count and `next`.

use super::sync::{AtomicBool, AtomicU64, Mutex};
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

/// What starting one piece of work gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Started {
    /// It started (or failed in a way it reported itself): it leaves the queue.
    Done,
    /// Its target could not take it now (a core's -FI_EAGAIN): it stays at the head of its
    /// queue, before everything queued after it, and is tried again shortly.
    Again,
}

/// A piece of triggered work. Dropping it without starting it (cancel, flush) must release
/// whatever it holds.
pub trait Work: Send {
    fn start(&mut self) -> Started;
}

/// Who queued a piece of work and which it is, for cancelling: the endpoint or domain it
/// belongs to, and the application's handle for it (a context or a work request).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tag {
    pub owner: usize,
    pub key: usize,
}

struct Entry {
    threshold: u64,
    seq: u64,
    tag: Tag,
    work: Box<dyn Work>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.threshold, self.seq) == (other.threshold, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed: `BinaryHeap` is a max-heap, the lowest (threshold, seq) must come out first.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.threshold, other.seq).cmp(&(self.threshold, self.seq))
    }
}

#[derive(Default)]
struct Queue {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl Queue {
    fn lowest(&self) -> u64 {
        self.heap.peek().map_or(u64::MAX, |e| e.threshold)
    }
}

/// One counter's queue of triggered work.
pub struct Triggers {
    /// The lowest queued threshold; `u64::MAX` when nothing is queued.
    next: AtomicU64,
    /// One more than the highest count seen at or above `next` and not yet handled by the
    /// starter; 0 when none. (A count only ever seen is enough: work due at any moment stays
    /// due, even if a set lowers the count before the starter runs.)
    due: AtomicU64,
    /// On the starter's list, or about to be.
    scheduled: AtomicBool,
    queue: Mutex<Queue>,
    /// Held while work is being started, by the starter or by a submitter starting what is
    /// due at once: one at a time, so work starts in order.
    starting: Mutex<()>,
    starter: Arc<Starter>,
}

impl std::fmt::Debug for Triggers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Triggers")
            .field("next", &self.next.load(SeqCst))
            .field("queued", &self.len())
            .finish_non_exhaustive()
    }
}

impl Triggers {
    pub fn new(starter: Arc<Starter>) -> Arc<Self> {
        Arc::new(Triggers {
            next: AtomicU64::new(u64::MAX),
            due: AtomicU64::new(0),
            scheduled: AtomicBool::new(false),
            queue: Mutex::new(Queue::default()),
            starting: Mutex::new(()),
            starter,
        })
    }

    /// Queues `work` for when the count reaches `threshold`. The caller then sets the
    /// counter's bit and calls [`Triggers::observe`] with the count it reads after (see the
    /// module doc); [`crate::engine::Counter::trigger`] does all three.
    pub(crate) fn insert(&self, threshold: u64, tag: Tag, work: Box<dyn Work>) {
        let mut q = self.queue.lock();
        let seq = q.seq;
        q.seq += 1;
        q.heap.push(Entry {
            threshold,
            seq,
            tag,
            work,
        });
        self.next.store(q.lowest(), SeqCst);
    }

    /// A mutation (or a push) saw `count`: if work is due, the starter gets the queue.
    #[inline]
    pub fn observe(self: &Arc<Self>, count: u64) {
        if count >= self.next.load(SeqCst) {
            self.due.fetch_max(count.saturating_add(1), SeqCst);
            if !self.scheduled.swap(true, SeqCst) {
                self.starter.schedule(self.clone());
            }
        }
    }

    /// How much work is queued.
    pub fn len(&self) -> usize {
        self.queue.lock().heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes out the queued work `pick` chooses (work already being started is not queued),
    /// for the caller to drop; returns how many.
    pub fn cancel(&self, mut pick: impl FnMut(Tag) -> bool) -> usize {
        let taken: Vec<Entry>;
        {
            let mut q = self.queue.lock();
            let (out, keep): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut q.heap)
                .into_iter()
                .partition(|e| pick(e.tag));
            q.heap = keep.into();
            self.next.store(q.lowest(), SeqCst);
            taken = out;
        }
        let n = taken.len();
        // Dropped outside the lock: a work's drop may release what it holds.
        drop(taken);
        n
    }

    /// Starts what is due now in the calling thread, in order (a submission whose threshold
    /// is met at once: fi_trigger(3) "the data transfer may be initiated immediately"). Never
    /// call it from inside a core's callback. Work answering `Again` goes to the starter.
    pub fn start_now(self: &Arc<Self>) {
        if !self.start_due() && !self.scheduled.swap(true, SeqCst) {
            self.starter.schedule(self.clone());
        }
    }

    /// Starts the work due at the count last observed, in order. Returns false if a work
    /// answered `Again`: it and what follows stay queued, and the queue is due again.
    fn start_due(&self) -> bool {
        let _one_at_a_time = self.starting.lock();
        let due = self.due.swap(0, SeqCst);
        if due == 0 {
            return true;
        }
        let count = due - 1;
        loop {
            let mut entry = {
                let mut q = self.queue.lock();
                match q.heap.peek() {
                    Some(e) if e.threshold <= count => {}
                    _ => return true,
                }
                let e = q.heap.pop().unwrap();
                self.next.store(q.lowest(), SeqCst);
                e
            };
            // Outside the lock: starting posts to a core, whose completions may count into
            // this very counter and observe it again.
            match entry.work.start() {
                Started::Done => {}
                Started::Again => {
                    let mut q = self.queue.lock();
                    q.heap.push(entry);
                    self.next.store(q.lowest(), SeqCst);
                    drop(q);
                    self.due.fetch_max(due, SeqCst);
                    return false;
                }
            }
        }
    }
}

/// What queued work holds of an object it names (a counter, as its trigger, target or
/// completion counter), which must not be freed while any is held: a hold per queued work,
/// which becomes a use while the work is being started. A close refuses while work holds the
/// object and waits out uses (microseconds: the application may have seen the work's effect
/// already). The object's close asks [`Holds::outstanding`].
///
/// Holds and uses are one word (holds in the low half, uses in the high half), so that each
/// change (a hold becoming a use, or a use becoming a hold again) is one atomic step and a
/// close reads both at one instant. With two words a close could read no hold while a start
/// used the object, then no use once the start (its post refused for now) held it again: it
/// freed what the requeued work starts from (`tests/loom_wait.rs`,
/// `close_racing_the_starter_frees_nothing_in_use`).
#[derive(Debug)]
pub struct Holds(AtomicU64);

/// One use, in [`Holds`]'s word.
const USE: u64 = 1 << 32;

impl Default for Holds {
    fn default() -> Self {
        Self::new()
    }
}

impl Holds {
    pub fn new() -> Self {
        Holds(AtomicU64::new(0))
    }

    /// Queued work names the object: it cannot close until [`Holds::release`] (the work was
    /// dropped without starting) or [`Holds::begin_use`].
    pub fn hold(&self) {
        self.0.fetch_add(1, SeqCst);
    }

    pub fn release(&self) {
        self.0.fetch_sub(1, SeqCst);
    }

    /// The work holding the object starts: its hold becomes a use that a close waits out,
    /// until [`Holds::end_use`] or [`Holds::hold_again`].
    pub fn begin_use(&self) {
        // One hold less, one use more (the caller has a hold).
        self.0.fetch_add(USE - 1, SeqCst);
    }

    /// Work that holds the object otherwise (deferred work, which its endpoint's deferred
    /// count holds until the work's completion) uses it while it is started: a close waits it
    /// out, until [`Holds::end_use`].
    pub fn begin_unheld_use(&self) {
        self.0.fetch_add(USE, SeqCst);
    }

    pub fn end_use(&self) {
        self.0.fetch_sub(USE, SeqCst);
    }

    /// The work did not start after all (its target answered -FI_EAGAIN) and is queued
    /// again: its use becomes a hold.
    pub fn hold_again(&self) {
        self.0.fetch_sub(USE - 1, SeqCst);
    }

    /// Work that names the object, after waiting for work being started to finish with it.
    /// Outside loom the wait lasts a second at most; what is still in use then counts.
    pub fn outstanding(&self) -> u64 {
        #[cfg(not(loom))]
        let t0 = std::time::Instant::now();
        loop {
            let w = self.0.load(SeqCst);
            #[cfg(not(loom))]
            let waited_enough = t0.elapsed().as_secs() >= 1;
            #[cfg(loom)]
            let waited_enough = false;
            if w < USE || waited_enough {
                return (w & (USE - 1)) + (w >> 32);
            }
            super::sync::yield_now();
        }
    }
}

/// Starts due work: a list of queues that have some, and (outside loom) one thread that runs
/// it, started at the first work queued in the process.
pub struct Starter {
    list: Mutex<Vec<Arc<Triggers>>>,
    #[cfg(not(loom))]
    thread: std::sync::OnceLock<Option<std::thread::Thread>>,
    /// Set by [`shutdown`]: the thread returns instead of parking again.
    #[cfg(not(loom))]
    stop: std::sync::atomic::AtomicBool,
}

/// The process's starter ([`Starter::global`]) and its thread, taken by [`shutdown`].
#[cfg(not(loom))]
static GLOBAL: std::sync::Mutex<Option<GlobalStarter>> = std::sync::Mutex::new(None);
#[cfg(not(loom))]
type GlobalStarter = (Arc<Starter>, Option<std::thread::JoinHandle<()>>);

/// Stops the process's starter thread and waits for it (the provider is being unloaded: the
/// thread must not outlive the code it runs, nor the starter the static that holds it). Work
/// still waiting is dropped unstarted.
#[cfg(not(loom))]
pub fn shutdown() {
    let taken = GLOBAL.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some((starter, handle)) = taken else {
        return;
    };
    starter.stop.store(true, SeqCst);
    if let Some(h) = handle {
        h.thread().unpark();
        let _ = h.join();
    }
    starter.list.lock().clear();
}

/// Under loom there is no process starter to stop (`Starter::global` makes a new one).
#[cfg(loom)]
pub fn shutdown() {}

impl std::fmt::Debug for Starter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Starter").finish_non_exhaustive()
    }
}

/// How long the starter waits before trying work again that a core refused with -FI_EAGAIN,
/// at first and at most (doubling in between): long enough for the core's progress (driven by
/// the application's calls, or the core's own thread) to free what it lacked.
#[cfg(not(loom))]
const RETRY_FIRST: std::time::Duration = std::time::Duration::from_micros(20);
#[cfg(not(loom))]
const RETRY_MAX: std::time::Duration = std::time::Duration::from_millis(1);

impl Starter {
    /// A starter without a thread: [`Starter::run`] starts its work (the loom models, and
    /// tests).
    pub fn new() -> Arc<Self> {
        Arc::new(Starter {
            list: Mutex::new(Vec::new()),
            #[cfg(not(loom))]
            thread: std::sync::OnceLock::new(),
            #[cfg(not(loom))]
            stop: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The process's starter, with its thread.
    #[cfg(not(loom))]
    pub fn global() -> Arc<Self> {
        let mut global = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
        let (starter, _) = global.get_or_insert_with(|| {
            let s = Starter::new();
            let run = s.clone();
            let spawned = std::thread::Builder::new()
                .name("rscntr-trigger".into())
                .spawn(move || run.serve());
            let (thread, handle) = match spawned {
                Ok(h) => (Some(h.thread().clone()), Some(h)),
                Err(e) => {
                    eprintln!("rscntr: cannot start the trigger thread: {e}");
                    (None, None)
                }
            };
            let _ = s.thread.set(thread);
            (s, handle)
        });
        starter.clone()
    }

    /// Under loom the models run their own starters (`Starter::new`); the crate's callers
    /// outside the engine are not modelled.
    #[cfg(loom)]
    pub fn global() -> Arc<Self> {
        Starter::new()
    }

    fn schedule(&self, q: Arc<Triggers>) {
        self.list.lock().push(q);
        #[cfg(not(loom))]
        if let Some(Some(t)) = self.thread.get() {
            // An unpark before the thread parks is kept: its next park returns at once.
            t.unpark();
        }
    }

    /// One pass: starts the due work of every queue on the list. Returns false if some work
    /// must be tried again (its queue is back on the list).
    pub fn run(&self) -> bool {
        let queues = std::mem::take(&mut *self.list.lock());
        let mut all = true;
        for q in queues {
            // Cleared before the queue is looked at: a count observed from here on puts it
            // back on the list.
            q.scheduled.store(false, SeqCst);
            if !q.start_due() {
                all = false;
                if !q.scheduled.swap(true, SeqCst) {
                    self.list.lock().push(q);
                }
            }
        }
        all
    }

    #[cfg(not(loom))]
    fn serve(&self) {
        let mut retry = RETRY_FIRST;
        while !self.stop.load(SeqCst) {
            if self.run() {
                retry = RETRY_FIRST;
                if self.list.lock().is_empty() {
                    std::thread::park();
                }
            } else {
                std::thread::park_timeout(retry);
                retry = (retry * 2).min(RETRY_MAX);
            }
        }
    }
}
