//! The ringer's side of the doorbell over shm (see `bell.rs` for the whole design): the bells of
//! the peers a domain's endpoints send to, each mapped once from its name file, and rung when
//! armed. Every rscntr(shm) domain has its peers ([`DomainPeers`]), whether its own counters and
//! CQs wait or not: a peer that sleeps is rung by whoever completes work toward it.

use super::bell_files::{
    ADDR_MAX, ANSWERS_MAGIC, AnswersPage, HINT_ALL, Hints, MAGIC, Mutex, NO_PAGE, PAGE, Page,
    SLOT_WORDS, VERSION, bare_name, join_hints, last_error, map_page, name_path, pid_ns,
    read_record, slot_bits_of, split_hints,
};
use crate::engine::{bell, futex};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicPtr, Ordering::SeqCst};

/// The peers `ring_back` walks without a lock (the rest under it).
pub(super) const RING_LIST: usize = 64;

// ---- The sending side: peers' bells, rung ----------------------------------------------

/// A peer's bell, mapped: its armed word, and its socket's address (copied once, checked); and
/// the peer's answers page, where this domain's waiters ask (see `answers.rs`). A peer whose
/// domain never waits has the answers page only (`page` NULL: nothing to ring).
pub struct PeerBell {
    page: *mut Page,
    /// The peer's domain's answers page (NULL: none, or it did not check out).
    pub(super) answers: *mut AnswersPage,
    /// Where this domain is listed in `answers`: 0 not yet, its index + 1, or `u32::MAX` when it
    /// could not be (see [`PeerBell::ask`]).
    pub(super) listed: std::sync::atomic::AtomicU32,
    addr: libc::sockaddr_un,
    addr_len: libc::socklen_t,
    /// What to set in the page's `hints` when ringing (from the peer's name record).
    hints: Hints,
    /// The bits of `hints` in the page's slot words: the waiters to wake one by one.
    slot_bits: [u32; SLOT_WORDS],
    /// The page's file (device, inode): the domain's own bell when an endpoint sends to an
    /// endpoint of its own domain (see [`DomainPeers::is_own`]).
    file: (u64, u64),
}

impl Drop for PeerBell {
    fn drop(&mut self) {
        for p in [self.page.cast::<u8>(), self.answers.cast()] {
            if !p.is_null() {
                // SAFETY: mapped by map_peer (or map_asker), unmapped once.
                unsafe { libc::munmap(p.cast(), PAGE) };
            }
        }
    }
}

impl PeerBell {
    /// After an operation toward the peer: one fence and one load while it is not armed.
    #[inline]
    pub fn ring_if_armed(&self) {
        // SAFETY: mapped as long as self lives; only its atomics are touched.
        let page = unsafe { &*self.page };
        let ways = bell::rings_telling(&page.armed, || self.hint(page));
        if ways != 0 {
            self.ring(ways);
        }
        self.ring_slots(page);
    }

    /// As `ring_if_armed`, for a caller that has issued the fence already.
    #[inline]
    fn ring_if_armed_fenced(&self) {
        // SAFETY: mapped as long as self lives; only its atomics are touched.
        let page = unsafe { &*self.page };
        let ways = bell::rings_after_fence_telling(&page.armed, || self.hint(page));
        if ways != 0 {
            self.ring(ways);
        }
        self.ring_slots(page);
    }

    /// After the armed word (and its fence): the waiters asleep on the slots of the counters
    /// bound to the endpoint, each woken alone (one load per slot word while none is armed).
    #[inline]
    fn ring_slots(&self, page: &Page) {
        for (word, &bits) in page.slots.iter().zip(&self.slot_bits) {
            if bits != 0 {
                let taken = bell::rings_slots_after_fence(word, bits);
                if taken != 0 {
                    self.wake_slots(page, word, taken);
                }
            }
        }
    }

    /// Wakes the sleepers of the slot bits `taken` of `word` (see [`SlotBlocker`]).
    #[cold]
    fn wake_slots(&self, page: &Page, word: &bell::AtomicU32, taken: u32) {
        page.note_ringers_cpu();
        // SAFETY: the peer's word, mapped as long as self lives.
        unsafe { futex::wake_bits(std::ptr::from_ref(word).cast(), taken) };
    }

    /// Where the operation landed, for the thread the ring wakes (see `progress_hinted`) or, the
    /// word rung (`engine::bell::RUNG`), for the next arming (see `arm_for`); every feed when
    /// the peer's record names none.
    #[cold]
    fn hint(&self, page: &Page) {
        let bits = if self.hints != 0 {
            self.hints
        } else {
            HINT_ALL
        };
        for (half, bits) in page.hints.iter().zip(split_hints(bits)) {
            if bits != 0 {
                half.fetch_or(bits, SeqCst);
            }
        }
    }

    /// Rings an asker after this domain's progress answered what it asked (see `answers.rs`):
    /// its armed word with the hints of its feeds that wait for answers, then those feeds' slot
    /// waiters; nothing for a peer without a bell.
    #[cold]
    pub(super) fn ring_answered(&self) {
        // SAFETY: mapped as long as self lives; only its atomics are touched.
        let Some(page) = (unsafe { self.page.as_ref() }) else {
            return;
        };
        let ways = bell::rings_telling(&page.armed, || {
            for (half, asked) in page.hints.iter().zip(&page.answer_hints) {
                let bits = asked.load(SeqCst);
                if bits != 0 {
                    half.fetch_or(bits, SeqCst);
                }
            }
        });
        if ways != 0 {
            self.ring(ways);
        }
        for (word, asked) in page.slots.iter().zip(&page.answer_slots) {
            let bits = asked.load(SeqCst);
            if bits != 0 {
                let taken = bell::rings_slots_after_fence(word, bits);
                if taken != 0 {
                    self.wake_slots(page, word, taken);
                }
            }
        }
    }

    /// Rings the `ways` this thread disarmed: one syscall each.
    #[cold]
    fn ring(&self, ways: u32) {
        if ways & bell::FUTEX != 0 {
            // SAFETY: mapped as long as self lives; only its atomics are touched.
            let page = unsafe { &*self.page };
            page.note_ringers_cpu();
            // SAFETY: the peer's word, mapped as long as self lives.
            unsafe { futex::wake_all(page.armed_word()) };
        }
        if ways & bell::SOCKET == 0 {
            return;
        }
        let byte = [1u8];
        // Errors are ignored: EAGAIN means a wake is queued already; a peer that closed or
        // died has nobody to wake.
        // SAFETY: the process's sending socket; byte and addr live across the call.
        unsafe {
            libc::sendto(
                send_socket(),
                byte.as_ptr().cast(),
                1,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                (&self.addr as *const libc::sockaddr_un).cast(),
                self.addr_len,
            )
        };
    }
}

/// The process's socket for ringing (unbound).
pub(super) fn send_socket() -> RawFd {
    static SOCK: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    SOCK.get_or_init(|| {
        // SAFETY: no memory arguments; checked.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        // SAFETY: a fresh descriptor nothing else owns.
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
    })
    .as_ref()
    .map_or(-1, |s| s.as_raw_fd())
}

/// What a peer's name file says about it.
pub(super) enum Mapped {
    /// Its bell, mapped (and its answers page, when it has one).
    Bell(PeerBell),
    /// An rscntr endpoint of this pid namespace whose domain never waits: it rings its peers,
    /// nobody needs to ring it; its answers page when it has one (`page` NULL).
    Ringer(Option<PeerBell>),
}

/// Maps the bell published under a peer's shm address, if there is one that checks out.
pub(super) fn map_peer(addr: &[u8]) -> Option<Mapped> {
    let path = name_path(addr);
    let shown = String::from_utf8_lossy(bare_name(addr)).into_owned();
    let Some(r) = read_record(std::path::Path::new(path.to_str().ok()?)) else {
        crate::fi_dbg!(EpData, "no doorbell for peer {shown:?} ({path:?})");
        return None;
    };
    if r.pid_ns != pid_ns() {
        crate::fi_dbg!(
            EpData,
            "the doorbell of peer {shown:?} is in another pid namespace"
        );
        return None;
    }
    let answers = map_answers(r.pid, r.answers, &shown);
    if r.fd == NO_PAGE {
        crate::fi_dbg!(EpData, "peer {shown:?} rings, and has no doorbell");
        return Some(Mapped::Ringer(
            (!answers.is_null()).then(|| PeerBell::answers_only(answers)),
        ));
    }
    let bell = map_bell(r.pid, r.fd, join_hints(r.hints), &shown);
    match bell {
        Some(mut b) => {
            b.answers = answers;
            Some(Mapped::Bell(b))
        }
        None => {
            if !answers.is_null() {
                // SAFETY: mapped just above, by nothing else.
                unsafe { libc::munmap(answers.cast(), PAGE) };
            }
            None
        }
    }
}

/// A sealed page of exactly [`PAGE`] bytes, descriptor `fd` of process `pid` (of this pid
/// namespace), mapped; and its file (device, inode).
fn map_sealed(pid: u32, fd: i32, shown: &str) -> Option<(*mut Page, (u64, u64))> {
    if fd < 0 || pid == 0 {
        return None;
    }
    let proc_path = CString::new(format!("/proc/{pid}/fd/{fd}")).ok()?;
    // Non-blocking and never a controlling terminal: a key from a peer's garbage may name any
    // descriptor of any process of this user (only a sealed page of ours is then kept).
    // SAFETY: a NUL-terminated path.
    let fd = unsafe {
        libc::open(
            proc_path.as_ptr(),
            libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY,
        )
    };
    if fd < 0 {
        crate::fi_dbg!(
            EpData,
            "cannot open the page of peer {shown:?} ({proc_path:?}): {}",
            last_error()
        );
        return None;
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let file = unsafe { OwnedFd::from_raw_fd(fd) };
    // Sealed against shrinking, exactly a page: mapping it can never fault.
    // SAFETY: our descriptor.
    let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
    // SAFETY: an all-zero stat is valid as an out value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st lives across the call.
    let ok = seals >= 0
        && seals & libc::F_SEAL_SHRINK != 0
        && unsafe { libc::fstat(file.as_raw_fd(), &mut st) } == 0
        && st.st_size as usize == PAGE;
    if !ok {
        crate::fi_dbg!(EpData, "the page of peer {shown:?} is not a sealed page");
        return None;
    }
    let page = map_page(file.as_raw_fd()).ok()?;
    Some((page, (st.st_dev, st.st_ino)))
}

/// A peer's answers page (descriptor `fd` of `pid`), mapped if it checks out; NULL otherwise.
fn map_answers(pid: u32, fd: i32, shown: &str) -> *mut AnswersPage {
    let Some((page, _)) = map_sealed(pid, fd, shown) else {
        return std::ptr::null_mut();
    };
    let page: *mut AnswersPage = page.cast();
    // SAFETY: a mapping of PAGE bytes; read once, checked.
    let (magic, version) = unsafe { ((*page).magic, (*page).version) };
    if magic != ANSWERS_MAGIC || version != VERSION {
        crate::fi_dbg!(
            EpData,
            "the answers page of peer {shown:?} does not check out"
        );
        // SAFETY: mapped just above.
        unsafe { libc::munmap(page.cast(), PAGE) };
        return std::ptr::null_mut();
    }
    page
}

/// A bell page (descriptor `fd` of `pid`), mapped if it checks out, rung with `hints`.
pub(super) fn map_bell(pid: u32, fd: i32, hints: Hints, shown: &str) -> Option<PeerBell> {
    let (page, file) = map_sealed(pid, fd, shown)?;
    // SAFETY: a mapping of PAGE bytes; read once, checked.
    let (magic, version, len, bytes) = unsafe {
        (
            (*page).magic,
            (*page).version,
            (*page).addr_len as usize,
            (*page).addr,
        )
    };
    if magic != MAGIC || version != VERSION || len == 0 || len > ADDR_MAX {
        crate::fi_dbg!(
            EpData,
            "the doorbell page of peer {shown:?} does not check out"
        );
        // SAFETY: mapped just above.
        unsafe { libc::munmap(page.cast(), PAGE) };
        return None;
    }
    // SAFETY: an all-zero sockaddr_un is valid.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (dst, src) in sa.sun_path.iter_mut().zip(bytes.iter().take(len)) {
        *dst = *src as libc::c_char;
    }
    Some(PeerBell {
        page,
        answers: std::ptr::null_mut(),
        listed: std::sync::atomic::AtomicU32::new(0),
        addr: sa,
        addr_len: (std::mem::size_of::<libc::sa_family_t>() + len) as libc::socklen_t,
        hints,
        slot_bits: slot_bits_of(hints),
        file,
    })
}

impl PeerBell {
    /// A peer whose domain never waits: its answers page only.
    fn answers_only(answers: *mut AnswersPage) -> PeerBell {
        // SAFETY: an all-zero sockaddr_un is valid.
        let addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        PeerBell {
            page: std::ptr::null_mut(),
            answers,
            listed: std::sync::atomic::AtomicU32::new(0),
            addr,
            addr_len: 0,
            hints: 0,
            slot_bits: [0; SLOT_WORDS],
            file: (0, 0),
        }
    }

    /// Whether the peer has a bell (a peer whose domain never waits has none).
    pub(super) fn has_bell(&self) -> bool {
        !self.page.is_null()
    }
}

/// The peers reached through one AV, by fi_addr: looked up once each, lock-free after.
pub struct PeerTable {
    av: usize,
    /// fi_addr → NULL (not looked up), [`NO_BELL`] (none), [`RINGER`] (no bell, rings), or a
    /// mapped peer (owned by `all`).
    fast: Box<[AtomicPtr<PeerBell>]>,
    /// Every mapped peer (freed with the table), and the addresses beyond `fast`. Boxed: `fast`
    /// and `far` point at them while the vector grows.
    #[allow(clippy::vec_box)]
    all: Mutex<Vec<Box<PeerBell>>>,
    far: Mutex<std::collections::HashMap<u64, *const PeerBell>>,
}

// SAFETY: the peers are shared mappings touched through their atomic word only.
unsafe impl Send for PeerTable {}
// SAFETY: as above.
unsafe impl Sync for PeerTable {}

pub(super) const FAST: usize = 4096;
/// A peer without a bell that does not ring either (plain shm, another pid namespace).
pub(super) const NO_BELL: *mut PeerBell = std::ptr::without_provenance_mut(1);
/// A peer without a bell that rings (an rscntr endpoint of a domain that never waits).
pub(super) const RINGER: *mut PeerBell = std::ptr::without_provenance_mut(2);

/// Whether a table entry is a mapped peer (not NULL, [`NO_BELL`] or [`RINGER`]).
#[inline]
fn is_mapped(p: *const PeerBell) -> bool {
    p.addr() > RINGER.addr()
}

/// What a peer lookup found, for the caller's log.
pub enum Looked<'a> {
    Bell(&'a PeerBell),
    /// Neither a bell nor a peer that rings: the domain's waits must not count on rings.
    NoBell,
    /// No bell, but a peer that rings; its answers page, where it has one.
    Ringer(Option<&'a PeerBell>),
}

impl<'a> Looked<'a> {
    /// # Safety
    /// `p` is a table entry other than NULL; a mapped peer lives as long as `'a`.
    unsafe fn of(p: *const PeerBell) -> Looked<'a> {
        if is_mapped(p) {
            // SAFETY: caller's contract.
            let peer = unsafe { &*p };
            if peer.has_bell() {
                Looked::Bell(peer)
            } else {
                Looked::Ringer(Some(peer))
            }
        } else if p == RINGER.cast_const() {
            Looked::Ringer(None)
        } else {
            Looked::NoBell
        }
    }
}

impl PeerTable {
    fn new(av: usize) -> PeerTable {
        PeerTable {
            av,
            fast: (0..FAST)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            all: Mutex::new(Vec::new()),
            far: Mutex::new(Default::default()),
        }
    }

    /// The peer at `fi_addr`, looked up with `lookup` (its shm address) the first time, and
    /// the same answer from its table entry every time after.
    #[inline]
    pub fn get(
        &self,
        fi_addr: u64,
        lookup: impl FnOnce() -> Option<Vec<u8>>,
        peers: &DomainPeers,
    ) -> Looked<'_> {
        if let Some(slot) = self.fast.get(fi_addr as usize) {
            let p = slot.load(std::sync::atomic::Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: not NULL; a mapped peer is owned by `all`, freed with the table.
                return unsafe { Looked::of(p) };
            }
        }
        self.slow(fi_addr, lookup, peers)
    }

    #[cold]
    fn slow(
        &self,
        fi_addr: u64,
        lookup: impl FnOnce() -> Option<Vec<u8>>,
        peers: &DomainPeers,
    ) -> Looked<'_> {
        if (fi_addr as usize) >= FAST
            && let Some(p) = self.far.lock().get(&fi_addr).copied()
        {
            // SAFETY: as in get.
            return unsafe { Looked::of(p) };
        }
        let found = lookup().and_then(|addr| map_peer(&addr));
        let p = match found {
            Some(Mapped::Ringer(None)) => RINGER,
            Some(Mapped::Ringer(Some(b))) => {
                let b = Box::new(b);
                let p = &*b as *const PeerBell as *mut PeerBell;
                // Nothing to ring: never on the ring-back list.
                self.all.lock().push(b);
                p
            }
            Some(Mapped::Bell(b)) => {
                let b = Box::new(b);
                let p = &*b as *const PeerBell as *mut PeerBell;
                // Boxed, it stays where it is; listed after the table's lock is let go (see
                // `DomainPeers::ring_back` for the lock order).
                let own = peers.is_own(&b);
                self.all.lock().push(b);
                if !own {
                    peers.listed(p);
                }
                p
            }
            None => NO_BELL,
        };
        match self.fast.get(fi_addr as usize) {
            Some(slot) => {
                // A racing lookup of the same address may have stored its own: keep the first.
                if let Err(existing) = slot.compare_exchange(
                    std::ptr::null_mut(),
                    p,
                    std::sync::atomic::Ordering::AcqRel,
                    std::sync::atomic::Ordering::Acquire,
                ) && is_mapped(existing)
                {
                    // SAFETY: as in get.
                    return unsafe { Looked::of(existing) };
                }
            }
            None => {
                self.far.lock().insert(fi_addr, p);
            }
        }
        // SAFETY: as in get.
        unsafe { Looked::of(p) }
    }

    /// Rings every mapped peer that is armed, but the domain's own bell (see
    /// `DomainPeers::listed`).
    fn ring_armed(&self, peers: &DomainPeers) {
        for p in self.all.lock().iter() {
            if p.has_bell() && !peers.is_own(p) {
                p.ring_if_armed();
            }
        }
    }
}

/// The peers a domain's endpoints have mapped, one [`PeerTable`] per AV, and the first
/// [`RING_LIST`] of them on a list walked without a lock: what a pull in the domain rings
/// afterwards (`ring_back`: a response its progress made may be what a sleeping peer waits
/// for). A domain has one whether it waits or not.
pub struct DomainPeers {
    tables: Mutex<Vec<std::sync::Arc<PeerTable>>>,
    ring_list: [AtomicPtr<PeerBell>; RING_LIST],
    ring_list_len: std::sync::atomic::AtomicUsize,
    /// The (device, inode) of the domain's own bell's page, once it has a bell.
    own: std::sync::OnceLock<(u64, u64)>,
}

impl Default for DomainPeers {
    fn default() -> Self {
        DomainPeers {
            tables: Mutex::new(Vec::new()),
            ring_list: [const { AtomicPtr::new(std::ptr::null_mut()) }; RING_LIST],
            ring_list_len: std::sync::atomic::AtomicUsize::new(0),
            own: std::sync::OnceLock::new(),
        }
    }
}

impl DomainPeers {
    /// The domain made its bell, whose page is the file (device, inode): never listed for
    /// `ring_back` (see [`Self::listed`]). Set before the bell is published, so before any peer
    /// (an endpoint of the domain itself among them) can map it.
    pub fn set_own(&self, file: (u64, u64)) {
        let _ = self.own.set(file);
    }

    /// The peers an endpoint of the domain rings through its AV `av` (one table per AV).
    pub fn table_of(&self, av: usize) -> std::sync::Arc<PeerTable> {
        let mut tables = self.tables.lock();
        if let Some(t) = tables.iter().find(|t| t.av == av) {
            return t.clone();
        }
        let t = std::sync::Arc::new(PeerTable::new(av));
        tables.push(t.clone());
        t
    }

    /// Rings each peer the domain's endpoints have mapped that is armed: one load while none
    /// is mapped, one fence and a load per peer otherwise.
    pub fn ring_back(&self) {
        let n = self
            .ring_list_len
            .load(std::sync::atomic::Ordering::Acquire);
        if n == 0 {
            return;
        }
        // One fence for all the loads (see `engine::bell::rings`): what this thread's progress
        // published comes before them.
        std::sync::atomic::fence(SeqCst);
        for slot in &self.ring_list[..n] {
            let p = slot.load(std::sync::atomic::Ordering::Acquire);
            // SAFETY: a peer of one of this domain's tables, which it keeps (and the tables
            // their peers) until it is dropped.
            if let Some(p) = unsafe { p.as_ref() } {
                p.ring_if_armed_fenced();
            }
        }
        if n == RING_LIST {
            // More peers than the list holds: every peer of every table the slow way (the
            // list's own twice: a word swapped to 0 rings once). Lock order: the domain's
            // tables, then a table's (`PeerTable::slow` lets go of the table's before it lists).
            for t in self.tables.lock().iter() {
                t.ring_armed(self);
            }
        }
    }

    /// Whether `peer` is the domain's own bell, mapped by an endpoint of the domain that sends
    /// to another endpoint of it (MPI ranks put their own address in their AV).
    pub(super) fn is_own(&self, peer: &PeerBell) -> bool {
        self.own.get() == Some(&peer.file)
    }

    /// A peer just mapped by a table of the domain: on the list `ring_back` walks. Never the
    /// domain's own bell ([`Self::is_own`]): `ring_back` follows a waiter's pull, and that
    /// waiter has just armed its own word; ringing it would undo the arming (a datagram on its
    /// own socket, its word cleared), and the waiter would never sleep. Work that its pull
    /// completes for another waiter of the domain reaches it through the counters it moves
    /// (they interrupt their sleeping leader); a send toward the domain's own endpoint still
    /// rings it (`ring.rs`).
    fn listed(&self, p: *const PeerBell) {
        let _one_at_a_time = self.tables.lock();
        let n = self
            .ring_list_len
            .load(std::sync::atomic::Ordering::Acquire);
        if n < RING_LIST {
            self.ring_list[n].store(p.cast_mut(), std::sync::atomic::Ordering::Release);
            self.ring_list_len
                .store(n + 1, std::sync::atomic::Ordering::Release);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::layer::wait::bell_files::NameFile;

    /// An endpoint of a domain that never waits says that it rings; a peer that sends to it
    /// takes it for a ringer, not for a peer that never rings (plain shm: no file at all).
    #[test]
    fn a_ringer_record_maps_as_a_ringer_and_no_file_as_nothing() {
        let addr = format!("fi_shm://rscntr_ringer_test_{}", std::process::id());
        assert!(map_peer(addr.as_bytes()).is_none(), "no file yet");
        let name = NameFile::create(addr.as_bytes(), NO_PAGE, -1, 0).expect("published");
        assert!(matches!(
            map_peer(addr.as_bytes()),
            Some(Mapped::Ringer(None))
        ));
        drop(name);
        assert!(
            map_peer(addr.as_bytes()).is_none(),
            "the file went with the record"
        );
        let gone = NameFile::create(addr.as_bytes(), -1, -1, 0).expect("published");
        assert!(
            map_peer(addr.as_bytes()).is_none(),
            "a record naming no page"
        );
        drop(gone);
    }

    /// A table answers each address's lookup once: a ringer and a peer without a bell are told
    /// apart the first time, and told the same again without a lookup.
    #[test]
    fn a_table_looks_each_address_up_once() {
        let addr = format!("fi_shm://rscntr_table_test_{}", std::process::id());
        let name = NameFile::create(addr.as_bytes(), NO_PAGE, -1, 0).expect("published");
        let peers = DomainPeers::default();
        let table = peers.table_of(1);
        let lookups = std::cell::Cell::new(0);
        let look = |a: &str| {
            lookups.set(lookups.get() + 1);
            Some(a.as_bytes().to_vec())
        };
        for _ in 0..2 {
            assert!(matches!(
                table.get(3, || look(&addr), &peers),
                Looked::Ringer(None)
            ));
            assert!(matches!(
                table.get(4, || look("fi_shm://nobody_here"), &peers),
                Looked::NoBell
            ));
        }
        assert_eq!(lookups.get(), 2);
        drop(name);
    }
}
