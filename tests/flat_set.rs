//! A room leader's flattened epoll set (`src/engine/flat_set.rs`): wait sets nested as rxm's
//! over tcp (a per-member set holding an inner set that holds one progress set shared by all)
//! flattened into their leaves, and a room whose leader sleeps in it.

mod common;

use common::until;
use rscntr::engine::flat_set::{FlatSet, Unflattened, Woken};
use rscntr::engine::{Blocker, Counter, EventFd, Room, Source, Timeout, Token, WaitStrategy, Wake};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

/// Fds a test made, closed at its end.
#[derive(Default)]
struct Fds(Mutex<Vec<RawFd>>);

impl Fds {
    fn keep(&self, fd: RawFd) -> RawFd {
        assert!(fd >= 0, "{}", std::io::Error::last_os_error());
        self.0.lock().unwrap().push(fd);
        fd
    }
    fn epoll(&self) -> RawFd {
        // SAFETY: no memory arguments.
        self.keep(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })
    }
    fn eventfd(&self) -> RawFd {
        // SAFETY: no memory arguments.
        self.keep(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })
    }
    /// A pipe: (read end, write end).
    fn pipe(&self) -> (RawFd, RawFd) {
        let mut p = [0; 2];
        // SAFETY: fills two fds.
        assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_NONBLOCK) }, 0);
        (self.keep(p[0]), self.keep(p[1]))
    }
}

impl Drop for Fds {
    fn drop(&mut self) {
        for &fd in self.0.lock().unwrap().iter() {
            // SAFETY: fds this test opened.
            unsafe { libc::close(fd) };
        }
    }
}

fn add(set: RawFd, fd: RawFd, events: u32) {
    let mut ev = libc::epoll_event {
        events,
        u64: fd as u64,
    };
    // SAFETY: a valid event; the kernel checks the fds.
    let r = unsafe { libc::epoll_ctl(set, libc::EPOLL_CTL_ADD, fd, &mut ev) };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
}

const IN: u32 = libc::EPOLLIN as u32;

fn signal(efd: RawFd) {
    let one = 1u64;
    // SAFETY: 8 bytes from a live u64.
    assert_eq!(
        unsafe { libc::write(efd, (&one as *const u64).cast(), 8) },
        8
    );
}

/// Reads what `fd` has (an eventfd's count, or a pipe's bytes as one number each).
fn drain(fd: RawFd) -> Vec<u8> {
    let mut buf = [0u8; 64];
    // SAFETY: a live buffer; non-blocking fd.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    buf[..n.max(0) as usize].to_vec()
}

/// rxm's nesting over tcp, for `n` members: `shared` (tcp's progress set, holding a pipe's read
/// end), and per member a wrapper (the counter's wait set) holding its own signal and an inner
/// set (the inner CQ's wait set) that holds the inner CQ's signal and `shared`.
struct Nest {
    fds: Fds,
    wire: (RawFd, RawFd),
    shared: RawFd,
    wrappers: Vec<RawFd>,
    cq_signals: Vec<RawFd>,
    own_signals: Vec<RawFd>,
}

fn nest(n: usize) -> Nest {
    let fds = Fds::default();
    let wire = fds.pipe();
    let shared = fds.epoll();
    add(shared, wire.0, IN);
    let (mut wrappers, mut cq_signals, mut own_signals) = (vec![], vec![], vec![]);
    for _ in 0..n {
        let (inner, wrapper) = (fds.epoll(), fds.epoll());
        let (cq, own) = (fds.eventfd(), fds.eventfd());
        add(inner, shared, IN);
        add(inner, cq, IN);
        add(wrapper, inner, IN);
        add(wrapper, own, IN);
        wrappers.push(wrapper);
        cq_signals.push(cq);
        own_signals.push(own);
    }
    Nest {
        fds,
        wire,
        shared,
        wrappers,
        cq_signals,
        own_signals,
    }
}

fn members(wrappers: &[RawFd]) -> Vec<(u64, RawFd)> {
    wrappers
        .iter()
        .enumerate()
        .map(|(i, &fd)| (i as u64 + 1, fd))
        .collect()
}

/// An empty flattened set and the kick it holds.
fn flat_set() -> (EventFd, FlatSet) {
    let kick = EventFd::new().unwrap();
    let set = FlatSet::new(kick.as_raw_fd()).unwrap();
    (kick, set)
}

fn sorted(fds: &[RawFd]) -> Vec<RawFd> {
    let mut v = fds.to_vec();
    v.sort();
    v
}

const LOOK: Option<Duration> = Some(Duration::ZERO);
const LONG: Option<Duration> = Some(Duration::from_secs(10));

#[test]
fn a_shared_set_is_registered_once_and_wakes_every_member_that_holds_it() {
    let n = nest(2);
    let (_kick, mut set) = flat_set();
    set.sync(0, &members(&n.wrappers)).unwrap();
    // tcp's set once, and each member's two signals.
    assert_eq!(set.registered(), 1 + 2 * 2);
    let mut leaves: Vec<RawFd> = set
        .leaves_of(n.wrappers[0])
        .unwrap()
        .iter()
        .map(|l| l.fd)
        .collect();
    leaves.sort();
    let mut want = vec![n.shared, n.cq_signals[0], n.own_signals[0]];
    want.sort();
    assert_eq!(
        leaves, want,
        "the shared set is a leaf, the sets holding it are not"
    );

    let mut readable = Vec::new();
    assert_eq!(set.wait(LOOK, &mut readable), Woken::TimedOut);
    assert!(readable.is_empty());
    // A completion on the wire: every member's wait set is readable, as over rxm.
    signal_wire(&n, 0);
    assert_eq!(set.wait(LONG, &mut readable), Woken::Leaves);
    assert_eq!(sorted(&readable), sorted(&n.wrappers));
    drain(n.wire.0);
    // The inner CQ of the second member: only its member.
    signal(n.cq_signals[1]);
    assert_eq!(set.wait(LONG, &mut readable), Woken::Leaves);
    assert_eq!(readable, vec![n.wrappers[1]]);
    drain(n.cq_signals[1]);
    assert_eq!(set.wait(LOOK, &mut readable), Woken::TimedOut);
}

fn signal_wire(n: &Nest, member: u8) {
    // SAFETY: one byte from a live buffer into our own pipe.
    assert_eq!(
        unsafe { libc::write(n.wire.1, [member].as_ptr().cast(), 1) },
        1
    );
}

/// A member that leaves keeps its leaves in the set (it rests: a waiter whose wait returned is
/// back soon); a leaf only resting members hold, when ready, is not theirs to report but the
/// caller's to evict; coming back registers them again without reading /proc.
#[test]
fn a_member_that_leaves_rests_until_a_leaf_only_it_holds_is_ready() {
    let n = nest(2);
    let (_kick, mut set) = flat_set();
    let all = members(&n.wrappers);
    set.sync(0, &all).unwrap();
    set.sync(0, &all[1..]).unwrap();
    assert_eq!(
        set.registered(),
        1 + 2 * 2,
        "the resting member's leaves stay"
    );
    assert_eq!(sorted_serials(&set), vec![1, 2]);
    let mut readable = Vec::new();
    signal_wire(&n, 1);
    set.wait(LONG, &mut readable);
    assert_eq!(
        readable,
        vec![n.wrappers[1]],
        "a shared leaf wakes the active only"
    );
    assert!(set.orphans().is_empty(), "an active member holds it");
    drain(n.wire.0);
    signal(n.own_signals[0]);
    assert_eq!(set.wait(LOOK, &mut readable), Woken::Leaves);
    assert!(readable.is_empty(), "a resting member is not readable");
    assert_eq!(set.orphans(), &[n.own_signals[0]]);
    assert_eq!(
        set.resting_holders(n.own_signals[0]).collect::<Vec<_>>(),
        vec![all[0]]
    );
    set.evict(n.wrappers[0]);
    assert_eq!(set.registered(), 1 + 2);
    assert_eq!(sorted_serials(&set), vec![2]);
    assert_eq!(
        set.wait(LOOK, &mut readable),
        Woken::TimedOut,
        "an evicted member's leaf"
    );
    // Back again: its leaves are registered again, without reading /proc again.
    set.sync(0, &all).unwrap();
    assert_eq!(set.registered(), 1 + 2 * 2);
    signal_wire(&n, 1);
    set.wait(LONG, &mut readable);
    assert_eq!(sorted(&readable), sorted(&n.wrappers));
}

fn sorted_serials(set: &FlatSet) -> Vec<u64> {
    let mut v: Vec<u64> = set.held().collect();
    v.sort();
    v
}

/// What a core adds to a wait set after the set was flattened is not in it until the
/// generation changes: why the layer announces binds, enables and closes.
#[test]
fn a_wait_set_changed_is_read_again_at_a_new_generation() {
    let n = nest(2);
    let (_kick, mut set) = flat_set();
    let all = members(&n.wrappers);
    set.sync(0, &all).unwrap();
    let late = n.fds.eventfd();
    add(n.wrappers[0], late, IN);
    signal(late);
    let mut readable = Vec::new();
    assert_eq!(set.wait(LOOK, &mut readable), Woken::TimedOut);
    set.sync(0, &all).unwrap();
    assert_eq!(
        set.wait(LOOK, &mut readable),
        Woken::TimedOut,
        "same generation"
    );
    set.sync(1, &all).unwrap();
    assert_eq!(set.wait(LOOK, &mut readable), Woken::Leaves);
    assert_eq!(readable, vec![n.wrappers[0]]);
}

#[test]
fn edge_triggered_items_are_not_flattened() {
    let fds = Fds::default();
    let (inner, wrapper) = (fds.epoll(), fds.epoll());
    add(inner, fds.eventfd(), IN);
    add(wrapper, inner, IN | libc::EPOLLET as u32);
    let (_kick, mut set) = flat_set();
    let r = set.sync(0, &[(1, wrapper), (2, fds.eventfd())]);
    assert!(
        matches!(r, Err(Unflattened::Flags(fd)) if fd == wrapper),
        "{r:?}"
    );
    assert_eq!(set.registered(), 0, "emptied after a failure");
}

/// A set holds a file, /proc the number it was added under: once that number names another file
/// (the number reused while the file lives on through a copy), the set is not flattened.
#[test]
fn an_item_whose_number_names_another_file_is_not_flattened() {
    let fds = Fds::default();
    let (inner, wrapper) = (fds.epoll(), fds.epoll());
    add(inner, fds.eventfd(), IN);
    add(wrapper, inner, IN);
    let (rd, _wr) = fds.pipe();
    add(wrapper, rd, IN);
    let (_kick, mut set) = flat_set();
    let other = fds.eventfd();
    set.sync(0, &[(1, wrapper), (2, other)]).unwrap();
    // SAFETY: our own fds: the pipe's read end lives on as a copy, and its number names an
    // eventfd from now on (dup2 replaces it at once, so no other thread can take the number).
    unsafe {
        fds.keep(libc::dup(rd));
        assert_eq!(libc::dup2(fds.eventfd(), rd), rd);
    }
    let r = set.sync(1, &[(1, wrapper), (2, other)]);
    assert!(
        matches!(r, Err(Unflattened::Stale(fd)) if fd == rd),
        "{r:?}"
    );
}

#[test]
fn plain_fds_are_their_own_leaves_and_the_kick_wakes_the_sleep() {
    let fds = Fds::default();
    let (rd, wr) = fds.pipe();
    let e = fds.eventfd();
    let (kick, mut set) = flat_set();
    set.sync(0, &[(1, rd), (2, e)]).unwrap();
    assert_eq!(set.leaves_of(rd).unwrap().len(), 1);
    assert_eq!(set.leaves_of(rd).unwrap()[0].fd, rd);
    let mut readable = Vec::new();
    kick.signal();
    assert_eq!(set.wait(LONG, &mut readable), Woken::Kick);
    assert!(readable.is_empty());
    kick.drain();
    // SAFETY: one byte into our own pipe.
    assert_eq!(unsafe { libc::write(wr, b"x".as_ptr().cast(), 1) }, 1);
    set.wait(LONG, &mut readable);
    assert_eq!(readable, vec![rd]);
}

// ---- A room over the nest -------------------------------------------------------------------

/// One member of a nested core: its counter, and what completes for it.
struct NestMember {
    counter: Arc<Counter>,
    /// The wire's bytes name the member they complete for; a pull moves them into the members'
    /// inner CQs (signals), then takes its own CQ's and own signals' counts into its counter.
    nest: Arc<Nest>,
    index: usize,
    room: Arc<Room>,
    serial: u64,
    /// A signal the core added to this member's wait set after the waits began.
    late: Mutex<Option<RawFd>>,
    /// The threads that armed this member's blocker, in order.
    armed_by: Mutex<Vec<thread::ThreadId>>,
}

static SERIALS: AtomicU64 = AtomicU64::new(1);

impl NestMember {
    fn counts(&self, fd: RawFd) -> u64 {
        let b = drain(fd);
        if b.len() == 8 {
            u64::from_ne_bytes(b.try_into().unwrap())
        } else {
            0
        }
    }
}

impl Source for NestMember {
    fn pull(&self) {
        // The core's progress, shared by all: completions go to their member's inner CQ.
        for m in drain(self.nest.wire.0) {
            signal(self.nest.cq_signals[m as usize]);
        }
        let mut n = self.counts(self.nest.cq_signals[self.index]);
        n += self.counts(self.nest.own_signals[self.index]);
        if let Some(late) = *self.late.lock().unwrap() {
            n += self.counts(late);
        }
        if n > 0 {
            self.counter.add(n).unwrap();
        }
    }
    fn wake(&self) -> Wake<'_> {
        Wake::Block(self)
    }
}

fn readable(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

impl Blocker for NestMember {
    fn prepare(&self) -> Token {
        Token(0)
    }
    fn arm(&self) -> bool {
        self.armed_by.lock().unwrap().push(thread::current().id());
        !readable(self.nest.wrappers[self.index])
    }
    fn block(&self, _: Token, kick: &EventFd, until: Option<Instant>) {
        let limit = until.map(|u| u.saturating_duration_since(Instant::now()));
        rscntr::engine::sleep_until_readable(
            self.nest.wrappers[self.index],
            kick.as_raw_fd(),
            limit,
        );
    }
    fn spin_before_sleep(&self) -> bool {
        false
    }
    fn room(&self) -> Option<&Room> {
        Some(&self.room)
    }
    fn fd(&self) -> Option<RawFd> {
        Some(self.nest.wrappers[self.index])
    }
    fn serial(&self) -> u64 {
        self.serial
    }
}

/// `n` members of a nest in one room, flattening its wait sets when given a `report`.
fn room_of(n: usize, report: Option<fn(&str)>) -> (Arc<Nest>, Arc<Room>, Vec<Arc<NestMember>>) {
    let nest = Arc::new(nest(n));
    let room = Arc::new(Room::new());
    room.flatten_wait_sets(report);
    let members = (0..n)
        .map(|index| {
            Arc::new(NestMember {
                counter: Arc::new(Counter::new(WaitStrategy::Block).unwrap()),
                nest: nest.clone(),
                index,
                room: room.clone(),
                serial: SERIALS.fetch_add(1, SeqCst),
                late: Mutex::new(None),
                armed_by: Mutex::new(Vec::new()),
            })
        })
        .collect();
    (nest, room, members)
}

/// Every member waits for `threshold` in its own thread (10 s at most); returns the threads.
fn wait_all(members: &[Arc<NestMember>], threshold: u64) -> Vec<thread::JoinHandle<bool>> {
    members
        .iter()
        .map(|m| {
            let m = m.clone();
            thread::spawn(move || {
                m.counter
                    .wait_with(threshold, Timeout::from_ms(10_000), &*m)
                    .is_ok()
            })
        })
        .collect()
}

/// Waits (bounded) until `room` has `n` members; the waits have begun.
fn until_members(room: &Room, n: usize) {
    until("members never joined", || room.members() >= n);
    // The leader reaches its sleep.
    thread::sleep(Duration::from_millis(50));
}

macro_rules! reports {
    ($name:ident, $seen:ident) => {
        static $seen: Mutex<Vec<String>> = Mutex::new(Vec::new());
        fn $name(why: &str) {
            $seen.lock().unwrap().push(why.to_string());
        }
    };
}

reports!(report_completions, SEEN_COMPLETIONS);

#[test]
fn each_completion_wakes_its_waiter_in_a_flattened_room() {
    const N: usize = 8;
    let (nest, room, members) = room_of(N, Some(report_completions));
    let threads = wait_all(&members, 1);
    until_members(&room, N);
    assert_eq!(
        room.flat_leaves(),
        Some(1 + 2 * N),
        "the leader sleeps in the flattened set"
    );
    // One at a time, in an order unlike the joins': each wakes its own waiter.
    let mut threads: Vec<Option<_>> = threads.into_iter().map(Some).collect();
    for k in [5, 0, 7, 2, 6, 1, 4, 3] {
        signal_wire(&nest, k as u8);
        assert!(
            threads[k].take().unwrap().join().unwrap(),
            "member {k} timed out"
        );
        assert_eq!(members[k].counter.read(), 1);
    }
    only_built(&SEEN_COMPLETIONS.lock().unwrap());
}

/// The reports of a room that slept in its flattened set and never fell back: the first sleep's.
fn only_built(seen: &[String]) {
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].contains("sleeps in one epoll set"), "{seen:?}");
}

/// Two members wait; a signal the core adds to the second one's wait set meanwhile (rxm's inner
/// CQ at an endpoint's enable) completes for it, the change announced as the layer does or not;
/// then the first one's completion. Both waits must end by their completion, not their timeout.
fn a_signal_added_while_waiting(report: fn(&str), announce: bool) {
    let (nest, room, members) = room_of(2, Some(report));
    let threads = wait_all(&members, 1);
    until_members(&room, 2);
    let late = nest.fds.eventfd();
    *members[1].late.lock().unwrap() = Some(late);
    add(nest.wrappers[1], late, IN);
    if announce {
        room.wait_sets_changed();
    }
    signal(late);
    let mut threads: Vec<Option<_>> = threads.into_iter().map(Some).collect();
    assert!(threads[1].take().unwrap().join().unwrap());
    signal_wire(&nest, 0);
    assert!(threads[0].take().unwrap().join().unwrap());
}

reports!(report_announced, SEEN_ANNOUNCED);

/// Announced: the leader reads the sets again, with no recheck needed.
#[test]
fn a_wait_set_changed_while_waiting_is_flattened_again_when_announced() {
    a_signal_added_while_waiting(report_announced, true);
    only_built(&SEEN_ANNOUNCED.lock().unwrap());
}

reports!(report_unannounced, SEEN_UNANNOUNCED);

/// Not announced: the leader's look at the members' own fds after
/// [`RECHECK`](rscntr::engine::flat_set::RECHECK) finds it (and says so).
#[test]
fn a_wait_set_changed_unannounced_is_found_by_the_recheck() {
    a_signal_added_while_waiting(report_unannounced, false);
    let seen = SEEN_UNANNOUNCED.lock().unwrap();
    assert!(
        seen.iter().any(|s| s.contains("unannounced")),
        "the recheck found nothing: {seen:?}"
    );
}

/// Without flattening the room polls the members' fds, as before.
#[test]
fn a_room_not_asked_to_flatten_polls_the_fds() {
    let (nest, room, members) = room_of(2, None);
    let threads = wait_all(&members, 1);
    until_members(&room, 2);
    assert_eq!(room.flat_leaves(), None);
    signal_wire(&nest, 1);
    signal_wire(&nest, 0);
    for t in threads {
        assert!(t.join().unwrap());
    }
}

/// Member 2 of a flattened room of 3 waits for 1, then, once told, for 2; its first wait has
/// ended when this returns. Members 0 and 1 wait for 2 from the start, so that one of them
/// leads throughout.
struct Returning {
    nest: Arc<Nest>,
    room: Arc<Room>,
    members: Vec<Arc<NestMember>>,
    others: Vec<thread::JoinHandle<bool>>,
    go: mpsc::Sender<()>,
    back: thread::JoinHandle<bool>,
}

fn returning(report: fn(&str)) -> Returning {
    let (nest, room, members) = room_of(3, Some(report));
    let others = wait_all(&members[..2], 2);
    until_members(&room, 2);
    let (returned_tx, returned) = mpsc::channel();
    let (go, go_rx) = mpsc::channel();
    let m = members[2].clone();
    let back = thread::spawn(move || {
        let wait = |threshold| {
            m.counter
                .wait_with(threshold, Timeout::from_ms(10_000), &*m)
                .is_ok()
        };
        returned_tx.send(wait(1)).unwrap();
        go_rx.recv().unwrap();
        wait(2)
    });
    until_members(&room, 3);
    signal_wire(&nest, 2);
    assert!(
        returned.recv_timeout(Duration::from_secs(10)).unwrap(),
        "member 2's first wait timed out"
    );
    // The leader sleeps again, without it.
    thread::sleep(Duration::from_millis(50));
    Returning {
        nest,
        room,
        members,
        others,
        go,
        back,
    }
}

impl Returning {
    /// Ends the waits: member 2's second one and the others'.
    fn finish(self) {
        assert!(
            self.back.join().unwrap(),
            "member 2's second wait timed out"
        );
        for member in [0, 0, 1, 1] {
            signal_wire(&self.nest, member);
        }
        for t in self.others {
            assert!(t.join().unwrap());
        }
    }
}

reports!(report_back, SEEN_BACK);

/// A member whose wait returned and that waits again finds its leaves still in the leader's
/// set: it arms its own blocker, and the leader, not woken for it, sleeps on.
#[test]
fn a_member_back_in_a_flattened_room_arms_itself() {
    let r = returning(report_back);
    // A round of the leader's without member 2 (a completion short of member 0's threshold):
    // its next sleep is in a set of which member 2 is no member.
    signal(r.nest.own_signals[0]);
    until("member 0 never pulled", || r.members[0].counter.read() == 1);
    thread::sleep(Duration::from_millis(50));
    r.members[2].armed_by.lock().unwrap().clear();
    let me = r.back.thread().id();
    r.go.send(()).unwrap();
    until_members(&r.room, 3);
    let armed = r.members[2].armed_by.lock().unwrap().clone();
    assert!(
        !armed.is_empty() && armed.iter().all(|&t| t == me),
        "armed by {armed:?}, not only by itself ({me:?}): the leader was woken"
    );
    signal_wire(&r.nest, 2);
    r.finish();
    only_built(&SEEN_BACK.lock().unwrap());
}

reports!(report_away, SEEN_AWAY);

/// A leaf only an absent member holds becomes ready (its own signal, while its wait has
/// returned): the leader takes that member's leaves out of its set rather than be woken by them
/// again and again, and the member, back, is woken by what it missed.
#[test]
fn a_leaf_ready_while_its_member_is_away_leaves_the_set_and_wakes_it_when_back() {
    let r = returning(report_away);
    assert_eq!(r.room.flat_leaves(), Some(1 + 2 * 3), "its leaves rest");
    signal(r.nest.own_signals[2]);
    until("its leaves never left the set", || {
        r.room.flat_leaves() == Some(1 + 2 * 2)
    });
    r.go.send(()).unwrap();
    let m2 = r.members[2].clone();
    r.finish();
    assert_eq!(m2.counter.read(), 2);
    only_built(&SEEN_AWAY.lock().unwrap());
}
