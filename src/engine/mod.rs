//! The counter engine: counters, their wait strategies and the wake protocol.
//!
//! Nothing in here knows about libfabric or rdma-core: a device counter comes in as a [`Store`]
//! implemented by the verbs layer (`crate::verbs`), a core provider that counts for a bound
//! counter as a [`Source`] implemented by the provider glue, which also maps these types and
//! errors onto `fid_cntr` and `-FI_E*` values, so the engine can be tested on its own.
//! Besides counters: the fd watcher thread (`watcher.rs`), the trigger thread (`trigger.rs`)
//! and the thread that drives domains promised automatic progress (`progress.rs`).

pub mod backoff;
pub mod bell;
mod counter;
pub mod duty;
mod eventfd;
#[cfg(not(loom))]
pub mod flat_set;
pub mod futex;
pub mod progress;
pub mod source;
pub mod store;
mod stuck;
mod sync;
pub mod trigger;
pub mod watcher;

pub use backoff::Backoff;
pub use counter::{
    Counter, DEFAULT_POLL_MAX, POLL_FIRST, TryWaitError, Tuning, WaitError, WaitStrategy,
};
pub use eventfd::{EventFd, epoll_ctl, epoll_set, poll_which, signal_raw, sleep_until_readable};

pub use source::{Blocker, Room, Source, Token, Unsourced, Wake};
pub use store::{Atomics, Store, StoreError};
pub use stuck::woken_others_here;
pub use trigger::{Holds, Started, Starter, Tag, Triggers, Work};

use std::time::{Duration, Instant};

/// How long a wait may take, from libfabric's `int timeout` in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timeout {
    /// Check once and return: no clock read, no syscall.
    Poll,
    /// Give up after this long.
    After(Duration),
    /// Wait until the condition holds.
    Never,
}

impl Timeout {
    /// libfabric's convention: negative waits forever, 0 polls once, positive is milliseconds.
    pub fn from_ms(ms: i32) -> Self {
        match ms {
            i32::MIN..=-1 => Timeout::Never,
            0 => Timeout::Poll,
            ms => Timeout::After(Duration::from_millis(ms as u64)),
        }
    }

    pub(crate) fn deadline(self) -> Option<Instant> {
        match self {
            Timeout::Poll => Some(Instant::now()),
            Timeout::After(d) => Instant::now().checked_add(d),
            Timeout::Never => None,
        }
    }
}
