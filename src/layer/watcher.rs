//! The thread that keeps a layered domain's core progressing while an application sleeps in
//! poll() on an fd rscntr handed out (a counter's, or an emulated CQ's): it polls each armed
//! object, which drives the core's progress, until the object's fd fires, then forgets it.
//! With nothing armed it sleeps on a condition variable and costs nothing.

use crate::engine::{Backoff, MAX_POLL_INTERVAL};
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::Duration;

/// Something with an armed fd that needs the core's progress to fire.
pub trait Watched {
    /// Drives progress and checks; signals the fd and returns false once it fired.
    fn poll(&self) -> bool;
}

/// An armed object, by address. Objects unwatch themselves (under the lock) before they are
/// freed, and the thread only touches them while holding the lock.
#[derive(Clone, Copy)]
struct Entry(*const dyn Watched);
// SAFETY: the pointee is only used under the watcher's lock, one thread at a time (see above).
unsafe impl Send for Entry {}

impl Entry {
    fn addr(self) -> usize {
        self.0 as *const () as usize
    }
}

#[derive(Default)]
struct State {
    armed: Vec<Entry>,
    stop: bool,
    running: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
pub struct Watcher {
    shared: Arc<Shared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Watcher {
    pub fn watch(&self, obj: &dyn Watched) {
        // SAFETY (lifetime erasure): the object unwatches itself before it is freed.
        let entry =
            Entry(unsafe { std::mem::transmute::<&dyn Watched, &'static dyn Watched>(obj) });
        let mut st = self.shared.state.lock();
        if !st.armed.iter().any(|e| e.addr() == entry.addr()) {
            st.armed.push(entry);
        }
        if !st.running {
            st.running = true;
            let shared = self.shared.clone();
            *self.thread.lock() = std::thread::Builder::new()
                .name("rscntr-watch".into())
                .spawn(move || run(&shared))
                .ok();
        }
        self.shared.wake.notify_one();
    }

    pub fn unwatch(&self, obj: &dyn Watched) {
        let addr = obj as *const dyn Watched as *const () as usize;
        self.shared.state.lock().armed.retain(|e| e.addr() != addr);
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.shared.state.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}

fn run(shared: &Shared) {
    let mut backoff = Backoff::default();
    let mut nap = Duration::from_micros(10);
    loop {
        let mut st = shared.state.lock();
        while st.armed.is_empty() && !st.stop {
            shared.wake.wait(&mut st);
            backoff = Backoff::default();
            nap = Duration::from_micros(10);
        }
        if st.stop {
            return;
        }
        let before = st.armed.len();
        // SAFETY: armed objects unwatch themselves under this lock before they are freed.
        st.armed.retain(|e| unsafe { (*e.0).poll() });
        let fired = st.armed.len() != before;
        drop(st);
        if fired {
            backoff = Backoff::default();
            nap = Duration::from_micros(10);
        } else if !backoff.is_spun_out() {
            backoff.snooze();
        } else {
            std::thread::sleep(nap);
            nap = (nap * 2).min(MAX_POLL_INTERVAL);
        }
    }
}
