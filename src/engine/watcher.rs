//! The one thread that polls armed fds of counters over polled stores (hardware counters).
//!
//! A device raises no event when it moves a counter, yet an application that armed a counter's
//! fd with `fi_trywait` and sleeps in `poll()` must be woken. Rather than a thread per counter,
//! one process-wide watcher polls every armed polled counter: it is started with the first
//! polled FD counter, parks on a condition variable while nothing is armed (no CPU, no timer),
//! and otherwise polls on a schedule that starts at [`WATCH_FIRST`] after each arming and
//! doubles up to the smallest `poll_max` among the armed counters. When it sees the value or
//! error count differ from what `trywait` read, it signals the eventfd and forgets the counter
//! (one signal per arming, like a software mutation). Counters that nobody armed are never
//! looked at.
//!
//! The thread polls while holding the registry lock, so [`unwatch`] returning means no poll of
//! that counter is running or will run: the caller may then tear the device counter down.

use parking_lot::{Condvar, Mutex};
use std::io;
use std::sync::Weak;
use std::thread::JoinHandle;
use std::time::Duration;

/// The first pause of the watcher after a counter is armed; it doubles from there.
pub const WATCH_FIRST: Duration = Duration::from_micros(1);

/// What `trywait` read when it armed the fd: (value, error count).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snap(pub u64, pub u64);

/// A counter the watcher can poll.
pub(crate) trait Watched: Send + Sync {
    /// Polls once against the values read at arming. True to keep watching; false once the fd
    /// was signalled (by this poll or by a mutation in between).
    fn poll(&self, armed_at: Snap) -> bool;
}

struct Entry {
    key: usize,
    target: Weak<dyn Watched>,
    armed_at: Snap,
    poll_max: Duration,
}

struct State {
    entries: Vec<Entry>,
    thread: Option<JoinHandle<()>>,
    /// A counter was armed since the last poll: restart the fast schedule.
    kick: bool,
    shutdown: bool,
    /// Polling passes made so far (tests check that a parked watcher makes none).
    passes: u64,
}

static STATE: Mutex<State> = Mutex::new(State {
    entries: Vec::new(),
    thread: None,
    kick: false,
    shutdown: false,
    passes: 0,
});
static WAKE: Condvar = Condvar::new();

/// Starts the watcher thread if it is not running. Called when a polled FD counter is made, so
/// that a failure to start it is reported there rather than lost in `trywait`.
pub fn ensure_running() -> io::Result<()> {
    let mut st = STATE.lock();
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

/// Arms (or re-arms with a new snapshot) the counter `key`.
pub(crate) fn watch(key: usize, target: Weak<dyn Watched>, armed_at: Snap, poll_max: Duration) {
    let mut st = STATE.lock();
    match st.entries.iter_mut().find(|e| e.key == key) {
        Some(e) => {
            e.target = target;
            e.armed_at = armed_at;
            e.poll_max = poll_max;
        }
        None => st.entries.push(Entry {
            key,
            target,
            armed_at,
            poll_max,
        }),
    }
    st.kick = true;
    // Started already by ensure_running unless shut down since; a failure here leaves the
    // fd to be signalled by software mutations only, which is all that is left after shutdown.
    let _ = start(&mut st);
    WAKE.notify_one();
}

/// Forgets the counter `key`; returns its snapshot if it was armed.
pub(crate) fn unwatch(key: usize) -> Option<Snap> {
    let mut st = STATE.lock();
    let i = st.entries.iter().position(|e| e.key == key)?;
    Some(st.entries.swap_remove(i).armed_at)
}

/// Stops the thread and forgets every armed counter (the provider is being unloaded: the
/// thread must not outlive the code it runs).
pub fn shutdown() {
    let handle = {
        let mut st = STATE.lock();
        st.shutdown = true;
        // freed, not just emptied: the DSO may be unloaded next
        st.entries = Vec::new();
        WAKE.notify_all();
        st.thread.take()
    };
    if let Some(h) = handle {
        let _ = h.join();
    }
    STATE.lock().shutdown = false;
}

/// (armed counters, thread started, polling passes so far): for tests and diagnostics.
pub fn stats() -> (usize, bool, u64) {
    let st = STATE.lock();
    (st.entries.len(), st.thread.is_some(), st.passes)
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
    let mut st = STATE.lock();
    let mut next = WATCH_FIRST;
    loop {
        if st.shutdown {
            return;
        }
        if st.entries.is_empty() {
            WAKE.wait(&mut st);
            continue;
        }
        if std::mem::take(&mut st.kick) {
            next = WATCH_FIRST;
        }
        st.entries
            .retain(|e| e.target.upgrade().is_some_and(|t| t.poll(e.armed_at)));
        st.passes += 1;
        let Some(cap) = st.entries.iter().map(|e| e.poll_max).min() else {
            continue;
        };
        let pause = next.min(cap);
        next = (next * 2).min(cap);
        WAKE.wait_for(&mut st, pause);
    }
}
