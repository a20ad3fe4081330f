//! The one thread that drives the progress of domains promised automatic progress by rscntr
//! over a core that moves no data by itself (shm, rxd, tcp, rxm): nothing wakes such a core
//! for rscntr when data arrives, so the thread makes passes on a schedule, quick while passes
//! find something new, doubling up to [`NAP_MAX`] while they do not, and once nothing was new
//! for [`IDLE_AFTER`], up to [`IDLE_NAP_MAX`]: an idle domain costs about twenty short passes
//! a second, and what arrives after a long quiet is moved within 50 ms (at once when the
//! application calls in).
//!
//! A domain registers a [`Driven`] ([`register`]) and unregisters it before it frees it:
//! [`unregister`] returns only once no pass is inside it. With nothing registered the thread
//! parks on a condition variable: no CPU, no timer.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// The first pause after a pass that found something new; it doubles from there.
pub const NAP_FIRST: Duration = Duration::from_micros(50);
/// The longest pause while something was new in the last [`IDLE_AFTER`].
pub const NAP_MAX: Duration = Duration::from_millis(1);
/// How long nothing new makes a domain idle.
pub const IDLE_AFTER: Duration = Duration::from_millis(100);
/// The longest pause of an idle domain: how late, at most, progress notices what arrived
/// while nobody called. Each wake of the thread costs tens of microseconds of CPU on a virtual
/// machine (timer and scheduler), so an idle domain is passed over 20 times a second.
pub const IDLE_NAP_MAX: Duration = Duration::from_millis(50);

/// Something the thread drives: one pass of its core's progress.
pub trait Driven: Sync {
    /// Drives the core once; true when the pass found something new (the quick schedule
    /// starts over).
    fn drive(&self) -> bool;
}

struct Entry {
    key: usize,
    target: *const dyn Driven,
}

// SAFETY: a registered target is Sync and valid until unregistered (register's contract).
unsafe impl Send for Entry {}

struct State {
    entries: Vec<Entry>,
    thread: Option<JoinHandle<()>>,
    /// Something was registered or nudged since the last pass: start the quick schedule over.
    restart: bool,
    shutdown: bool,
    passes: u64,
}

static STATE: Mutex<State> = Mutex::new(State {
    entries: Vec::new(),
    thread: None,
    restart: false,
    shutdown: false,
    passes: 0,
});
static WAKE: Condvar = Condvar::new();
/// Held by the thread through a pass, taken while it holds [`STATE`]: an entry removed under
/// `STATE` is in no pass that starts afterwards, and [`unregister`] waits on this lock for
/// the one in progress.
static PASS: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts driving `target` under `key` (one entry per key; a second registration replaces
/// the first).
///
/// # Safety
/// `target` stays valid until [`unregister`]`(key)` has returned.
pub unsafe fn register(key: usize, target: *const dyn Driven) -> std::io::Result<()> {
    let mut st = lock();
    st.entries.retain(|e| e.key != key);
    st.entries.push(Entry { key, target });
    st.restart = true;
    if st.thread.is_none() {
        st.thread = Some(
            std::thread::Builder::new()
                .name("rscntr-progress".into())
                .spawn(run)?,
        );
    }
    WAKE.notify_all();
    Ok(())
}

/// Stops driving `key`; returns once the thread is in no pass that includes it. Never call
/// it from inside a [`Driven::drive`].
pub fn unregister(key: usize) -> bool {
    let found = {
        let mut st = lock();
        let before = st.entries.len();
        st.entries.retain(|e| e.key != key);
        before != st.entries.len()
    };
    drop(PASS.lock().unwrap_or_else(|e| e.into_inner()));
    found
}

/// Starts the quick schedule over: something was posted that the next passes should see.
pub fn nudge() {
    let mut st = lock();
    if !st.entries.is_empty() {
        st.restart = true;
        WAKE.notify_all();
    }
}

/// Stops the thread and forgets every entry (the provider is being unloaded: the thread must
/// not outlive the code it runs).
pub fn shutdown() {
    let handle = {
        let mut st = lock();
        st.shutdown = true;
        st.entries = Vec::new();
        WAKE.notify_all();
        st.thread.take()
    };
    if let Some(h) = handle {
        let _ = h.join();
    }
    lock().shutdown = false;
}

/// (entries, thread started, passes so far): for tests and diagnostics.
pub fn stats() -> (usize, bool, u64) {
    let st = lock();
    (st.entries.len(), st.thread.is_some(), st.passes)
}

fn run() {
    let mut nap = NAP_FIRST;
    let mut last_found = std::time::Instant::now();
    let mut st = lock();
    loop {
        if st.shutdown {
            return;
        }
        if st.entries.is_empty() {
            nap = NAP_FIRST;
            st = WAKE.wait(st).unwrap_or_else(|e| e.into_inner());
            continue;
        }
        st.restart = false;
        st.passes += 1;
        let targets: Vec<*const dyn Driven> = st.entries.iter().map(|e| e.target).collect();
        let pass = PASS.lock().unwrap_or_else(|e| e.into_inner());
        drop(st);
        let mut found = false;
        for t in targets {
            // SAFETY: registered, and not unregistered before this pass ends (PASS).
            found |= unsafe { (*t).drive() };
        }
        drop(pass);
        nap = if found {
            last_found = std::time::Instant::now();
            NAP_FIRST
        } else if last_found.elapsed() < IDLE_AFTER {
            (nap * 2).min(NAP_MAX)
        } else {
            (nap * 2).min(IDLE_NAP_MAX)
        };
        st = lock();
        if st.restart || st.shutdown {
            nap = NAP_FIRST;
            last_found = std::time::Instant::now();
            continue;
        }
        st = WAKE
            .wait_timeout(st, nap)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}
