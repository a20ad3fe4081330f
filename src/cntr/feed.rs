//! The extension point of a bound counter: a [`Feed`] is a core provider that counts into the
//! counter once it is bound to the core's endpoints or MRs. The layer over a core implements
//! it (`crate::layer::feed`: the core counter, taking in its counts, what waiters sleep on);
//! the counter fid only asks it to pull, to say what to sleep on and to arm, so that it knows
//! nothing of cores.

use crate::boundary::peer_sys;
use crate::engine::Wake;
use crate::ofi;
use std::ffi::c_int;
use std::os::fd::RawFd;

/// Where a feed puts what its core counted: the counter's engine.
pub trait Tally {
    fn count(&self, n: u64);
    fn count_err(&self, n: u64);
    /// The counter's value (for a feed that watches whether its pull moved it).
    fn value(&self) -> u64;
}

/// What the counter offers the home that opens its feed.
pub struct FeedRequest {
    pub events: ofi::fi_cntr_events,
    /// The counter's `fid_peer_cntr`, for the core to count into (libfabric's peer API).
    pub peer: *mut peer_sys::fid_peer_cntr,
    /// The fd `FI_GETWAIT` hands out, when the home made one (see `CntrHome::wait_fd`).
    pub wait_fd: Option<RawFd>,
}

/// What `fi_trywait` still has to do once the counter's own fd is armed.
pub enum Armed {
    /// Nothing: the fd fires on the core's event.
    Ready,
    /// The core has something pending: the application reads and tries again (-FI_EAGAIN).
    Pending,
    /// The fd watcher must poll the counter, on the core's behalf.
    Relay,
}

/// A core provider that counts into a bound counter (opened at its first bind, closed with it).
pub trait Feed: Send + Sync {
    /// The core counter the counter's endpoints and MRs are bound to.
    fn core_cntr(&self) -> *mut ofi::fid_cntr;
    /// Drives the core's progress and takes in what it counted, unless not [`live`](Feed::live).
    fn sync(&self, tally: &dyn Tally, errors_too: bool);
    /// What `fi_cntr_read`/`fi_cntr_readerr` drive: a bounded part of the core's progress
    /// whose cost does not grow with the endpoints bound, and every count the core has
    /// delivered already. By default all of [`sync`](Feed::sync).
    fn sync_read(&self, tally: &dyn Tally, errors_too: bool) {
        self.sync(tally, errors_too)
    }
    /// True when the core may count and pulling drives its progress: every endpoint the
    /// counter is bound to is enabled.
    fn live(&self) -> bool;
    /// rscntr's own threads may drive the core's progress (the domain is thread safe).
    fn may_progress(&self) -> bool;
    /// What a waiter sleeps on.
    fn wake(&self) -> Wake<'_>;
    /// After `fi_trywait` armed the counter's own fd, while live.
    fn arm(&self, tally: &dyn Tally) -> Armed;
    /// A bind succeeded, to an endpoint not enabled yet unless `enabled`; `late` when the
    /// endpoint had been enabled before the bind.
    fn bound(&self, enabled: bool, late: bool);
    /// The endpoint or MR closed (`enabled`: as it was then).
    fn unbound(&self, enabled: bool);
    /// An endpoint the counter is bound to (enabled or not: `enabled`) is about to close, under
    /// the domain's closing lock (see `layer::bind`): nothing of rscntr's drives the core
    /// meanwhile.
    fn binding_closing(&self, _enabled: bool) {}
    /// An endpoint the counter is bound to was enabled.
    fn binding_enabled(&self);
    /// Closes the core counter: the counter is closing, bound to nothing. On an error the
    /// counter stays open with its feed.
    fn close(&self) -> Result<(), c_int>;
    /// Counts only remote accesses to MRs, which rscntr itself learns of (a counter fed so
    /// binds to MRs only).
    fn remote_only(&self) -> bool {
        false
    }
    /// Over shm's doorbell: this feed's bit in the hints a ringing peer leaves (see
    /// `layer/doorbell/bell.rs`); 0 elsewhere.
    fn bell_hint(&self) -> u128 {
        0
    }
}
