//! The counter object: a `fid_cntr` over one kind of engine, in a home, with the feed its core
//! counts through once bound, and what the rest of rscntr asks of a counter of either kind
//! ([`AnyCntr`]).

use super::attr::Config;
use super::backing::store_error;
use super::backing::{Backend, Backing};
use super::feed::{Armed, Feed, FeedRequest};
use super::home::CntrHome;
use super::peer::PeerCntr;
use crate::boundary::ffi::err;
use crate::boundary::peer_sys;
use crate::engine::watcher::{self, Watched};
use crate::engine::{Holds, Source, Starter, Tag, TryWaitError, Wake, Work};
use crate::{fi_warn, ofi};
use parking_lot::Mutex;
use std::ffi::c_int;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// How long a waiter on an unbound counter sleeps at most between two pulls while its domain
/// drives something for such counters ([`CntrHome::drives_unbound`]).
const UNBOUND_POLL: Duration = Duration::from_micros(200);

/// A counter fid over one kind of engine. Each kind has its own ops tables, so the software
/// path is exactly the engine's software counter, with no test of which backend it is.
#[repr(C)]
pub struct Cntr<B: Backing> {
    fid: ofi::fid_cntr,
    home: *const dyn CntrHome,
    pub(super) wait_obj: ofi::fi_wait_obj,
    events: ofi::fi_cntr_events,
    pub(super) ops_flags: AtomicU64,
    /// The core that counts into this counter, opened by its home at the first bind (see
    /// [`AnyCntr::feed_or_open`]); NULL while unbound. A leaked `Box`, freed by close or drop.
    feed: AtomicPtr<Box<dyn Feed>>,
    feed_open: Mutex<()>,
    /// Endpoints and MRs this counter is bound to; it cannot close while any remain.
    bindings: AtomicUsize,
    /// Triggered or deferred work that names this counter (as its trigger, target or
    /// completion counter) and has not started or been cancelled, or is being started; it
    /// cannot close meanwhile.
    work: Holds,
    /// The fd FI_GETWAIT hands out instead of the engine's, when the home made one (see
    /// [`CntrHome::wait_fd`]).
    wait_fd: Option<OwnedFd>,
    peer: PeerCntr,
    pub(super) engine: B,
}

// SAFETY: the raw pointers in a counter fid are set at open and never change (the fid header
// and peer fid, read by libfabric and the core; the home, which outlives the counter), or are
// atomics; everything else it holds is Sync. The fd watcher polls it from its thread.
unsafe impl<B: Backing> Sync for Cntr<B> {}
// SAFETY: as above.
unsafe impl<B: Backing> Send for Cntr<B> {}

impl<B: Backing> Cntr<B> {
    /// A new counter object; `fid` is its header (with `B`'s ops tables), `owner_ops` the peer
    /// ops of `B`.
    pub(super) fn boxed(
        fid: ofi::fid_cntr,
        home: &dyn CntrHome,
        config: &Config,
        wait_fd: Option<OwnedFd>,
        owner_ops: &'static peer_sys::fi_ops_cntr_owner,
        engine: B,
    ) -> Box<Self> {
        let mut obj = Box::new(Cntr {
            fid,
            home,
            wait_obj: config.wait_obj,
            events: config.events,
            ops_flags: AtomicU64::new(0),
            feed: AtomicPtr::new(std::ptr::null_mut()),
            feed_open: Mutex::new(()),
            bindings: AtomicUsize::new(0),
            work: Holds::new(),
            wait_fd,
            peer: PeerCntr::new(owner_ops),
            engine,
        });
        let Cntr { peer, engine, .. } = &mut *obj;
        peer.point_at(engine);
        obj
    }

    pub(super) fn home(&self) -> &dyn CntrHome {
        // SAFETY: the home (domain) outlives its counters: it refuses to close with children.
        unsafe { &*self.home }
    }

    /// The feed, once the counter is bound.
    #[inline]
    fn feed(&self) -> Option<&dyn Feed> {
        // SAFETY: NULL or the Box stored by feed_or_open, freed only by close_feed (the
        // counter closing, bound to nothing and off the watcher) or by drop.
        unsafe { self.feed.load(Ordering::Acquire).as_ref() }.map(|b| &**b)
    }

    /// Drives the core's progress, as libfabric's own counters do on read and wait, and takes
    /// in whatever the core counted itself (see the layer's feed); nothing while unbound.
    #[inline]
    pub(super) fn sync(&self, errors_too: bool) {
        match self.feed() {
            Some(feed) => feed.sync(self.engine.counter(), errors_too),
            // Unbound: what the domain drives for such counters (its deferred operations'
            // completions), one load when nothing.
            None => self.home().drive_unbound(),
        }
    }

    /// What a read drives: a bounded part of the core's progress (see [`Feed::sync_read`]).
    #[inline]
    pub(super) fn sync_read(&self, errors_too: bool) {
        match self.feed() {
            Some(feed) => feed.sync_read(self.engine.counter(), errors_too),
            None => self.home().drive_unbound(),
        }
    }

    /// The feed, when the core may count into this counter and pulling it drives progress.
    fn live_feed(&self) -> Option<&dyn Feed> {
        self.feed().filter(|f| f.live())
    }

    /// Endpoints and MRs still bound to the counter.
    pub(super) fn bindings(&self) -> usize {
        self.bindings.load(Ordering::Acquire)
    }

    /// Queued work that names the counter, after waiting for work being started to finish
    /// with it (see [`Holds::outstanding`]).
    pub(super) fn work_refs(&self) -> u64 {
        self.work.outstanding()
    }

    /// Closes the feed's core counter and frees the feed (the counter is closing); on an error
    /// both stay.
    pub(super) fn close_feed(&self) -> Result<(), c_int> {
        let Some(feed) = self.feed() else {
            return Ok(());
        };
        feed.close()?;
        let old = self.feed.swap(std::ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: the Box stored by feed_or_open; nothing uses it any more (see `feed`).
        drop(unsafe { Box::from_raw(old) });
        Ok(())
    }

    /// The fd FI_GETWAIT hands out, if the counter has one.
    pub(super) fn wait_fd(&self) -> Option<RawFd> {
        self.wait_fd
            .as_ref()
            .map(|fd| fd.as_raw_fd())
            .or(self.engine.counter().fd())
    }

    pub(super) fn key(&self) -> usize {
        self as *const Self as usize
    }

    fn as_watched(&self) -> *const (dyn Watched + 'static) {
        watcher::target_of(self)
    }
}

impl<B: Backing> Drop for Cntr<B> {
    fn drop(&mut self) {
        let feed = *self.feed.get_mut();
        if !feed.is_null() {
            // SAFETY: the Box stored by feed_or_open, which close_feed did not free.
            drop(unsafe { Box::from_raw(feed) });
        }
    }
}

/// The core a bound counter counts for: pulled before every check of a wait, and slept on
/// the way its feed chose.
impl<B: Backing> Source for Cntr<B> {
    fn pull(&self) {
        self.sync(true);
    }
    fn wake(&self) -> Wake<'_> {
        match self.feed() {
            Some(feed) => feed.wake(),
            // Unbound, with deferred operations outstanding in the domain: their completions
            // are counted when the core's CQs are read, which each pull does.
            None if self.home().drives_unbound() => Wake::After(UNBOUND_POLL),
            // Unbound: nothing completes, only this counter's own ops change anything.
            None => Wake::Notified,
        }
    }
}

impl<B: Backing> Watched for Cntr<B> {
    fn poll(&self) -> bool {
        self.sync(true);
        self.engine.counter().signal_if_changed()
    }
    fn wake(&self) -> Wake<'_> {
        Source::wake(self)
    }
}

/// A counter as the watcher holds it while triggered work waits on it and a core counts into
/// it: the watcher pulls it (driving the core's progress and taking in what the core counted
/// itself, which is how the work becomes due when nobody reads the counter), sleeping the way
/// its feed says, until the work has started.
#[repr(transparent)]
struct Triggering<B: Backing>(Cntr<B>);

impl<B: Backing> Triggering<B> {
    fn of(c: &Cntr<B>) -> &Self {
        // SAFETY: repr(transparent) over Cntr<B>.
        unsafe { &*(c as *const Cntr<B>).cast::<Self>() }
    }

    /// Its key with the watcher: beside the counter's own (armed fd) key, never another
    /// counter's (counters are more than a byte apart).
    fn key(c: &Cntr<B>) -> usize {
        c.key() + 1
    }
}

impl<B: Backing> Watched for Triggering<B> {
    fn poll(&self) -> bool {
        self.0.sync(true);
        self.0
            .engine
            .counter()
            .triggers()
            .is_some_and(|t| !t.is_empty())
    }
    fn wake(&self) -> Wake<'_> {
        Source::wake(&self.0)
    }
}

/// Stops the watcher pulling `c` for its triggered work (it is closing).
pub(super) fn unwatch_triggering<B: Backing>(c: &Cntr<B>) {
    watcher::unwatch(Triggering::key(c));
}

/// How the home opens a counter's feed (see [`AnyCntr::feed_or_open`]).
pub type OpenFeed<'a> = dyn FnMut(FeedRequest) -> Result<Box<dyn Feed>, c_int> + 'a;

/// What the extension ops, fi_trywait and the layered binds need from a counter of either kind.
pub trait AnyCntr {
    fn backend(&self) -> Backend;
    fn trywait(&self) -> c_int;
    /// Its feed's bit in the doorbell's hints (see [`Feed::bell_hint`]); 0 without one.
    fn bell_hint(&self) -> u128;
    /// The home the counter belongs to (binds check it), as a thin pointer.
    fn home_ptr(&self) -> *const ();
    /// The feed through which the core counts into this counter, opened by `open` on first
    /// use (the first bind), once whoever races.
    fn feed_or_open(&self, open: &mut OpenFeed<'_>) -> Result<&dyn Feed, c_int>;
    /// A bind succeeded, to an endpoint not enabled yet unless `enabled`; `late` when the
    /// endpoint had been enabled before the bind.
    fn bound(&self, enabled: bool, late: bool);
    /// The endpoint or MR closed (`enabled`: as it was then).
    fn unbound(&self, enabled: bool);
    /// An endpoint this counter is bound to is about to close (`enabled`: whether it was; see
    /// [`Feed::binding_closing`]).
    fn binding_closing(&self, enabled: bool);
    /// An endpoint this counter is bound to was enabled.
    fn binding_enabled(&self);
    /// True for FI_CNTR_EVENTS_BYTES counters.
    fn counts_bytes(&self) -> bool;
    /// Queues `work` until the count (value plus errors) reaches `threshold`; it starts on
    /// rscntr's trigger thread (see `engine::trigger`).
    fn queue_work(&self, threshold: u64, tag: Tag, work: Box<dyn Work>);
    /// Takes out the queued work `pick` chooses, dropping it; how many.
    fn cancel_work(&self, pick: &mut dyn FnMut(Tag) -> bool) -> usize;
    /// Queued work names this counter: it cannot close until [`AnyCntr::release`].
    fn hold(&self);
    fn release(&self);
    /// The work holding the counter starts: its hold becomes a use that a close waits out,
    /// until [`AnyCntr::end_use`] or [`AnyCntr::hold_again`].
    fn begin_use(&self);
    fn end_use(&self);
    /// The work did not start after all (the core answered -FI_EAGAIN) and is queued again:
    /// its use becomes a hold, in one step (see [`Holds`]).
    fn hold_again(&self);
    /// The core will count an operation of rscntr's own into this counter: the next count
    /// it makes is taken out (see `Counter::owe`).
    fn owe(&self);
    /// The count owed will not come ([`AnyCntr::owe`]).
    fn forgive(&self);
    /// For deferred counter work: the application's fi_cntr_add / fi_cntr_set.
    fn add(&self, value: u64) -> c_int;
    fn add_err(&self, value: u64) -> c_int;
    fn set(&self, value: u64) -> c_int;
}

impl<B: Backing> AnyCntr for Cntr<B> {
    fn backend(&self) -> Backend {
        B::BACKEND
    }
    fn bell_hint(&self) -> u128 {
        self.feed().map_or(0, |f| f.bell_hint())
    }
    fn home_ptr(&self) -> *const () {
        self.home.cast()
    }
    fn feed_or_open(&self, open: &mut OpenFeed<'_>) -> Result<&dyn Feed, c_int> {
        if let Some(feed) = self.feed() {
            return Ok(feed);
        }
        let _guard = self.feed_open.lock();
        if let Some(feed) = self.feed() {
            return Ok(feed);
        }
        let feed = open(FeedRequest {
            events: self.events,
            peer: self.peer.as_fid(),
            wait_fd: self.wait_fd.as_ref().map(|fd| fd.as_raw_fd()),
        })?;
        self.feed
            .store(Box::into_raw(Box::new(feed)), Ordering::Release);
        Ok(self.feed().expect("just stored"))
    }
    fn bound(&self, enabled: bool, late: bool) {
        if let Some(feed) = self.feed() {
            feed.bound(enabled, late);
        }
        self.bindings.fetch_add(1, Ordering::AcqRel);
        self.engine.counter().notify_waiters();
    }
    fn unbound(&self, enabled: bool) {
        if let Some(feed) = self.feed() {
            feed.unbound(enabled);
        }
        self.bindings.fetch_sub(1, Ordering::AcqRel);
    }
    fn binding_closing(&self, enabled: bool) {
        if let Some(feed) = self.feed() {
            feed.binding_closing(enabled);
        }
    }
    fn binding_enabled(&self) {
        if let Some(feed) = self.feed() {
            feed.binding_enabled();
        }
        // Waiters that found nothing to pull look again: now the core can be driven.
        self.engine.counter().notify_waiters();
    }
    fn counts_bytes(&self) -> bool {
        self.events == ofi::fi_cntr_events_FI_CNTR_EVENTS_BYTES
    }
    fn queue_work(&self, threshold: u64, tag: Tag, work: Box<dyn Work>) {
        let counter = self.engine.counter();
        if counter.trigger(&Starter::global(), threshold, tag, work) {
            if let Some(t) = counter.triggers() {
                t.start_now();
            }
        } else if self.live_feed().is_some_and(|f| f.may_progress()) {
            // Due only once the core's completions are taken in: the watcher drives that,
            // asleep in the core's wait object between completions.
            // SAFETY: cntr_close unwatches before the counter is freed.
            unsafe {
                watcher::watch(
                    Triggering::key(self),
                    watcher::target_of(Triggering::of(self)),
                )
            };
        }
    }
    fn cancel_work(&self, pick: &mut dyn FnMut(Tag) -> bool) -> usize {
        self.engine
            .counter()
            .triggers()
            .map_or(0, |t| t.cancel(pick))
    }
    fn hold(&self) {
        self.work.hold();
    }
    fn release(&self) {
        self.work.release();
    }
    fn begin_use(&self) {
        self.work.begin_use();
    }
    fn end_use(&self) {
        self.work.end_use();
    }
    fn hold_again(&self) {
        self.work.hold_again();
    }
    fn owe(&self) {
        self.engine.counter().owe(1);
    }
    fn forgive(&self) {
        if let Err(e) = self.engine.counter().forgive(1) {
            store_error("giving back a count owed", e);
        }
    }
    fn add(&self, value: u64) -> c_int {
        match self.engine.counter().add(value) {
            Ok(()) => 0,
            Err(e) => store_error("deferred FI_OP_CNTR_ADD", e),
        }
    }
    fn add_err(&self, value: u64) -> c_int {
        match self.engine.counter().add_err(value) {
            Ok(()) => 0,
            Err(e) => store_error("a deferred operation's error", e),
        }
    }
    fn set(&self, value: u64) -> c_int {
        match self.engine.counter().set(value) {
            Ok(()) => 0,
            Err(e) => store_error("deferred FI_OP_CNTR_SET", e),
        }
    }
    fn trywait(&self) -> c_int {
        // What the core completed already is taken in first, so that the comparison below
        // sees it and the core's fd is not left readable for work that is done.
        let live = self.live_feed();
        let counter = self.engine.counter();
        if let Some(feed) = live {
            feed.sync(counter, true);
        }
        match counter.trywait() {
            Ok(()) => match live.map(|feed| feed.arm(counter)) {
                None | Some(Armed::Ready) => 0,
                Some(Armed::Pending) => err::EAGAIN,
                Some(Armed::Relay) => {
                    // SAFETY: cntr_close unwatches before the counter is freed.
                    unsafe { watcher::watch(self.key(), self.as_watched()) };
                    0
                }
            },
            Err(TryWaitError::Pending) => err::EAGAIN,
            Err(TryWaitError::NoFd) => {
                fi_warn!(
                    Cntr,
                    "fi_trywait on a counter without FI_WAIT_FD (wait object {})",
                    self.wait_obj
                );
                err::EINVAL
            }
        }
    }
}
