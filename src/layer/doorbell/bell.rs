//! Sleeping over shm: the doorbell between rscntr processes, and its waiter's side
//! ([`BellBlocker`] for a domain's room, [`SlotBlocker`] for a counter's own waiter). The two
//! blockers share this file (past 600 lines) because they share one handshake on one page: the
//! slot waiter's arming, bounds and pull adaptation are the bell's own. What the bell is made
//! of is `bell_files.rs`; the ringer's side `peers.rs` (peers' bells mapped and rung) and
//! `ring.rs` (endpoints' tables that ring).
//!
//! shm has nothing to block on (its waits yield, its CQs and counters refuse FI_WAIT_FD), and
//! nothing in libfabric lets one process wake another that sleeps. rscntr adds it between
//! rscntr processes, as UCX's shared-memory transports do between theirs (a datagram to a
//! socket the receiver sleeps on, sent only by a sender that finds the receiver armed):
//!
//! - **What a domain publishes.** A domain whose counters are waited on ([`BellBlocker`])
//!   has a wake socket (an `AF_UNIX` datagram socket bound to an address the kernel picks in
//!   the abstract namespace: epoll-able, nothing in the file system) and one page of shared
//!   memory (a memfd sealed against shrinking and growing, so no peer can make it fault) that
//!   holds its armed word ([`crate::engine::bell`]) and the socket's address. Each of its
//!   endpoints names the page in a small file, `/dev/shm/rscntr_bell_<uid>_<hash of the
//!   endpoint's shm address>` (mode 0600: private to the user, as shm's own regions are),
//!   holding the creator's pid, pid namespace and the memfd's descriptor number, which a peer
//!   opens through `/proc/<pid>/fd/<n>`. The file is removed when the endpoint closes, on the
//!   fatal signals shm cleans up on (SIGBUS, SIGSEGV, SIGTERM, SIGINT), and, after a SIGKILL,
//!   by the next rscntr process that makes a bell (it removes files of dead pids of its own pid
//!   namespace). The memfd and the socket vanish with the process. An endpoint of a domain that
//!   never waits names no page: its file says only that it rings (`bell_files::NO_PAGE`).
//! - **Arming** (a waiter about to sleep): drain the socket, set its way's bit in the word
//!   (`engine::bell::FUTEX` for threads that sleep in [`Blocker::block`], a futex on the word;
//!   `SOCKET` for threads in `poll()` on the socket), drive the core's progress once more and
//!   re-check, then sleep (see [`Blocker::arm`] below, and `engine/futex.rs` for why a futex).
//! - **Ringing** (`ring.rs`): every endpoint over shm, whether its domain waits or not, gets data
//!   tables that, after each operation the core accepted, look up the destination's page once
//!   (cached per address) and then pay one fence and one load of its armed word; when armed,
//!   one `FUTEX_WAKE` and/or one `sendto`, for the ways armed. After a pull that moved a counter
//!   (a waiter's, or a read of a counter), rscntr rings the peers its endpoints have mapped that
//!   are armed (a response to their operation may be what they wait for).
//! - **Hints.** An endpoint's name file also carries the slots of the counters bound to it
//!   ([`BellBlocker::add_feed`]); a ringer sets them in the page's `hints` before it disarms the
//!   word, and the thread it wakes progresses those counters' endpoints first
//!   (`BellBlocker::progress_hinted`), not after the arming's pull of every endpoint. After a
//!   ring of the futex way the word stays `engine::bell::RUNG` until the leader leaves its wait,
//!   every arrival meanwhile leaves a hint, and the leader's next arming drives only the hinted
//!   feeds (`BellBlocker::arm_for`).
//! - **One wake per completion** ([`SlotBlocker`]). The waiter of a counter whose slot is one
//!   of the first 127 and that was bound to its endpoints before they were enabled (so that
//!   their name files carry its hint) sleeps on its own bit of the page's slot words, outside
//!   the room: a ringer wakes the slots its hints name (`FUTEX_WAKE_BITSET`), and the woken
//!   waiter drives its own counter's endpoints. The room's leader (which would be woken, drive
//!   the hinted endpoints, and wake the waiter: two wakes in turn) sleeps only for the others:
//!   counters beyond 127, bound late, or in a domain that falls back (below).
//! - **Peers that do not ring.** A peer without a name file (plain shm) or of another pid
//!   namespace never rings: once rscntr sees one among the peers it sends to, or enables an
//!   endpoint of its own without a bell (before the domain waited), waits in the domain
//!   re-check every [`FALLBACK_SLEEP`] instead of [`NORMAL_SLEEP`], and say so once in the log.
//!   No sleep on the armed word is ever longer than [`NORMAL_SLEEP`], none on a slot longer
//!   than [`SLOT_SLEEP`]: a peer that died or wrote garbage over the page costs at most that
//!   much latency, never a hang.
//! - **Garbage.** rscntr reads nothing from a peer's page but its armed word (the socket
//!   address is copied once, when the page is mapped, and checked), and nothing from its own
//!   page but the words it swaps (armed, ringer's CPU, hints, slots): a peer writing garbage makes
//!   spurious rings or missed ones (bounded above), or progress calls on the wrong counter.

use super::answers::DomainAnswers;
use super::bell_files::{
    HINT_ALL, HINT_SLOTS, Hints, Mutex, PAGE, Page, join_hints, last_error, shared_page,
    slot_bits_of, split_hints, wake_socket,
};
pub use super::bell_files::{NameFile, uninstall_cleanup};
use super::peers::DomainPeers;
use crate::boundary::ffi::err;
use crate::engine::{Blocker, EventFd, Room, Token, bell, futex, poll_which};
use crate::{fi_info, fi_warn};
use std::ffi::c_int;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// The longest sleep of a waiter whose peers all ring: a bound against peers that died or
/// wrote garbage over the page, not a schedule (a sleeping waiter wakes 20 times a second).
pub const NORMAL_SLEEP: Duration = Duration::from_millis(50);
/// How long a waiter keeps driving shm's progress (yielding between passes) before it arms
/// and sleeps: longer than a ping-pong's round trip over shm (3 to 20 us here), so that a
/// peer that answers at once is seen without a ring, and short against an idle wait.
pub const PULL_BEFORE_SLEEP: Duration = Duration::from_micros(50);
/// The longest pull before a sleep, while rings come soon after each sleep (see
/// `BellBlocker::adapt_pull`).
pub const PULL_MAX: Duration = Duration::from_millis(1);
/// A sleep a ring ends sooner than this is traffic (the pull grows).
const ACTIVE: Duration = Duration::from_micros(500);
/// A sleep that lasts this long is idleness (the pull shrinks).
const IDLE: Duration = Duration::from_millis(5);
/// A yield that takes longer ran another thread on this CPU (a yield alone takes about 1 µs).
const SHARED_YIELD: Duration = Duration::from_micros(3);
/// The longest sleep once a peer that does not ring has been seen.
pub const FALLBACK_SLEEP: Duration = Duration::from_millis(1);
/// The longest sleep of a thread asleep on its slot ([`SlotBlocker`]): a bound against peers
/// that died or wrote garbage, as [`NORMAL_SLEEP`] is for the armed word, longer because each
/// waiter of a domain sleeps on its own: at 250 ms, 64 idle waiters (`bench/growth.c -m waiters
/// -N 64` over shm) woke 3 of them per 25 ms window and cost 216 µs of CPU per window, 50 at 1 s
/// (as the room's one leader at 50 ms).
pub const SLOT_SLEEP: Duration = Duration::from_millis(1000);

// ---- The receiving side: a domain's bell ------------------------------------------------

/// A domain's bell: its wake socket and shared page, and how a waiter sleeps on them. Shared by
/// every bound counter of the domain (one room, one leader sleeping on the socket), made when
/// the first counter that waits binds or the first endpoint of a domain that waits is enabled.
pub struct BellBlocker {
    socket: OwnedFd,
    page: *mut Page,
    /// The page's memfd, kept open: peers open it through /proc/<pid>/fd/<n>.
    memfd: OwnedFd,
    /// The longest sleep, in nanoseconds ([`NORMAL_SLEEP`] or [`FALLBACK_SLEEP`]).
    cap_ns: AtomicU64,
    /// The last sleep ended by the bell's own bound, not by a ring (see `unrung_arrival`).
    unrung_wake: AtomicBool,
    /// How long waiters pull before they sleep, in nanoseconds (see `adapt_pull`).
    pull_ns: AtomicU64,
    /// Counts brought in after such sleeps.
    unrung_arrivals: std::sync::atomic::AtomicU32,
    said_fallback: AtomicBool,
    /// The core counters of the domain's bound counters, each progressed by a waiter's pull
    /// (shm progresses per endpoint: a core counter's read drives the endpoints bound to it),
    /// by slot: a feed keeps its slot while it lives (its bit in the page's `hints`); a closed
    /// feed's slot is empty until a new feed takes it.
    feeds: Mutex<Feeds>,
    /// The peers the domain's endpoints have mapped, rung after a waiter's pull when armed
    /// (the domain's, which it has whether it waits or not).
    peers: std::sync::Arc<DomainPeers>,
    /// What the domain's progress answers its peers (see `answers.rs`).
    answers: std::sync::Arc<DomainAnswers>,
    room: std::sync::Arc<Room>,
}

// SAFETY: the page is a shared mapping written only through its atomic word; the rest is Sync.
unsafe impl Send for BellBlocker {}
// SAFETY: as above.
unsafe impl Sync for BellBlocker {}

/// What drives a core counter's progress (a feed of the domain, see `feed.rs`).
pub trait Progressed {
    fn progress_only(&self);
}

/// A domain's feeds by slot, and the empty slots.
#[derive(Default)]
struct Feeds {
    slots: Vec<Option<*const dyn Progressed>>,
    free: Vec<usize>,
}

impl Feeds {
    fn iter(&self) -> impl Iterator<Item = &*const dyn Progressed> {
        self.slots.iter().flatten()
    }
}

impl BellBlocker {
    pub fn new(
        room: std::sync::Arc<Room>,
        peers: std::sync::Arc<DomainPeers>,
        answers: std::sync::Arc<DomainAnswers>,
    ) -> Result<BellBlocker, c_int> {
        let socket = wake_socket().map_err(|e| {
            fi_warn!(Domain, "cannot make the doorbell's wake socket: {e}");
            err::EOTHER
        })?;
        let (memfd, page) = shared_page(&socket).map_err(|e| {
            fi_warn!(Domain, "cannot make the doorbell's shared page: {e}");
            err::EOTHER
        })?;
        // SAFETY: an all-zero stat is valid as an out value.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: our own descriptor; st lives across the call.
        if unsafe { libc::fstat(memfd.as_raw_fd(), &mut st) } != 0 {
            fi_warn!(
                Domain,
                "cannot stat the doorbell's shared page: {}",
                last_error()
            );
            return Err(err::EOTHER);
        }
        peers.set_own((st.st_dev, st.st_ino));
        Ok(BellBlocker {
            socket,
            page,
            memfd,
            cap_ns: AtomicU64::new(NORMAL_SLEEP.as_nanos() as u64),
            unrung_wake: AtomicBool::new(false),
            pull_ns: AtomicU64::new(PULL_BEFORE_SLEEP.as_nanos() as u64),
            unrung_arrivals: std::sync::atomic::AtomicU32::new(0),
            said_fallback: AtomicBool::new(false),
            feeds: Mutex::new(Feeds::default()),
            peers,
            answers,
            room,
        })
    }

    fn armed(&self) -> &bell::AtomicU32 {
        // SAFETY: the page is mapped as long as the blocker lives.
        unsafe { &(*self.page).armed }
    }

    /// The armed word as the kernel's futex calls take it.
    fn armed_word(&self) -> *const u32 {
        // SAFETY: the page is mapped as long as the blocker lives.
        unsafe { &*self.page }.armed_word()
    }

    /// Arms the word for `way` after draining the socket, then drives the progress of every
    /// bound counter's endpoints (after the arming: see `engine::bell`), which counts into
    /// their counters and wakes their waiters: false (look again before sleeping) when a ring
    /// came or the word was not armed for `way` (first arming, or a peer disarmed it to ring).
    ///
    /// After a ring of the futex way, until the leader leaves its wait, the word holds
    /// `engine::bell::RUNG` and every peer's operation toward the domain leaves a hint: an
    /// arming that finds it drives only the hinted feeds (with 64 counters waited on, one
    /// progress call per completion instead of 64). Not once a peer that never rings was seen
    /// (its work leaves no hint).
    fn arm_for(&self, way: u32) -> bool {
        let rang = self.drain_socket();
        let was = bell::arm_seeing(self.armed(), way);
        if was & bell::RUNG != 0 && !self.falls_back() {
            self.pull_hinted();
        } else {
            self.pull_domain();
        }
        was & way != 0 && !rang
    }

    /// Peers that do not ring were seen: every sleep is bounded by [`FALLBACK_SLEEP`].
    pub fn falls_back(&self) -> bool {
        self.said_fallback
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Takes the page's hints and drives the hinted feeds (all of them for [`HINT_ALL`]), the
    /// peers it answered rung as in [`Self::pull_domain`]; false when nothing was hinted.
    fn pull_hinted(&self) -> bool {
        // SAFETY: the page is mapped as long as the blocker lives; only the atomic is touched.
        let hints = unsafe { &(*self.page).hints }.each_ref().map(|h| {
            if h.load(std::sync::atomic::Ordering::Relaxed) == 0 {
                0
            } else {
                h.swap(0, SeqCst)
            }
        });
        let hints = join_hints(hints);
        if hints == 0 {
            return false;
        }
        if hints & HINT_ALL != 0 {
            self.pull_domain();
        } else {
            self.answers.around(|| self.progress_slots(hints));
        }
        true
    }

    /// Drives the feeds in the slots of `bits`' (a bit of no feed is ignored).
    fn progress_slots(&self, mut bits: Hints) {
        let feeds = self.feeds.lock();
        while bits != 0 {
            let slot = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if let Some(Some(f)) = feeds.slots.get(slot) {
                // SAFETY: a feed removes itself before it is freed (see add_feed).
                unsafe { &**f }.progress_only();
            }
        }
    }

    /// [`Blocker::arm`] for a thread that sleeps in `poll()` on the socket ([`Self::socket_fd`]:
    /// an FD counter's epoll set, the progress thread) rather than in [`Blocker::block`].
    pub fn arm_socket(&self) -> bool {
        self.arm_for(bell::SOCKET)
    }

    /// A thread woken by a peer's ring may have been put on the ringer's CPU: the kernel places
    /// a woken thread on its waker's CPU when its own is busy and skips its search for an
    /// idle CPU when the cache domain looks busy (spinning peers make it look so). The ringer
    /// goes on running (its own pull before it sleeps), and the two share a CPU, each
    /// yielding to the other, until the load balancer parts them, 8 to 30 ms later: a
    /// ping-pong over shm ran 4 times slower over that time (measured; pinned to two CPUs it
    /// did not). So a thread woken on its ringer's CPU notes it, and leaves that CPU when it
    /// next waits and is still there ([`leave_the_ringers_cpu`]): not at once, as the move
    /// (through the kernel's stopper thread) takes about 150 µs here, which a wake that
    /// returns to the application first does not pay.
    fn note_the_ringers_cpu(&self) {
        // SAFETY: the page is mapped as long as the blocker lives; only the atomic is touched.
        let ringer = unsafe { &(*self.page).ringer_cpu }.swap(0, SeqCst);
        // SAFETY: no arguments.
        let here = unsafe { libc::sched_getcpu() };
        if ringer != 0 && here >= 0 && ringer - 1 == here as u32 {
            WOKEN_ON_RINGERS_CPU.set(here);
        }
    }

    /// Ends the sleep of every thread in [`Blocker::block`] on this bell, each of which looks
    /// again (what `fi_cq_signal` does besides signalling its sleepers' kicks).
    pub fn kick_sleepers(&self) {
        bell::disarm(self.armed(), bell::FUTEX);
        // SAFETY: the word of the page this blocker keeps mapped.
        unsafe { futex::wake_all(self.armed_word()) };
    }

    /// Waits in the domain re-check every [`FALLBACK_SLEEP`] from now on: `why` names a peer
    /// (or an endpoint of ours) that does not ring. Once it has, one load (a sender calls it
    /// for every operation toward a peer without a bell).
    pub fn fall_back(&self, why: &str) {
        if self.falls_back() {
            return;
        }
        self.cap_ns.store(FALLBACK_SLEEP.as_nanos() as u64, SeqCst);
        if !self.said_fallback.swap(true, SeqCst) {
            fi_info!(
                Domain,
                "doorbell: {why} does not ring; waits in this domain re-check every {FALLBACK_SLEEP:?}"
            );
        }
    }

    /// Publishes the bell under the shm address of an endpoint of the domain: the name file
    /// that peers find it by, removed when the returned record drops. `hints`: the slots of
    /// the feeds of the counters bound to the endpoint (see [`Self::add_feed`]), which a peer
    /// that rings after an operation toward the endpoint sets in the page.
    pub fn publish(&self, addr: &[u8], hints: Hints) -> Result<NameFile, c_int> {
        let answers = self.answers.fd();
        NameFile::create(addr, self.memfd.as_raw_fd(), answers, hints).map_err(|e| {
            fi_warn!(EpCtrl, "cannot publish the endpoint's doorbell: {e}");
            err::EOTHER
        })
    }

    /// The page's descriptor (what a name record holds; how this domain lists itself as an
    /// asker, see `answers.rs`).
    pub(super) fn asker_key(&self) -> u64 {
        super::bell_files::asker_key(std::process::id(), self.memfd.as_raw_fd())
    }

    /// Before an endpoint of the domain asks a peer something only the peer's progress answers:
    /// `hints` (the feeds of the counters bound to that endpoint; every feed when none) are what
    /// a peer's ring for answers wakes (see `answers.rs`). A load per half while they are set.
    pub(super) fn wants_answers(&self, hints: Hints) {
        let hints = if hints == 0 { HINT_ALL } else { hints };
        // SAFETY: the page is mapped as long as the blocker lives; only its atomics are touched.
        let page = unsafe { &*self.page };
        for (half, bits) in page.answer_hints.iter().zip(split_hints(hints)) {
            if half.load(std::sync::atomic::Ordering::Relaxed) & bits != bits {
                half.fetch_or(bits, SeqCst);
            }
        }
        for (word, bits) in page.answer_slots.iter().zip(slot_bits_of(hints)) {
            if word.load(std::sync::atomic::Ordering::Relaxed) & bits != bits {
                word.fetch_or(bits, SeqCst);
            }
        }
    }

    /// After a sleep of `slept`: a ring that came soon means traffic a longer pull would have
    /// seen without a ring and a wake (a ping-pong whose peer was descheduled, or slower than
    /// the pull): waiters pull twice as long next time, up to [`PULL_MAX`]; a sleep that no ring
    /// ended, or a long one, means idleness: half as long, down to [`PULL_BEFORE_SLEEP`].
    /// Without it, two peers that once slept keep ringing and waking each other for every
    /// message (a ping-pong 5 to 15 times slower, measured).
    fn adapt_pull(&self, rung: bool, slept: Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        let now = self.pull_ns.load(Relaxed);
        let next = if rung && slept < ACTIVE {
            (now * 2).min(PULL_MAX.as_nanos() as u64)
        } else if !rung || slept >= IDLE {
            (now / 2).max(PULL_BEFORE_SLEEP.as_nanos() as u64)
        } else {
            now
        };
        if next != now {
            self.pull_ns.store(next, Relaxed);
        }
    }

    /// Whether the last sleep ended by the bell's own bound (and forgets it).
    pub fn take_unrung_wake(&self) -> bool {
        self.unrung_wake.load(std::sync::atomic::Ordering::Relaxed)
            && self.unrung_wake.swap(false, SeqCst)
    }

    /// A pull after a sleep that no ring ended brought in a count: a peer completed an
    /// operation toward this domain and did not ring (one that never waits, plain shm, another
    /// pid namespace), or a ring and the bound crossed. Twice, and waits fall back.
    pub fn unrung_arrival(&self) {
        let n = self.unrung_arrivals.fetch_add(1, SeqCst) + 1;
        if n == 1 {
            fi_info!(
                Domain,
                "doorbell: a wait that its own bound ended found a count no ring announced (a peer \
                 completed an operation toward this domain without ringing, or its ring crossed \
                 the bound)"
            );
        }
        if n >= 2 {
            self.fall_back("a peer that completed operations toward this domain without ringing");
        }
    }

    /// A feed whose core counter waiters drive (see [`Progressed`]), until [`Self::remove_feed`].
    /// Returns the feed's slot, which removes it and gives its hint ([`Self::hint_of`]).
    ///
    /// # Safety
    /// `feed` lives until removed.
    pub unsafe fn add_feed(&self, feed: *const dyn Progressed) -> usize {
        let mut feeds = self.feeds.lock();
        let slot = match feeds.free.pop() {
            Some(free) => free,
            None => {
                feeds.slots.push(None);
                feeds.slots.len() - 1
            }
        };
        feeds.slots[slot] = Some(feed);
        slot
    }

    /// A feed slot's bit in the hints of the endpoints its counter is bound to
    /// ([`Self::publish`]): one of the first [`HINT_SLOTS`] has one, others (and no slot,
    /// `usize::MAX`) 0.
    pub fn hint_of(slot: usize) -> Hints {
        if slot < HINT_SLOTS {
            1 << slot
        } else {
            HINT_ALL
        }
    }

    /// Removes `feed` from `slot` (again: nothing).
    pub fn remove_feed(&self, slot: usize, feed: *const dyn Progressed) {
        let mut feeds = self.feeds.lock();
        if let Some(f) = feeds.slots.get_mut(slot)
            && f.is_some_and(|f| std::ptr::addr_eq(f, feed))
        {
            *f = None;
            feeds.free.push(slot);
        }
    }

    /// After a ring woke this thread, in a domain of several feeds and waiters: the feeds the
    /// ringers hinted at, progressed at once (their counters' waiters are woken now, not after the
    /// arming's pull of every feed of the domain), and the peers this progress answered
    /// rung. The hints come from the page peers write: a bit of no feed is ignored, a
    /// bit of the wrong feed costs one progress call.
    ///
    /// A waiter it woke is often put on this thread's CPU, where it would wait for this
    /// thread's next sleep, after the arming's pull of every feed: this thread yields to it
    /// first. Measured (`bench/growth.c -m waiters -N 64` over shm under `taskset -c 0`): a
    /// completion's waiter returned after 240-250 µs before hints, 75-83 µs with them and the
    /// yield (one waiter alone: 53-57).
    /// The hints are left in place where this does not take them (its two early returns): the
    /// next arming takes them (`pull_hinted`).
    fn progress_hinted(&self) {
        if self.room.members() == 1 {
            // The leader alone (one thread waiting, however many counters): its own pull, next,
            // does what it waits for.
            return;
        }
        if self.feeds.lock().iter().nth(1).is_none() {
            // One feed: the waiter's own pull, next, is the same progress call.
            return;
        }
        let woken = crate::engine::woken_others_here();
        if self.pull_hinted() && crate::engine::woken_others_here() != woken {
            std::thread::yield_now();
        }
    }

    /// What arming drives: every bound counter's endpoints (shm progresses each endpoint on
    /// its own). The peers this progress answered are rung by `answers.around`, each only when
    /// it asked something new. No ring to every armed peer: arming follows every wake, so two
    /// processes whose sleepers rang each other after each arming would wake each other for as
    /// long as both slept (measured: an idle waiter woken every 1.2 ms, 3 to 12 % of a CPU).
    pub fn pull_domain(&self) {
        self.answers.around(|| {
            let feeds = self.feeds.lock();
            for f in feeds.iter() {
                // SAFETY: a feed removes itself before it is freed (see add_feed).
                unsafe { &**f }.progress_only();
            }
        });
    }

    /// Rings each peer the domain's endpoints have mapped that is armed (see
    /// [`DomainPeers::ring_back`]).
    pub fn ring_back(&self) {
        self.peers.ring_back();
    }

    fn drain_socket(&self) -> bool {
        let mut buf = [0u8; 64];
        let mut any = false;
        loop {
            // SAFETY: our socket; buf lives across the call.
            let n = unsafe {
                libc::recv(
                    self.socket.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                return any;
            }
            any = true;
        }
    }

    /// For a thread that sleeps on the bell outside the domain's room (a CQ read): arms, looks
    /// (`look`, which drives the progress it needs; Some ends the wait), and sleeps until a ring,
    /// a kick (signalled, then [`Self::kick_sleepers`]), `until` or the bell's bound, then looks
    /// again.
    pub fn sleep_outside_room<T>(
        &self,
        kick: &EventFd,
        until: Option<Instant>,
        mut look: impl FnMut() -> Option<T>,
    ) -> Option<T> {
        let found = self.sleep_outside_room_until_found(kick, until, &mut look);
        // Peers stop leaving hints: nobody of this wait is awake to take them.
        self.leader_left();
        found
    }

    fn sleep_outside_room_until_found<T>(
        &self,
        kick: &EventFd,
        until: Option<Instant>,
        look: &mut impl FnMut() -> Option<T>,
    ) -> Option<T> {
        loop {
            if !self.arm() {
                if let Some(t) = look() {
                    break Some(t);
                }
                continue;
            }
            if let Some(t) = look() {
                break Some(t);
            }
            if until.is_some_and(|u| Instant::now() >= u) {
                break None;
            }
            self.block(Token(0), kick, until);
            kick.drain();
            if let Some(t) = look() {
                break Some(t);
            }
            if until.is_some_and(|u| Instant::now() >= u) {
                break None;
            }
        }
    }

    /// The wake socket (for an FD counter's epoll set and the progress thread).
    pub fn socket_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }
}

impl Drop for BellBlocker {
    fn drop(&mut self) {
        // SAFETY: mapped by shared_page, unmapped once.
        unsafe { libc::munmap(self.page.cast(), PAGE) };
    }
}

impl Blocker for BellBlocker {
    fn prepare(&self) -> Token {
        Token(0)
    }

    /// Arms the word for a sleep in [`Blocker::block`] (see `arm_for`).
    fn arm(&self) -> bool {
        self.arm_for(bell::FUTEX)
    }

    /// Asleep in a futex on the armed word while it stays armed for it: a peer that rings
    /// clears the word and wakes it (see `engine/futex.rs` for why not the socket), as does
    /// [`Blocker::interrupt`] after it signals `kick`.
    fn block(&self, _token: Token, kick: &EventFd, until: Option<Instant>) {
        let cap = Duration::from_nanos(self.cap_ns.load(SeqCst));
        let t0 = Instant::now();
        let end = until.map_or(t0 + cap, |u| u.min(t0 + cap));
        let left = end.saturating_duration_since(t0);
        // A plain FUTEX_WAKE (a ring, `kick_sleepers`) wakes it: every futex bit.
        let woke = sleep_while_armed(self.armed(), bell::FUTEX, u32::MAX, kick, Some(end));
        // Cleared: a ring, or an interrupt (which clears the bit too).
        let (rung, kicked) = (woke == Woke::Cleared, woke == Woke::Kicked);
        self.adapt_pull(rung, t0.elapsed());
        if rung {
            self.note_the_ringers_cpu();
            self.progress_hinted();
        }
        if !rung && !kicked && left == cap {
            // The bell's own bound ended this sleep (not a ring, an interrupt or the caller's
            // deadline): see `unrung_arrival`. What ended it may be work that left no hint:
            // the next arming looks everywhere.
            self.unrung_wake.store(true, SeqCst);
            bell::end_rung(self.armed());
        }
    }

    /// Signals `kick`, then clears the word's futex bit and wakes its sleepers (see `block`).
    fn interrupt(&self, kick: &EventFd) {
        kick.signal();
        self.kick_sleepers();
    }

    /// At the start of a wait, first: a thread woken on its ringer's CPU leaves it if it is shared
    /// ([`leave_the_ringers_cpu`]).
    ///
    /// A sleep here costs the peer a ring and this thread a wake; a peer in a ping-pong answers
    /// sooner: pull (yielding) that long first (see `adapt_pull`).
    fn pull_before_sleep(&self) -> Option<Duration> {
        leave_the_ringers_cpu();
        Some(Duration::from_nanos(
            self.pull_ns.load(std::sync::atomic::Ordering::Relaxed),
        ))
    }

    fn room(&self) -> Option<&Room> {
        Some(&self.room)
    }

    fn fd(&self) -> Option<RawFd> {
        Some(self.socket.as_raw_fd())
    }

    fn max_sleep(&self) -> Option<Duration> {
        Some(Duration::from_nanos(self.cap_ns.load(SeqCst)))
    }

    /// Peers stop leaving hints (`engine::bell::RUNG`): nobody may be awake to take them.
    fn leader_left(&self) {
        bell::end_rung(self.armed());
    }
}

/// How the waiter of one counter sleeps when its counter has a slot of the bell's (one of the
/// first [`HINT_SLOTS`] feeds of the domain, bound to its endpoints before they were enabled, so
/// that their name files carry its hint): on its own bit of the page's slot words, outside the
/// domain's room. A peer that completes an operation toward one of those endpoints wakes it
/// alone (`FUTEX_WAKE_BITSET` with its bit), and it drives its own counter's endpoints: one
/// kernel wake per completion, the thread it satisfies, where the room's leader would be woken
/// first and then wake that thread (two wakes, in turn). Arming is the armed word's handshake
/// (`engine::bell`) on the slot's bit: set, fence, then the engine's pull looks; a ringer
/// publishes, fences, loads the slot words of its peer's hints.
pub struct SlotBlocker {
    bell: std::sync::Arc<BellBlocker>,
    /// The feed's slot ([`BellBlocker::add_feed`]; `usize::MAX`: none yet).
    slot: std::sync::atomic::AtomicUsize,
    /// The last sleep here ended by [`SLOT_SLEEP`], not by a ring: this waiter's own, as the
    /// room's leader has the bell's (a domain-wide flag that each of 64 waiters' bounds set
    /// would be taken by the pull of a rung completion, and make the domain fall back).
    unrung_wake: AtomicBool,
}

impl SlotBlocker {
    pub fn new(bell: std::sync::Arc<BellBlocker>) -> SlotBlocker {
        SlotBlocker {
            bell,
            slot: std::sync::atomic::AtomicUsize::new(usize::MAX),
            unrung_wake: AtomicBool::new(false),
        }
    }

    /// The feed took `slot` in the bell.
    pub fn set_slot(&self, slot: usize) {
        self.slot.store(slot, SeqCst);
    }

    /// The feed's slot (`usize::MAX`: none).
    pub fn slot(&self) -> usize {
        self.slot.load(SeqCst)
    }

    /// Whether the last sleep here ended by its bound (and forgets it): see
    /// [`BellBlocker::take_unrung_wake`].
    pub fn take_unrung_wake(&self) -> bool {
        self.unrung_wake.load(std::sync::atomic::Ordering::Relaxed)
            && self.unrung_wake.swap(false, SeqCst)
    }

    /// Whether the counter's waiter sleeps here: its feed has a slot with a bit of its own, and
    /// no peer that never rings was seen (its work leaves no ring; the room's leader re-checks
    /// for everybody every [`FALLBACK_SLEEP`]).
    pub fn serves(&self) -> bool {
        self.slot.load(std::sync::atomic::Ordering::Relaxed) < HINT_SLOTS && !self.bell.falls_back()
    }

    /// The slot's word and bit (only while [`Self::serves`]).
    fn slot_word(&self) -> (&bell::AtomicU32, u32) {
        let slot = self.slot.load(std::sync::atomic::Ordering::Relaxed) % HINT_SLOTS;
        // SAFETY: the page is mapped as long as the bell lives, which this blocker keeps.
        let word = unsafe { &(*self.bell.page).slots[slot / 32] };
        (word, 1 << (slot % 32))
    }
}

impl Blocker for SlotBlocker {
    fn prepare(&self) -> Token {
        Token(0)
    }

    /// Sets the slot's bit; false when it was clear (a new arming, or a ringer took it since):
    /// the engine pulls this counter's endpoints, then arms again, before it sleeps.
    fn arm(&self) -> bool {
        let (word, bit) = self.slot_word();
        bell::arm(word, bit)
    }

    /// Asleep in a futex on the slot word, for its bit, while the bit stays set: a peer's ring
    /// or [`Blocker::interrupt`] (after it signals `kick`) clears it and wakes this thread.
    fn block(&self, _token: Token, kick: &EventFd, until: Option<Instant>) {
        let t0 = Instant::now();
        let bound = (!crate::boundary::testhook::slot_unbounded()).then(|| t0 + SLOT_SLEEP);
        let end = match (until, bound) {
            (Some(u), Some(b)) => Some(u.min(b)),
            (u, b) => u.or(b),
        };
        let capped = bound.is_some_and(|b| until.is_none_or(|u| u > b));
        let (word, bit) = self.slot_word();
        let woke = sleep_while_armed(word, bit, bit, kick, end);
        let (rung, kicked) = (woke == Woke::Cleared, woke == Woke::Kicked);
        self.bell.adapt_pull(rung, t0.elapsed());
        if rung {
            self.bell.note_the_ringers_cpu();
        } else if !kicked && capped {
            // The bound ended this sleep: a count the next pull brings in came unrung.
            self.unrung_wake.store(true, SeqCst);
        }
    }

    /// Signals `kick`, then clears the slot's bit and wakes its sleeper (see `block`).
    fn interrupt(&self, kick: &EventFd) {
        kick.signal();
        let (word, bit) = self.slot_word();
        if word.fetch_and(!bit, SeqCst) & bit != 0 {
            // SAFETY: a word of the page the bell keeps mapped.
            unsafe { futex::wake_bits(std::ptr::from_ref(word).cast(), bit) };
        }
    }

    /// As the bell's: leave a shared ringer's CPU, pull a while before sleeping.
    fn pull_before_sleep(&self) -> Option<Duration> {
        self.bell.pull_before_sleep()
    }
}

/// How [`sleep_while_armed`] ended.
#[derive(PartialEq, Eq)]
enum Woke {
    /// The bit was cleared: a ring, or an interrupt.
    Cleared,
    Kicked,
    /// The end came.
    Ended,
}

/// Sleeps in a futex on `word` while `bit` stays set in it (a ring or an interrupt clears it),
/// `kick` is not signalled and `end` has not come. `futex_bits`: the wakes that reach the
/// sleeper (`FUTEX_WAKE_BITSET` bits; all of them for a plain `FUTEX_WAKE`).
fn sleep_while_armed(
    word: &bell::AtomicU32,
    bit: u32,
    futex_bits: u32,
    kick: &EventFd,
    end: Option<Instant>,
) -> Woke {
    loop {
        let w = word.load(SeqCst);
        if w & bit == 0 {
            return Woke::Cleared;
        }
        // An interrupt signals the kick before it clears the bit: one that came before this
        // round armed the bit again shows only in the kick (a syscall, before a sleep only).
        if poll_which(kick.as_raw_fd(), -1, Some(Duration::ZERO)).0 {
            return Woke::Kicked;
        }
        let now = Instant::now();
        if end.is_some_and(|e| now >= e) {
            return Woke::Ended;
        }
        let limit = end.map(|e| e - now);
        // SAFETY: a word of a bell's page, which the caller keeps mapped.
        if !unsafe { futex::wait_bits(std::ptr::from_ref(word).cast(), w, limit, futex_bits) } {
            return Woke::Ended;
        }
    }
}

thread_local! {
    /// The CPU this thread was woken on by a ring from a peer running there (-1: none), see
    /// `BellBlocker::note_the_ringers_cpu`.
    static WOKEN_ON_RINGERS_CPU: std::cell::Cell<c_int> = const { std::cell::Cell::new(-1) };
}

/// At the start of a wait: a thread woken on its ringer's CPU that is still there, and shares it
/// (a yield gives the CPU to another thread for longer than [`SHARED_YIELD`]: a peer that went
/// to sleep after its ring leaves the CPU to this thread alone), moves off it, with its
/// affinity without that CPU for one call, then its own again. A thread bound to one CPU (as
/// MPI launchers bind ranks) is never moved.
fn leave_the_ringers_cpu() {
    let noted = WOKEN_ON_RINGERS_CPU.replace(-1);
    // SAFETY: no arguments.
    if noted < 0 || unsafe { libc::sched_getcpu() } != noted {
        return;
    }
    let t0 = Instant::now();
    std::thread::yield_now();
    if t0.elapsed() < SHARED_YIELD {
        return;
    }
    // SAFETY: an all-zero cpu_set_t is an empty set.
    let mut mine: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: the calling thread's mask into a live cpu_set_t of that size.
    if unsafe { libc::sched_getaffinity(0, size, &mut mine) } != 0
        // SAFETY: a live set.
        || unsafe { libc::CPU_COUNT(&mine) } < 2
    {
        return;
    }
    let mut elsewhere = mine;
    // SAFETY: a live set; `noted` is a CPU number the kernel gave.
    unsafe { libc::CPU_CLR(noted as usize, &mut elsewhere) };
    // SAFETY: live sets of that size, for the calling thread only; its own mask is put back at
    // once (the move has happened when the first call returns).
    unsafe {
        if libc::sched_setaffinity(0, size, &elsewhere) == 0 {
            libc::sched_setaffinity(0, size, &mine);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// A feed that counts the progress driven through it.
    #[derive(Default)]
    struct Counted(AtomicU32);

    impl Progressed for Counted {
        fn progress_only(&self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    /// A ring after an operation toward an endpoint progresses, in the thread it wakes, the
    /// feeds of the counters bound to that endpoint (its name record's hints) before anything
    /// else; the domain's other feeds wait for the next arming's pull.
    #[test]
    fn a_ring_progresses_the_hinted_feed_in_the_woken_thread() {
        let peers: std::sync::Arc<DomainPeers> = Default::default();
        let answers = std::sync::Arc::new(DomainAnswers::new(peers.clone()));
        let bell =
            BellBlocker::new(std::sync::Arc::new(Room::new()), peers, answers).expect("a bell");
        let feeds = [Counted::default(), Counted::default()];
        let ptrs = feeds
            .each_ref()
            .map(|f| f as &dyn Progressed as *const dyn Progressed);
        // SAFETY: the feeds outlive their removal below.
        let slots = ptrs.map(|p| unsafe { bell.add_feed(p) });
        assert_eq!(slots, [0, 1]);
        assert_eq!(slots.map(BellBlocker::hint_of), [1, 2]);
        let addr = format!("fi_shm://rscntr_hint_test_{}", std::process::id());
        let name = bell
            .publish(addr.as_bytes(), BellBlocker::hint_of(slots[1]))
            .expect("published");
        let Some(crate::layer::doorbell::peer_bell::Mapped::Bell(peer)) =
            crate::layer::doorbell::peer_bell::map_peer(addr.as_bytes())
        else {
            panic!("the bell maps as a peer's");
        };
        let progressed = || feeds.each_ref().map(|f| f.0.load(SeqCst));
        let (before, after) = std::thread::scope(|s| {
            let sleeper = s.spawn(|| {
                // Arming pulls every feed; the second arming finds the word armed.
                while !bell.arm() {}
                let before = progressed();
                let kick = EventFd::new().expect("an eventfd");
                // Each sleep is bounded (NORMAL_SLEEP); the word stays armed across them.
                let end = Instant::now() + Duration::from_secs(10);
                while progressed() == before && Instant::now() < end {
                    bell.block(Token(0), &kick, Some(end));
                }
                (before, progressed())
            });
            // The sleeper has armed by now (a ring before that finds nobody armed, and the
            // sleeper waits out its 10 s: the assertions fail).
            std::thread::sleep(Duration::from_millis(20));
            peer.ring_if_armed();
            sleeper.join().unwrap()
        });
        assert_eq!(after[1], before[1] + 1, "the hinted feed, on the wake");
        assert_eq!(
            after[0], before[0],
            "the other feed, not before the next arming"
        );
        // Rung, the word holds RUNG: an arming drives only what peers hinted since.
        bell.arm();
        assert_eq!(
            progressed(),
            after,
            "an arming after a ring, nothing hinted"
        );
        bell.arm();
        peer.ring_if_armed();
        bell.arm();
        assert_eq!(
            progressed(),
            [after[0], after[1] + 1],
            "an arming after a ring drives the hinted feed only"
        );
        // The leader leaves its wait: the next arming drives every feed again.
        bell.leader_left();
        bell.arm();
        assert_eq!(progressed(), [after[0] + 1, after[1] + 2], "every feed");
        drop(name);
        for (p, slot) in ptrs.into_iter().zip(slots) {
            bell.remove_feed(slot, p);
        }
    }
}
