//! The thread that keeps a layered domain's core progressing while an application sleeps in
//! poll() on an rscntr counter's fd: it drives the core's progress for each armed counter until
//! the counter's fd fires, then forgets it. With nothing armed it sleeps on a condition
//! variable and costs nothing.

use crate::cntr::Cntr;
use crate::engine::{Backoff, MAX_POLL_INTERVAL};
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::Duration;

#[derive(Default)]
struct State {
    /// Armed counters, as addresses: a counter unwatches itself (under the lock) before it
    /// is freed, and the thread only touches counters while holding the lock.
    armed: Vec<usize>,
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
    pub fn watch(&self, cntr: &Cntr) {
        let key = cntr as *const Cntr as usize;
        let mut st = self.shared.state.lock();
        if !st.armed.contains(&key) {
            st.armed.push(key);
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

    pub fn unwatch(&self, cntr: &Cntr) {
        let key = cntr as *const Cntr as usize;
        self.shared.state.lock().armed.retain(|&k| k != key);
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
        st.armed.retain(|&key| {
            // SAFETY: counters unwatch themselves under this lock before they are freed.
            let cntr = unsafe { &*(key as *const Cntr) };
            cntr.sync(true);
            cntr.fd_armed()
        });
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
