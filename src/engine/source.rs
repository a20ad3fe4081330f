//! Where a counter's changes come from when they do not come through the [`Counter`]
//! itself, and how a thread can sleep until the next one: the one abstraction behind every
//! wait that cannot rely on being notified.
//!
//! A software counter is changed only by its own ops, which wake its waiters ([`Wake::Notified`]).
//! Two kinds of counter also change "behind its back":
//! - a device counter ([`Store::POLLED`](super::Store::POLLED)): the device signals nothing, so
//!   a waiter re-reads after at most a bounded sleep ([`Wake::After`]);
//! - a counter bound to a core provider's endpoints: the core completes operations only when
//!   its progress runs, and rscntr learns of them by running it ([`Source::pull`]). A waiter
//!   sleeps on what the core itself would block on ([`Wake::Block`]: its fds or its condition
//!   variable), or, for a core that offers nothing to block on (shm), yields between pulls as
//!   the core's own waiters do ([`Wake::Yield`]).
//!
//! [`Counter::wait_with`](super::Counter::wait_with) and the [`watcher`](super::watcher) (which
//! makes armed fds fire for sources nobody else watches) are the two users; both follow the
//! same order so that no change is missed: take a [`Blocker::prepare`] token, pull and check,
//! [`Blocker::arm`], then [`Blocker::block`] with the token.

use super::EventFd;
use super::room::Room;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// How a thread may sleep until a source may have changed.
#[derive(Clone, Copy)]
pub enum Wake<'a> {
    /// Every change arrives through the counter's own ops, which wake sleepers.
    Notified,
    /// Nothing signals a change: sleep at most this long between two pulls.
    After(Duration),
    /// Nothing signals a change and nothing else drives the source: yield between pulls.
    Yield,
    /// Sleep in the source's own blocking primitive.
    Block(&'a dyn Blocker),
}

/// Something outside a counter that changes it. Sync: the leader of a [`Room`] pulls the
/// sources of the other members.
pub trait Source: Sync {
    /// Takes in what changed: drives a core's progress, which counts completed operations
    /// into the counter. Cheap when nothing happened.
    fn pull(&self);
    /// How a thread may sleep until the next change.
    fn wake(&self) -> Wake<'_>;
}

/// The source of a counter that nothing outside changes.
pub struct Unsourced;

impl Source for Unsourced {
    fn pull(&self) {}
    fn wake(&self) -> Wake<'_> {
        Wake::Notified
    }
}

/// What [`Blocker::prepare`] saw: interrupts after it end the [`Blocker::block`] it is given to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Token(pub u64);

/// A source's own way of blocking a thread until it may have changed: a core's wait fd, or
/// its counter's own wait.
///
/// Callers follow: `prepare`, pull and check, `arm` (if false, go back to pulling), `block`.
/// A change of the source after `arm`, or an [`interrupt`](Blocker::interrupt) after
/// `prepare`, ends the `block`.
pub trait Blocker: Sync {
    /// Takes the token that later interrupts are compared against.
    fn prepare(&self) -> Token;
    /// Readies the source's wait object (a core's `fi_trywait`); false when something is
    /// pending already, so the caller must pull before blocking.
    fn arm(&self) -> bool;
    /// Sleeps until the source may have changed, an interrupt came after `token`, `kick` is
    /// readable (fd blockers sleep on it beside the source's fd), or `until`.
    fn block(&self, token: Token, kick: &EventFd, until: Option<Instant>);
    /// Ends the `block` of a thread that passed `kick` (or any token older than now).
    fn interrupt(&self, kick: &EventFd) {
        kick.signal();
    }
    /// False when a thread of the source's own makes the changes (a core's progress thread):
    /// a waiter then blocks at once instead of spinning, which would only take that thread's
    /// CPU, as the core's own waits do.
    fn worth_spinning(&self) -> bool {
        true
    }
    /// The room of the core domain this blocker belongs to: its waiters meet there, one
    /// leading for all (see `room.rs`). Blockers of one room that are the same object are
    /// progressed by pulling any one of their sources, and the core counts into their counters
    /// without a pull (an FI_PEER counter, or one whose counting rscntr sees). None: each
    /// counter's waiters lead for themselves.
    fn room(&self) -> Option<&Room> {
        None
    }
    /// The fd that becomes readable when the source may have changed, for a room's leader that
    /// sleeps on several blockers at once.
    fn fd(&self) -> Option<RawFd> {
        None
    }
    /// The longest a thread may sleep in this blocker before pulling again.
    fn max_sleep(&self) -> Option<Duration> {
        None
    }
}
