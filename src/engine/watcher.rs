//! The one thread that makes armed fds fire for counters whose changes nobody announces.
//!
//! An application that armed a counter's fd with `fi_trywait` sleeps in `poll()`; when the
//! counter's [`Source`](super::Source) changes it without a call through the counter (a device
//! counting, a core provider completing operations that only its progress reveals), someone
//! must notice and signal the fd. Rather than a thread per counter, one process-wide watcher
//! serves every armed counter whose fd cannot fire by itself, sleeping the way the counters'
//! sources say ([`Wake`]):
//! - [`Wake::Block`]: in the source's own blocker (a core counter's own wait), woken by the
//!   core's completions, by a new arming and by a counter leaving;
//! - [`Wake::After`]: on a doubling schedule from [`WATCH_FIRST`] up to the smallest bound
//!   among the armed counters (device counters);
//! - [`Wake::Yield`]: yielding between passes, for a core with nothing to block on (shm),
//!   as the core's own waiters do, only while such a counter is armed.
//!
//! With nothing armed it parks on a condition variable: no CPU, no timer. Each pass polls every
//! armed counter (which pulls its source and compares with what `trywait` saw); a counter that
//! changed has its fd signalled and is forgotten (one signal per arming, like a mutation).
//!
//! Counters are held by address ([`watch`]: the owner calls [`unwatch`] before it frees one,
//! and `unwatch` returns only once the thread neither polls it nor sleeps in its blocker), or
//! by a `Weak` ([`watch_shared`], the engine's own polled counters, shared through an `Arc`):
//! the thread reads those only through a strong reference it holds for the pass, and lets go of
//! it before it sleeps, so a counter whose last `Arc` is dropped is never read while it is
//! being dropped.

use super::EventFd;
use super::source::{Blocker, Wake};
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The first pause of the watcher after a counter is armed; it doubles from there.
pub const WATCH_FIRST: Duration = Duration::from_micros(1);
/// With more than one armed counter to block for, the thread sleeps in the first one's
/// blocker and re-polls the others at least this often.
pub const SHARED_BLOCK_MAX: Duration = Duration::from_millis(1);

/// A counter the watcher can make fire.
pub trait Watched: Sync {
    /// Pulls the counter's source and compares with what `trywait` saw; signals the fd and
    /// returns false once it fired (by this poll or by a mutation in between).
    fn poll(&self) -> bool;
    /// How the thread may sleep until this counter may have changed.
    fn wake(&self) -> Wake<'_>;
}

/// How the thread holds an armed counter.
enum Target {
    /// By address: valid until [`unwatch`] (see [`watch`]).
    Raw(*const dyn Watched),
    /// Read only through a strong reference held for the pass (see [`watch_shared`]).
    Shared(Weak<dyn Watched>),
}

struct Entry {
    key: usize,
    target: Target,
}

impl Entry {
    /// The counter: valid while the entry is armed (`Raw`), or while the pass holds a strong
    /// reference to it (`Shared`, taken at the start of the pass).
    fn target(&self) -> *const dyn Watched {
        match &self.target {
            Target::Raw(p) => *p,
            Target::Shared(w) => w.as_ptr(),
        }
    }
}

#[derive(Clone, Copy)]
struct BlockerRef(*const dyn Blocker);

struct State {
    entries: Vec<Entry>,
    thread: Option<JoinHandle<()>>,
    /// A counter was armed since the last pass: restart the fast schedule, look again.
    restart: bool,
    shutdown: bool,
    /// Polling passes made so far (tests check that a parked watcher makes none).
    passes: u64,
    /// The counter whose blocker the thread sleeps in (with the lock released), and that
    /// blocker.
    blocking: Option<(usize, BlockerRef)>,
}

// SAFETY: the pointers in State are only dereferenced by the watcher thread and by
// arm/unwatch, under the lock or while `blocking` names them; a counter held by address
// unwatches itself, which waits for the thread to leave it, before it is freed, and one held
// by a `Weak` is read only through a strong reference.
unsafe impl Send for State {}

static STATE: Mutex<State> = Mutex::new(State {
    entries: Vec::new(),
    thread: None,
    restart: false,
    shutdown: false,
    passes: 0,
    blocking: None,
});
static WAKE: Condvar = Condvar::new();
/// Signalled when the thread leaves a blocker.
static LEFT: Condvar = Condvar::new();
/// The thread's interrupt for fd blockers (None if no fd could be made).
static KICK: OnceLock<Option<EventFd>> = OnceLock::new();

/// The registry, whatever a panicking holder left (nothing here is left half-updated).
/// std's primitives, not parking_lot's: parking allocates a process-wide table that would
/// outlive the DSO.
fn lock() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

fn wait(st: MutexGuard<'static, State>) -> MutexGuard<'static, State> {
    WAKE.wait(st).unwrap_or_else(|e| e.into_inner())
}

fn kick() -> Option<&'static EventFd> {
    KICK.get_or_init(|| EventFd::new().ok()).as_ref()
}

/// Starts the watcher thread if it is not running. Called when a counter that will need it is
/// made, so that a failure to start it is reported there rather than lost in `trywait`.
pub fn ensure_running() -> io::Result<()> {
    let mut st = lock();
    start(&mut st)
}

fn start(st: &mut State) -> io::Result<()> {
    if st.thread.is_none() {
        st.thread = Some(
            std::thread::Builder::new()
                .name("rscntr-watch".into())
                .spawn(run)?,
        );
    }
    Ok(())
}

/// Wakes the thread out of the blocker it sleeps in, if any.
fn interrupt(st: &State) {
    if let (Some((_, b)), Some(k)) = (st.blocking, kick()) {
        // SAFETY: `blocking` names a counter that has not been unwatched (unwatch waits for
        // the thread to leave it), so its blocker is alive.
        unsafe { &*b.0 }.interrupt(k);
    }
}

/// `target` as the watcher holds it: by address, without its lifetime (what keeps it valid is
/// [`watch`]'s contract).
pub fn target_of<'a>(target: &'a (dyn Watched + 'a)) -> *const (dyn Watched + 'static) {
    let p: *const (dyn Watched + 'a) = target;
    // SAFETY: a change of lifetime only; nothing is dereferenced here.
    unsafe { std::mem::transmute::<*const (dyn Watched + 'a), *const (dyn Watched + 'static)>(p) }
}

/// Arms (or re-arms) the counter `key`, whose fd the thread makes fire.
///
/// # Safety
/// `target` stays valid until [`unwatch`]`(key)` returns.
pub unsafe fn watch(key: usize, target: *const dyn Watched) {
    arm(key, Target::Raw(target));
}

/// [`watch`] for a counter shared through an `Arc`: dropping its last `Arc` needs no
/// [`unwatch`] first (the thread never reads it meanwhile), only after, to forget the entry.
pub fn watch_shared(key: usize, target: Weak<dyn Watched>) {
    arm(key, Target::Shared(target));
}

fn arm(key: usize, target: Target) {
    let mut st = lock();
    match st.entries.iter_mut().find(|e| e.key == key) {
        Some(e) => e.target = target,
        None => st.entries.push(Entry { key, target }),
    }
    st.restart = true;
    // Started already by ensure_running unless shut down since; a failure here leaves the
    // fd to be signalled by mutations only, which is all that is left after shutdown.
    let _ = start(&mut st);
    WAKE.notify_one();
    interrupt(&st);
}

/// Forgets the counter `key`; returns whether it was armed. Once this returns, the thread
/// neither polls it nor sleeps in its blocker.
pub fn unwatch(key: usize) -> bool {
    let mut st = lock();
    let found = match st.entries.iter().position(|e| e.key == key) {
        Some(i) => {
            st.entries.swap_remove(i);
            true
        }
        None => false,
    };
    while st.blocking.is_some_and(|(k, _)| k == key) {
        interrupt(&st);
        st = LEFT.wait(st).unwrap_or_else(|e| e.into_inner());
    }
    found
}

/// Stops the thread and forgets every armed counter (the provider is being unloaded: the
/// thread must not outlive the code it runs).
pub fn shutdown() {
    let handle = {
        let mut st = lock();
        st.shutdown = true;
        // freed, not just emptied: the DSO may be unloaded next
        st.entries = Vec::new();
        WAKE.notify_all();
        interrupt(&st);
        st.thread.take()
    };
    if let Some(h) = handle {
        let _ = h.join();
    }
    lock().shutdown = false;
}

/// (armed counters, thread started, polling passes so far): for tests and diagnostics.
pub fn stats() -> (usize, bool, u64) {
    let st = lock();
    (st.entries.len(), st.thread.is_some(), st.passes)
}

/// The first armed counter that sleeps in a blocker.
fn first_blocker(st: &State) -> Option<(usize, BlockerRef)> {
    st.entries.iter().find_map(|e| {
        // SAFETY: armed counters are alive (see State and Entry::target).
        match unsafe { (*e.target()).wake() } {
            // SAFETY (lifetime erasure): used only while the entry stays armed or `blocking`
            // names it (see unwatch).
            Wake::Block(b) => Some((
                e.key,
                BlockerRef(unsafe {
                    std::mem::transmute::<*const dyn Blocker, *const (dyn Blocker + 'static)>(b)
                }),
            )),
            _ => None,
        }
    })
}

fn run() {
    // Sleeps of a few microseconds are the point of this thread: ask for 1 µs timer slack
    // instead of the default 50 µs (this thread only).
    // (Not under Miri, which has no prctl and no timer slack: tests/miri_engine.rs.)
    // SAFETY: PR_SET_TIMERSLACK takes an integer and affects only the calling thread.
    #[cfg(not(miri))]
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong)
    };
    let mut st = lock();
    let mut next = WATCH_FIRST;
    // A core fd that stays readable while nothing completes: nap instead of spinning.
    let mut stuck = super::stuck::Stuck::default();
    // The strong references to the shared counters of this pass.
    let mut held: Vec<Arc<dyn Watched>> = Vec::new();
    loop {
        if !held.is_empty() {
            // Let go with the lock free: the last reference runs the counter's Drop, which
            // unwatches it.
            drop(st);
            held.clear();
            st = lock();
        }
        if st.shutdown {
            return;
        }
        if st.entries.is_empty() {
            st = wait(st);
            continue;
        }
        if std::mem::take(&mut st.restart) {
            next = WATCH_FIRST;
        }
        // Shared counters are read through a reference held for the pass; one whose last
        // reference is gone is forgotten.
        st.entries.retain(|e| match &e.target {
            Target::Raw(_) => true,
            Target::Shared(w) => w.upgrade().map(|a| held.push(a)).is_some(),
        });
        if st.entries.is_empty() {
            continue;
        }
        // The token comes before the pass: a change the pass misses interrupts the block.
        let block = first_blocker(&st);
        let kick = kick();
        if let Some(k) = kick {
            k.drain();
        }
        // SAFETY: the blocker of an armed counter (see first_blocker).
        let token = block.map(|(_, b)| unsafe { &*b.0 }.prepare());
        let woken = super::stuck::woken_here();
        // SAFETY: armed counters are alive (see State and Entry::target).
        st.entries.retain(|e| unsafe { (*e.target()).poll() });
        stuck.pulled(super::stuck::woken_here() != woken);
        st.passes += 1;
        if st.entries.is_empty() {
            continue;
        }
        // How the counters still armed may be slept for, in one look at each.
        let mut yields = false;
        let mut cap: Option<Duration> = None;
        let mut blockers = 0;
        let mut still: Option<usize> = None;
        for e in &st.entries {
            // SAFETY: as above.
            match unsafe { (*e.target()).wake() } {
                Wake::Yield => yields = true,
                Wake::After(d) => cap = Some(cap.map_or(d, |c| c.min(d))),
                Wake::Block(_) => {
                    blockers += 1;
                    // Blocked in below only if it is the counter the token was taken from.
                    still.get_or_insert(e.key);
                }
                Wake::Notified => {}
            }
        }
        if yields {
            drop(st);
            held.clear();
            std::thread::yield_now();
            st = lock();
            continue;
        }
        let mut pause = cap.map(|c| {
            let p = next.min(c);
            next = (next * 2).min(c);
            p
        });
        if let (Some((key, b)), Some(token), Some(k)) = (block, token, kick)
            && still == Some(key)
        {
            // SAFETY: the blocker of an armed counter.
            let blocker = unsafe { &*b.0 };
            if !blocker.arm() {
                continue;
            }
            if let Some(fd) = blocker.fd()
                && stuck.still_stuck([fd])
            {
                drop(st);
                stuck.nap_on(k, None);
                st = lock();
                continue;
            }
            if blockers > 1 {
                pause = Some(pause.map_or(SHARED_BLOCK_MAX, |p| p.min(SHARED_BLOCK_MAX)));
            }
            // Shared counters stay held: they are polled ones, whose bound caps this sleep.
            st.blocking = Some((key, b));
            let until = pause.map(|p| Instant::now() + p);
            drop(st);
            let slept_from = Instant::now();
            blocker.block(token, k, until);
            // Its next arming looks everywhere (the doorbell's hints end with the sleep: the
            // watcher may not come back to this blocker).
            blocker.leader_left();
            stuck.slept(slept_from.elapsed(), true);
            st = lock();
            st.blocking = None;
            LEFT.notify_all();
            continue;
        }
        if still.is_some() {
            // The counter blocked for fired, or no kick: look again soon.
            pause = Some(pause.map_or(SHARED_BLOCK_MAX, |p| p.min(SHARED_BLOCK_MAX)));
        }
        if !held.is_empty() {
            // Not held while asleep (see the loop's start); an arming or a shutdown meanwhile
            // is looked at first.
            drop(st);
            held.clear();
            st = lock();
            if st.restart || st.shutdown {
                continue;
            }
        }
        st = match pause {
            Some(p) => {
                WAKE.wait_timeout(st, p)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
            // Only counters that their own mutations signal: wait for a new arming.
            None => wait(st),
        };
    }
}
