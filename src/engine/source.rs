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
//!
//! The waiters of the counters of one core domain meet in a [`Room`] (below), where one of them
//! sleeps in the core's blockers for all, so that one completion wakes one thread.

use super::EventFd;
use super::sync::{AtomicBool, AtomicU64, Mutex};
use event_listener::Event;
use std::os::fd::RawFd;
use std::sync::OnceLock;
use std::sync::atomic::Ordering::SeqCst;
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
    /// Whether an `FI_WAIT_UNSPEC` or `FI_WAIT_FD` waiter spins, pulling between spins,
    /// before it sleeps here. False where a pull is a syscall and a completion never comes
    /// within the spin: it only takes CPU from the peer that answers (on a shared CPU, it
    /// delays the answer it waits for).
    fn spin_before_sleep(&self) -> bool {
        self.worth_spinning()
    }
    /// How long a waiter keeps pulling (yielding between pulls once its short spin is over)
    /// before it sleeps here: for a blocker whose sleep costs a kernel round trip at each end
    /// (a ring and a wake) that an active peer answers sooner than. None: the short spin only.
    fn pull_before_sleep(&self) -> Option<Duration> {
        None
    }
    /// The room of the core domain this blocker belongs to: its waiters meet there, one
    /// leading for all (see [`Room`]). Blockers of one room that are the same object are
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
    /// The longest a thread may sleep in this blocker before pulling again; for a room's
    /// leader, the longest between two pulls of this blocker's source, whatever else ends its
    /// sleeps sooner (a core that completes from its timers, not its fd).
    fn max_sleep(&self) -> Option<Duration> {
        None
    }
    /// A thread that slept here (a room's leader, a CQ's reader, the fd watcher) is done
    /// sleeping for now: whatever the blocker kept for its next arming may go.
    fn leader_left(&self) {}
    /// A number no other blocker of this process has had (0: none), with [`Blocker::fd`] fixed
    /// for the blocker's life: a room's leader asleep on this blocker's fd is known to be, even
    /// if the member that brought it left and came back meanwhile (see [`Room::join`]).
    fn serial(&self) -> u64 {
        0
    }
}

// ---- Rooms: the waiters of one core domain ---------------------------------------------

/// A member's borrowed parts, kept while it is a member: the member's thread is inside its wait
/// (a [`Membership`] on its stack) and removes them under the room's lock before its borrows end.
#[derive(Clone, Copy)]
struct Member {
    id: u64,
    source: *const (dyn Source + Sync + 'static),
    blocker: *const (dyn Blocker + 'static),
    event: *const Event,
    /// The leader pulls and arms this member's blocker in its next round: it joined since, or
    /// its fd was readable, or the leader could not tell.
    due: bool,
    /// Pulled and armed in the leader's next round whatever its fd says: it joined since, or
    /// the leader could not tell what its sleep was woken by.
    fresh: bool,
}

#[derive(Default)]
struct State {
    members: Vec<Member>,
    leader: Option<u64>,
    next_id: u64,
    /// A hand-off is on its way to this member (it was woken to lead and has not looked yet).
    handed_to: Option<u64>,
    /// The serials ([`Blocker::serial`]) of the blockers whose fds the leader's sleep polls,
    /// from its last [`Room::arm_all`]; empty when that sleep is not a poll of the fds.
    polled: Vec<u64>,
    /// The serials of the blockers whose leaves the leader's flattened set holds as it sleeps
    /// in it, members present or resting (`flat_set.rs`), sorted; empty when the leader does not
    /// sleep in that set.
    flat_held: Vec<u64>,
    /// When every member was last marked to be pulled ([`Room::mark_due`] with None), by
    /// whichever member led; None: never.
    all_due_at: Option<Instant>,
}

/// Where the threads waiting on the counters of one core domain meet, so that one completion
/// wakes one thread: a [`Room`].
///
/// Without it, every waiter of a bound counter sleeps in what its core blocks on, and a core
/// domain has one such thing for all its endpoints (tcp's progress fd) or one per counter that
/// the same completions make readable: every completion woke every waiter of the domain, each
/// ran the core's progress, and all but one went back to sleep (docs/growth.md, "waiters per
/// domain"). In a room, as in Open MPI's `wait_sync` and Dang et al.'s "one waiting thread
/// drives a communication context":
///
/// - one member, the **leader**, sleeps in the core's blockers (all of them, when the members'
///   blockers differ: see [`Blocker::fd`]) and drives the progress of every member: it pulls one
///   member per distinct blocker (see [`Blocker`]: members that share a blocker are progressed by
///   pulling any one of them, and the core counts into each counter without a pull);
/// - every other member, a **follower**, sleeps on its own counter's listener and is woken only
///   by a change of its own counter (the core counting into it during the leader's pull, or any
///   other mutation), or by a hand-off;
/// - a leader that leaves (threshold met, error, timeout) hands off: it wakes one follower,
///   which leads from then on. A follower that was handed the lead but leaves before taking it
///   hands it on the same way, so the room is never left with followers and no leader.
///
/// No wake is lost: a follower registers its listener, then looks (under the room's lock) for a
/// leader, so a hand-off after the look notifies a registered listener; a leader takes the
/// tokens of its blockers, pulls, checks, arms, then blocks, as a lone waiter does (see this file's
/// doc); and a member that joins with a blocker the leader does not sleep in interrupts
/// the leader, which then sleeps in that one too. `tests/loom_wait.rs` model-checks it, with a
/// planted lost hand-off ([`Room::without_handoff`]) that the models must catch.
///
/// Shared by the blockers of that domain ([`Blocker::room`]).
pub struct Room {
    state: Mutex<State>,
    /// Interrupts the leader's sleep: a member joined, or a mutation of the leader's counter.
    kick: OnceLock<Option<EventFd>>,
    /// The kick was signalled since the leader last drained it.
    kicked: AtomicBool,
    /// False only in the models' planted bug (see [`Room::without_handoff`]).
    handoff: bool,
    /// Bumped when a core may have changed what the members' wait sets hold
    /// ([`Room::wait_sets_changed`]).
    sets_generation: AtomicU64,
    /// The leader's sleep over many fds as one epoll set of their leaves (`flat_set.rs`).
    #[cfg(not(loom))]
    flat: Mutex<Flat>,
    /// How many leaves that set held at the leader's last sleep in it (0: none yet).
    flat_leaves: std::sync::atomic::AtomicUsize,
}

/// The state of a room's [`FlatSet`](super::flat_set::FlatSet).
#[cfg(not(loom))]
#[derive(Default)]
struct Flat {
    /// Asked for ([`Room::flatten_wait_sets`]), and told what the leader sleeps in: its set the
    /// first time, or why it could not be built (the leader then polls the fds until the wait
    /// sets change). None: the leader polls the members' fds.
    report: Option<fn(&str)>,
    /// Built at the first sleep over many fds.
    set: Option<super::flat_set::FlatSet>,
    /// The generation of the wait sets the set could not be built for.
    failed: Option<u64>,
    /// The generation of the wait sets at the leader's last sleep: a set is rebuilt for a new
    /// generation only once it is seen at two sleeps in a row.
    seen: u64,
    /// The first sleep in the set was reported.
    told: bool,
}

// SAFETY: the raw pointers in `State` are only dereferenced under the room's lock while their
// member is present (a member removes itself under that lock before its borrows end), and point
// at Sync objects.
unsafe impl Send for Room {}
// SAFETY: as above.
unsafe impl Sync for Room {}

impl Default for Room {
    fn default() -> Self {
        Self::new()
    }
}

impl Room {
    pub fn new() -> Self {
        Room {
            state: Mutex::new(State::default()),
            kick: OnceLock::new(),
            kicked: AtomicBool::new(false),
            handoff: true,
            sets_generation: AtomicU64::new(0),
            #[cfg(not(loom))]
            flat: Mutex::new(Flat::default()),
            flat_leaves: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// A room whose leader leaves without handing off: a planted lost wakeup, for the models
    /// to show they catch one. Never used otherwise.
    #[doc(hidden)]
    pub fn without_handoff() -> Self {
        Room {
            handoff: false,
            ..Self::new()
        }
    }

    /// Lets the leader sleep over many members' fds in one epoll set of what their wait sets
    /// hold (`flat_set.rs`), `report` telling why, if it cannot; None: it polls the fds.
    pub fn flatten_wait_sets(&self, report: Option<fn(&str)>) {
        #[cfg(not(loom))]
        {
            *self.flat.lock() = Flat {
                report,
                ..Flat::default()
            };
        }
        #[cfg(loom)]
        let _ = report;
    }

    /// How many leaves the leader's flattened set held at its last sleep in it; None if it
    /// never slept in one (for tests).
    #[doc(hidden)]
    pub fn flat_leaves(&self) -> Option<usize> {
        match self.flat_leaves.load(SeqCst) {
            0 => None,
            n => Some(n),
        }
    }

    /// A core may have changed what the members' wait sets hold (an endpoint bound, enabled or
    /// closed): the leader rebuilds its flattened set before it sleeps again, and is
    /// interrupted if it sleeps now.
    pub fn wait_sets_changed(&self) {
        self.sets_generation.fetch_add(1, SeqCst);
        let mut st = self.state.lock();
        // What the set holds may not be what the members' fds hold any more.
        st.flat_held.clear();
        if st.leader.is_some() {
            drop(st);
            self.interrupt_leader(None);
        }
    }

    /// Sleeps until one of `members`' fds (`(serial, fd)`, see [`Blocker::serial`]) or the
    /// kick is readable, or `limit` passed; leaves in `readable` the fds that were. A zero
    /// limit only looks (without the kick). In the flattened set when there is one (see
    /// [`Room::flatten_wait_sets`]), else a `ppoll` of the fds.
    pub(super) fn sleep_on_fds(
        &self,
        members: &[(u64, RawFd)],
        limit: Option<Duration>,
        readable: &mut Vec<RawFd>,
    ) {
        #[cfg(not(loom))]
        if members.len() > 1 && self.flat_sleep(members, limit, readable) {
            return;
        }
        let fds = members.iter().map(|&(_, fd)| fd);
        let kick = match self.kick() {
            Some(k) if limit != Some(Duration::ZERO) => {
                use std::os::fd::AsRawFd;
                k.as_raw_fd()
            }
            _ => -1,
        };
        super::eventfd::sleep_until_any_readable(fds, kick, limit, readable);
    }

    /// [`Room::sleep_on_fds`] in the flattened set; false if there is none.
    #[cfg(not(loom))]
    fn flat_sleep(
        &self,
        members: &[(u64, RawFd)],
        limit: Option<Duration>,
        readable: &mut Vec<RawFd>,
    ) -> bool {
        use super::flat_set::{FlatSet, RECHECK, Woken};
        use std::os::fd::AsRawFd;
        let Some(kick) = self.kick() else {
            return false;
        };
        let generation = self.sets_generation.load(SeqCst);
        let mut flat = self.flat.lock();
        let Flat {
            report,
            set,
            failed,
            seen,
            told,
        } = &mut *flat;
        let Some(report) = *report else {
            return false;
        };
        if *failed == Some(generation) {
            return false;
        }
        let set = match set {
            Some(set) => set,
            None => match FlatSet::new(kick.as_raw_fd()) {
                Ok(new) => {
                    *seen = generation;
                    *told = false;
                    set.insert(new)
                }
                Err(e) => {
                    report(&format!("no epoll set for the room's leader: {e}"));
                    *failed = Some(generation);
                    return false;
                }
            },
        };
        if set.generation() != generation && std::mem::replace(seen, generation) != generation {
            // The wait sets changed since the last sleep: while the core is still changing them
            // (the endpoints of an application being set up, one announcement each), poll
            // them as they are rather than read them all again each time.
            return false;
        }
        if let Err(e) = set.sync(generation, members) {
            report(&format!(
                "the wait sets of a room's members cannot be flattened ({e}); its leader polls them"
            ));
            flat.set = None;
            flat.failed = Some(generation);
            return false;
        }
        self.flat_leaves.store(set.registered(), SeqCst);
        let look = limit == Some(Duration::ZERO);
        if !look {
            // From now on a member that comes back with its leaves still in the set arms its
            // own blocker instead of waking the leader (see `Room::join`), unless the wait sets
            // changed meanwhile (`Room::wait_sets_changed` clears this after its bump).
            let mut st = self.state.lock();
            st.flat_held.clear();
            if self.sets_generation.load(SeqCst) == generation {
                st.flat_held.extend(set.held());
                st.flat_held.sort_unstable();
            }
        }
        if !std::mem::replace(told, true) {
            report(&format!(
                "the leader of a room sleeps in one epoll set: {} leaves of {} members' wait sets",
                set.registered(),
                members.len()
            ));
        }
        let bounded = !look && limit.is_none_or(|l| l > RECHECK);
        let woken = set.wait(if bounded { Some(RECHECK) } else { limit }, readable);
        if !set.orphans().is_empty() {
            self.claim_orphans(set, readable);
        }
        if bounded && woken == Woken::TimedOut {
            // Nothing in the set for RECHECK: look at the members' own fds, in case a core
            // changed a wait set without the layer knowing.
            let fds = members.iter().map(|&(_, fd)| fd);
            super::eventfd::sleep_until_any_readable(fds, -1, Some(Duration::ZERO), readable);
            if !readable.is_empty() {
                report("a member's wait set changed unannounced; the room's set is rebuilt");
                self.sets_generation.fetch_add(1, SeqCst);
            }
        }
        true
    }

    /// Ready leaves of the flattened set that only members absent at its last sync hold: a
    /// member back since (it armed itself) is readable; the others' leaves leave the set, which
    /// would otherwise return at once until they come back.
    #[cfg(not(loom))]
    fn claim_orphans(&self, set: &mut super::flat_set::FlatSet, readable: &mut Vec<RawFd>) {
        let mut st = self.state.lock();
        let orphans = set.orphans().to_vec();
        for leaf in orphans {
            let holders: Vec<(u64, RawFd)> = set.resting_holders(leaf).collect();
            for (serial, fd) in holders {
                // SAFETY: a present member's parts are live (see Member).
                let present = st
                    .members
                    .iter()
                    .any(|m| unsafe { &*m.blocker }.serial() == serial);
                if present {
                    if !readable.contains(&fd) {
                        readable.push(fd);
                    }
                } else {
                    set.evict(fd);
                    st.flat_held.retain(|&s| s != serial);
                }
            }
        }
    }

    /// The fd that interrupts the leader's sleep (None if none could be made: the leader then
    /// never sleeps longer than [`NO_KICK_NAP`]).
    pub(super) fn kick(&self) -> Option<&EventFd> {
        self.kick.get_or_init(|| EventFd::new().ok()).as_ref()
    }

    /// Interrupts the leader: signals the kick, to be drained by the leader's next round.
    pub(super) fn interrupt_leader(&self, leader_blocker: Option<&dyn Blocker>) {
        if let Some(kick) = self.kick() {
            match leader_blocker {
                Some(b) => b.interrupt(kick),
                None => kick.signal(),
            }
            self.kicked.store(true, SeqCst);
        }
    }

    /// The leader drains the kick before a round, if it was signalled.
    pub(super) fn drain_kick(&self) {
        if self.kicked.swap(false, SeqCst)
            && let Some(kick) = self.kick()
        {
            kick.drain();
        }
    }

    /// Joins the room as a follower: `source` pulled by whoever leads, `blocker` what it would
    /// sleep in, `event` what wakes it. The leader, if any, is interrupted when `blocker` is
    /// not one it sleeps in.
    pub(super) fn join<'a>(
        &'a self,
        source: &'a (dyn Source + Sync),
        blocker: &'a dyn Blocker,
        event: &'a Event,
    ) -> Membership<'a> {
        // SAFETY (lifetime erasure): the member is removed under the lock by the Membership's
        // drop, before the borrows end; until then only this room dereferences the pointers.
        let (source, blocker) = unsafe {
            (
                std::mem::transmute::<*const (dyn Source + Sync + 'a), *const (dyn Source + Sync)>(
                    source,
                ),
                std::mem::transmute::<*const (dyn Blocker + 'a), *const dyn Blocker>(blocker),
            )
        };
        let mut st = self.state.lock();
        let id = st.next_id;
        st.next_id += 1;
        let new_blocker = !st
            .members
            .iter()
            .any(|m| std::ptr::addr_eq(m.blocker, blocker));
        // The leader's sleep polls this blocker's fd already (its member left since the
        // leader armed, and is back: a waiter whose wait returned and that waits again), or
        // sleeps in a flattened set that still holds its leaves (they rest there while it is
        // away): the joiner arms it itself instead of waking the leader to do so. Any later
        // sleep polls it too, as it polls every member's fd.
        // Not for a blocker with a bound on its sleeps (which may have come since the leader
        // computed its own bound).
        // SAFETY: `blocker` is live for 'a, beyond this call.
        let b = unsafe { &*blocker };
        let serial = b.serial();
        let arms_itself = st.leader.is_some()
            && new_blocker
            && serial != 0
            && b.max_sleep().is_none()
            && (st.polled.binary_search(&serial).is_ok()
                || st.flat_held.binary_search(&serial).is_ok());
        st.members.push(Member {
            id,
            source,
            blocker,
            event,
            due: !arms_itself,
            fresh: !arms_itself,
        });
        let interrupt = st.leader.is_some() && new_blocker && !arms_itself;
        let leader_blocker = st.leader.and_then(|l| st.blocker_of(l));
        drop(st);
        if interrupt {
            // SAFETY: the leader is a member, so its blocker is live while we held the lock;
            // interrupting after the unlock can at worst wake a leader that already left,
            // which the kick's drain absorbs.
            self.interrupt_leader(leader_blocker.map(|b| unsafe { &*b }));
        }
        Membership {
            room: self,
            id,
            arms_itself,
        }
    }

    /// The leader's next sleep is not a poll of the fds [`Room::arm_all`] collected (it naps).
    pub(super) fn polls_nothing(&self) {
        self.state.lock().polled.clear();
    }

    /// True while some member leads.
    pub(super) fn is_led(&self) -> bool {
        self.state.lock().leader.is_some()
    }

    /// Takes the lead if nobody has it.
    pub(super) fn try_lead(&self, me: &Membership<'_>) -> bool {
        let mut st = self.state.lock();
        if st.handed_to == Some(me.id) {
            st.handed_to = None;
        }
        if st.leader.is_none() {
            st.leader = Some(me.id);
            true
        } else {
            st.leader == Some(me.id)
        }
    }

    /// The leader's round, under the lock: takes a token of each distinct blocker that is due
    /// (see `Member::due`), then pulls one member per such blocker. Returns the blockers and
    /// their tokens, in member order.
    pub(super) fn pull_all(&self, tokens: &mut Vec<(*const dyn Blocker, super::Token)>) {
        let st = self.state.lock();
        tokens.clear();
        let mut pulled: Vec<*const dyn Blocker> = Vec::with_capacity(st.members.len());
        for m in &st.members {
            if !(m.due || m.fresh) || pulled.iter().any(|b| std::ptr::addr_eq(*b, m.blocker)) {
                continue;
            }
            pulled.push(m.blocker);
            // SAFETY: a present member's parts are live (see Member).
            tokens.push((m.blocker, unsafe { &*m.blocker }.prepare()));
        }
        for b in &pulled {
            let m = st
                .members
                .iter()
                .find(|m| std::ptr::addr_eq(m.blocker, *b))
                .expect("just seen");
            // SAFETY: as above.
            unsafe { &*m.source }.pull();
        }
    }

    /// True when the members sleep in more than one blocker, each with an fd: the leader then
    /// services them with [`Room::service_due`] and sleeps on all the fds.
    pub(super) fn many_fds(&self) -> bool {
        let st = self.state.lock();
        let Some(first) = st.members.first() else {
            return false;
        };
        // SAFETY: a present member's parts are live (see Member).
        st.members
            .iter()
            .all(|m| unsafe { &*m.blocker }.fd().is_some())
            && st
                .members
                .iter()
                .any(|m| !std::ptr::addr_eq(m.blocker, first.blocker))
    }

    /// For a room whose members sleep on different fds: pulls and arms the due members one
    /// blocker at a time, and after the first looks (a poll that does not sleep) which fds are
    /// still readable. A core whose fds all hold one shared fd (rxm over tcp: every wait set
    /// holds the fd of tcp's domain progress) makes every member's fd readable for one
    /// completion; the first pull drains the shared fd, and leaves readable only the fds of the
    /// members it completed something for, which are pulled next. No look after those: the
    /// leader's next sleep polls the same fds and returns at once if one is readable again, and
    /// a look over 64 nested wait sets costs about as much as a pull after a sleep (25-45 µs,
    /// caches cold); a second look, which almost always found nothing, made a completion's
    /// round over tcp;ofi_rxm with 64 waiters 109 µs instead of 97. Bounded by the number of
    /// members.
    pub(super) fn service_due(&self) {
        let mut fds: Vec<(u64, RawFd)> = Vec::new();
        let mut readable = Vec::new();
        // Blockers serviced this round: each at most once (a core may leave a serviced fd
        // readable, nested wait fds whose own signal only their owner resets; the next sleep's
        // poll brings it back if it has more).
        let mut done: Vec<*const dyn Blocker> = Vec::new();
        let mut budget = self.members() + 1;
        let mut looked = false;
        while budget > 0 {
            budget -= 1;
            let mut st = self.state.lock();
            let Some(m) = st
                .members
                .iter()
                .find(|m| {
                    (m.due || m.fresh) && !done.iter().any(|d| std::ptr::addr_eq(*d, m.blocker))
                })
                .copied()
            else {
                for o in &mut st.members {
                    o.due = false;
                    o.fresh = false;
                }
                return;
            };
            done.push(m.blocker);
            // SAFETY: a present member's parts are live (see Member).
            let (source, blocker) = unsafe { (&*m.source, &*m.blocker) };
            pull_then_arm(source, blocker);
            fds.clear();
            for o in &mut st.members {
                if std::ptr::addr_eq(o.blocker, m.blocker) {
                    o.due = false;
                    o.fresh = false;
                }
                // SAFETY: as above.
                let blocker = unsafe { &*o.blocker };
                if !looked
                    && let Some(fd) = blocker.fd()
                    && !fds.iter().any(|&(_, f)| f == fd)
                {
                    fds.push((blocker.serial(), fd));
                }
            }
            if looked {
                continue;
            }
            looked = true;
            drop(st);
            self.sleep_on_fds(&fds, Some(Duration::ZERO), &mut readable);
            // What is still readable after this pull: only those members are due now (the
            // first pull of a round drains what all fds shared).
            let mut st = self.state.lock();
            for o in &mut st.members {
                // SAFETY: a present member's parts are live (see Member).
                o.due = unsafe { &*o.blocker }
                    .fd()
                    .is_some_and(|fd| readable.contains(&fd));
            }
        }
    }

    /// Arms every distinct blocker of the present members; false if one has something pending
    /// (the leader pulls again). Collects what the leader sleeps on: the fds and the shortest
    /// sleep bound, or the one blocker when all members share it.
    pub(super) fn arm_all(&self, sleep: &mut Sleep) -> bool {
        let mut st = self.state.lock();
        sleep.members.clear();
        sleep.cap = None;
        sleep.single = None;
        sleep.no_fd = false;
        // Each distinct blocker once, due when any of its members is (sorted by address: a
        // room of 64 members with a blocker each is walked once, not once per member).
        let mut seen: Vec<(*const dyn Blocker, bool)> = st
            .members
            .iter()
            .map(|m| (m.blocker, m.due || m.fresh))
            .collect();
        seen.sort_unstable_by_key(|(b, _)| b.cast::<()>() as usize);
        seen.dedup_by(|later, kept| {
            let same = std::ptr::addr_eq(later.0, kept.0);
            kept.1 |= same && later.1;
            same
        });
        for &(blocker, due) in &seen {
            // SAFETY: a present member's parts are live (see Member).
            let b = unsafe { &*blocker };
            // A blocker that was not due stays armed from an earlier round: nothing made its
            // fd readable since.
            if due && !b.arm() {
                return false;
            }
            match b.fd() {
                Some(fd) => sleep.members.push((b.serial(), fd)),
                None => sleep.no_fd = true,
            }
            if let Some(c) = b.max_sleep() {
                sleep.cap = Some(sleep.cap.map_or(c, |old: Duration| old.min(c)));
            }
        }
        if seen.len() == 1 {
            sleep.single = Some(seen[0].0);
        }
        st.polled.clear();
        st.flat_held.clear();
        if seen.len() > 1 && !sleep.no_fd {
            // SAFETY: as above.
            st.polled
                .extend(seen.iter().map(|&(b, _)| unsafe { &*b }.serial()));
            st.polled.sort_unstable();
        }
        for m in &mut st.members {
            m.due = false;
            m.fresh = false;
        }
        true
    }

    /// After the leader's sleep: the members whose blocker's fd is in `readable` are due, or,
    /// when `readable` is None (the leader cannot tell, or a bounded sleep ran out: a core's
    /// timers), every member is pulled in the next round.
    pub(super) fn mark_due(&self, readable: Option<&[std::os::fd::RawFd]>) {
        let mut st = self.state.lock();
        if readable.is_none() {
            st.all_due_at = Some(Instant::now());
        }
        for m in &mut st.members {
            match readable {
                // SAFETY: a present member's parts are live (see Member).
                Some(fds) => {
                    m.due |= unsafe { &*m.blocker }
                        .fd()
                        .is_some_and(|fd| fds.contains(&fd))
                }
                None => m.fresh = true,
            }
        }
    }

    /// How long since every member was last marked to be pulled (the longest, if never): what a
    /// blocker's cap ([`Blocker::max_sleep`]) bounds.
    pub(super) fn since_all_due(&self) -> Duration {
        self.state
            .lock()
            .all_due_at
            .map_or(Duration::MAX, |t| t.elapsed())
    }

    fn leave(&self, id: u64) {
        let mut st = self.state.lock();
        st.members.retain(|m| m.id != id);
        let was_leader = st.leader == Some(id);
        if was_leader {
            st.leader = None;
            st.polled.clear();
        }
        let handed_to_me = st.handed_to == Some(id);
        if handed_to_me {
            st.handed_to = None;
        }
        // Hand the lead on when it is vacant and was ours (as leader, or handed to us), so
        // that the followers never sleep with nobody driving the core for them.
        if self.handoff
            && st.leader.is_none()
            && (was_leader || handed_to_me)
            && let Some(next) = st.members.first().copied()
        {
            st.handed_to = Some(next.id);
            // SAFETY: a present member's event is live (see Member).
            unsafe { &*next.event }.notify(usize::MAX);
        }
    }

    /// Members present, the leader among them (the doorbell skips its hints for a leader alone).
    pub fn members(&self) -> usize {
        self.state.lock().members.len()
    }
}

impl State {
    fn blocker_of(&self, id: u64) -> Option<*const dyn Blocker> {
        self.members.iter().find(|m| m.id == id).map(|m| m.blocker)
    }
}

/// What the leader sleeps on after [`Room::arm_all`].
#[derive(Default)]
pub(super) struct Sleep {
    /// The fds of the distinct blockers, with the blockers' serials ([`Room::sleep_on_fds`]).
    pub members: Vec<(u64, std::os::fd::RawFd)>,
    pub cap: Option<Duration>,
    /// All members share this blocker: sleep in it (its own `block`).
    pub single: Option<*const dyn Blocker>,
    /// A distinct blocker has no fd: with several, the leader naps at most [`NO_KICK_NAP`].
    pub no_fd: bool,
}

impl Sleep {
    /// The fds the leader sleeps on.
    pub fn fds(&self) -> impl Iterator<Item = std::os::fd::RawFd> + '_ {
        self.members.iter().map(|&(_, fd)| fd)
    }
}

/// The longest nap of a leader that cannot sleep on everything it leads for (no kick fd, or a
/// blocker without an fd among several).
pub const NO_KICK_NAP: Duration = Duration::from_millis(1);

/// A member's place in a room; leaves it (handing off the lead if it held it) when dropped.
pub struct Membership<'a> {
    room: &'a Room,
    id: u64,
    arms_itself: bool,
}

impl Membership<'_> {
    /// The member's blocker is one the leader's sleep polls already: the member pulls its own
    /// source and arms its blocker, as the leader would have (then
    /// [`Membership::could_not_arm`] if it never could).
    pub(super) fn arms_itself(&self) -> bool {
        self.arms_itself
    }

    /// The member's blocker kept something pending: the leader, woken for it, pulls and arms
    /// it in its next round.
    pub(super) fn could_not_arm(&self) {
        let mut st = self.room.state.lock();
        if let Some(m) = st.members.iter_mut().find(|m| m.id == self.id) {
            m.due = true;
            m.fresh = true;
        }
        let leader_blocker = st.leader.and_then(|l| st.blocker_of(l));
        drop(st);
        // SAFETY: as in `Room::join`.
        self.room
            .interrupt_leader(leader_blocker.map(|b| unsafe { &*b }));
    }
}

impl Drop for Membership<'_> {
    fn drop(&mut self) {
        self.room.leave(self.id);
    }
}

/// Pulls `source`, then arms `blocker`, pulling again between tries while the blocker says
/// something is pending (at most 3 arms); false if it never armed. What the leader does to a
/// member's blocker, and a member that arms its own (see [`Membership::arms_itself`]).
pub(super) fn pull_then_arm(source: &dyn Source, blocker: &dyn Blocker) -> bool {
    source.pull();
    for _ in 0..3 {
        if blocker.arm() {
            return true;
        }
        source.pull();
    }
    false
}

/// The time left until `until`, bounded by `cap`; None: no limit.
pub(super) fn limit(until: Option<Instant>, cap: Option<Duration>) -> Option<Duration> {
    let left = until.map(|u| u.saturating_duration_since(Instant::now()));
    match (left, cap) {
        (Some(l), Some(c)) => Some(l.min(c)),
        (l, None) => l,
        (None, c) => c,
    }
}
