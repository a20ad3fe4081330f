//! The one thread that drives the progress of domains promised automatic progress by rscntr
//! over a core that moves no data by itself (shm, rxd, tcp, rxm): nothing wakes such a core
//! for rscntr when data arrives, so the thread makes passes on a schedule, quick while passes
//! find something new, doubling up to [`NAP_MAX`] while they do not, and once nothing was new
//! for [`IDLE_AFTER`], up to [`IDLE_NAP_MAX`]: an idle domain costs about twenty short passes
//! a second, and what arrives after a long quiet is moved within 50 ms (at once when the
//! application calls in).
//!
//! Where the core shows what it has to do on an fd (tcp: the epoll set of the domain's sockets)
//! the thread sleeps on that fd instead, once the domain is idle: nothing wakes it but the core
//! having something to do, a registration, a nudge or shutdown. It does so only while it drives
//! exactly one domain (one per process is the usual case; with more, each would need its own
//! fd in one poll, which the cores here never needed) and re-checks once every
//! [`IDLE_FD_MAX`] in case the core left something its fd does not show. An fd that stays
//! readable without a pass finding anything new is not slept on until the next timed nap: a
//! core that leaves its fd readable costs what the schedule costs, never a spin.
//!
//! A domain registers a [`Driven`] ([`register`]) and unregisters it before it frees it:
//! [`unregister`] returns only once no pass is inside it. With nothing registered the thread
//! parks on a condition variable: no CPU, no timer.

use super::eventfd::{EventFd, poll_readable};
use std::os::fd::{AsRawFd, RawFd};
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
/// The longest sleep of an idle domain on its core's fd ([`Driven::idle_fd`]).
pub const IDLE_FD_MAX: Duration = Duration::from_secs(1);

/// Something the thread drives: one pass of its core's progress.
pub trait Driven: Sync {
    /// Drives the core once; true when the pass found something new (the quick schedule
    /// starts over).
    fn drive(&self) -> bool;

    /// An fd the core makes readable whenever a pass may find something new, once
    /// [`Driven::arm_idle`] has said so; None: the thread naps on its schedule.
    fn idle_fd(&self) -> Option<RawFd> {
        None
    }

    /// Arms [`Driven::idle_fd`] (the core's `fi_trywait`); false when the core already has
    /// something for a pass.
    fn arm_idle(&self) -> bool {
        true
    }
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
    /// The thread sleeps on a domain's fd: what wakes it must signal [`State::kick`].
    on_fd: bool,
    /// Wakes the thread from its sleep on a domain's fd (made with the thread).
    kick: Option<EventFd>,
    /// Sleeps on a domain's fd so far, and those the fd ended (for tests and diagnostics).
    fd_sleeps: u64,
    fd_wakes: u64,
}

static STATE: Mutex<State> = Mutex::new(State {
    entries: Vec::new(),
    thread: None,
    restart: false,
    shutdown: false,
    passes: 0,
    on_fd: false,
    kick: None,
    fd_sleeps: 0,
    fd_wakes: 0,
});
static WAKE: Condvar = Condvar::new();
/// Held by the thread through a pass, taken while it holds [`STATE`]: an entry removed under
/// `STATE` is in no pass that starts afterwards, and [`unregister`] waits on this lock for
/// the one in progress.
static PASS: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

impl State {
    /// Wakes the thread, wherever it sleeps.
    fn wake(&self) {
        WAKE.notify_all();
        if self.on_fd
            && let Some(k) = &self.kick
        {
            k.signal();
        }
    }
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
    if st.kick.is_none() {
        st.kick = Some(EventFd::new()?);
    }
    if st.thread.is_none() {
        st.thread = Some(
            std::thread::Builder::new()
                .name("rscntr-progress".into())
                .spawn(run)?,
        );
    }
    st.wake();
    Ok(())
}

/// Stops driving `key`; returns once the thread is in no pass that includes it. Never call
/// it from inside a [`Driven::drive`].
pub fn unregister(key: usize) -> bool {
    let found = {
        let mut st = lock();
        let before = st.entries.len();
        st.entries.retain(|e| e.key != key);
        // A sleep on the fd of the domain going away ends now (it holds PASS).
        st.wake();
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
        st.wake();
    }
}

/// Stops the thread and forgets every entry (the provider is being unloaded: the thread must
/// not outlive the code it runs).
pub fn shutdown() {
    let handle = {
        let mut st = lock();
        st.shutdown = true;
        st.entries = Vec::new();
        st.wake();
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

/// (sleeps on a domain's fd so far, those the fd ended): for tests and diagnostics.
pub fn fd_sleeps() -> (u64, u64) {
    let st = lock();
    (st.fd_sleeps, st.fd_wakes)
}

fn run() {
    let mut nap = NAP_FIRST;
    let mut last_found = std::time::Instant::now();
    // The last sleep on a domain's fd ended with the fd readable: if the pass after it finds
    // nothing, the next sleep is a timed nap (the core leaves its fd readable).
    let mut fd_woke = false;
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
        for t in &targets {
            // SAFETY: registered, and not unregistered before this pass ends (PASS).
            found |= unsafe { (**t).drive() };
        }
        let idle = !found && last_found.elapsed() >= IDLE_AFTER;
        // One domain, idle, whose core has an fd that did not just prove useless: sleep on it.
        let sleep_fd = match targets.as_slice() {
            // SAFETY: as above (PASS is still held).
            [t] if idle && !fd_woke => unsafe { (**t).idle_fd() },
            _ => None,
        };
        fd_woke = false;
        if let Some(fd) = sleep_fd {
            st = lock();
            if st.restart || st.shutdown || st.entries.len() != 1 {
                drop(pass);
                nap = NAP_FIRST;
                last_found = std::time::Instant::now();
                continue;
            }
            st.on_fd = true;
            st.fd_sleeps += 1;
            let kick = st.kick.as_ref().map_or(-1, |k| k.as_raw_fd());
            drop(st);
            // SAFETY: as above: PASS is held through the sleep, and unregister wakes it.
            let armed = unsafe { (*targets[0]).arm_idle() };
            fd_woke = !armed || poll_readable(fd, kick, Some(IDLE_FD_MAX));
            drop(pass);
            st = lock();
            st.on_fd = false;
            st.fd_wakes += u64::from(fd_woke);
            if let Some(k) = &st.kick {
                k.drain();
            }
            nap = NAP_FIRST;
            continue;
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
