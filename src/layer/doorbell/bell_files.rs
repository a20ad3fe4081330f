//! What a domain's doorbell is made of, shared by the waiter's side (`bell.rs`) and the
//! ringer's (`peers.rs`): the page in shared memory (its armed word, hints and slot words), the
//! wake socket whose address it carries, and the name files in /dev/shm through which peers find
//! it, removed on a clean close, on fatal signals and after a SIGKILL (see `bell.rs` for the
//! whole design). A peer's page is read through [`Page`]'s atomics only.

use crate::engine::bell;
use crate::fi_info;
use std::ffi::{CStr, CString, c_int};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering::SeqCst};

/// The start of the names of the files in /dev/shm that name bells.
pub const NAME_PREFIX: &str = "rscntr_bell_";
pub(super) const SHM_DIR: &str = "/dev/shm/";
pub(super) const MAGIC: u64 = u64::from_le_bytes(*b"RSCNBEL1");
/// 2: the armed word holds one bit per way of sleeping (`engine::bell::SOCKET`, `FUTEX`).
/// 3: a ringer leaves hints (the page's `hints`, the record's `hints`).
/// 4: a ringer of the futex way leaves `engine::bell::RUNG`, and every worker that finds the
/// word not 0 hints ([`HINT_ALL`] when its record has no bits).
/// 5: the page's slot words (one bit per feed slot, see [`SlotBlocker`]), rung after the armed
/// word.
/// 6: a name record names its domain's answers page ([`AnswersPage`]); a bell's page says which
/// of its feeds wait for answers (`answer_hints`, `answer_slots`: see `answers.rs`).
pub(super) const VERSION: u32 = 6;
/// The magic of a domain's [`AnswersPage`].
pub(super) const ANSWERS_MAGIC: u64 = u64::from_le_bytes(*b"RSCNANS1");
/// The initiators an [`AnswersPage`] lists (a domain's waiters that asked it something only
/// its progress answers); one more finds the list full and re-checks instead.
pub(super) const ASKERS: usize = 256;
/// Feeds of a domain that ringers can hint at (one bit each in a 128-bit [`Hints`], the last
/// bit being [`HINT_ALL`]).
pub(super) const HINT_SLOTS: usize = 127;
/// Feed slots, one bit each (see [`HINT_SLOTS`]).
pub type Hints = u128;
/// The hint of work for a feed with no bit of its own (or for an endpoint with no counter
/// bound): every feed of the domain.
pub(super) const HINT_ALL: Hints = 1 << HINT_SLOTS;
/// The page's slot words: one bit per feed slot of the first [`HINT_SLOTS`], 32 to a word.
pub(super) const SLOT_WORDS: usize = HINT_SLOTS.div_ceil(32);
pub(super) const PAGE: usize = 4096;
/// The longest abstract socket address (`sun_path`).
pub(super) const ADDR_MAX: usize = 108;
/// A name record's `fd` for an endpoint that rings and has no bell.
pub(super) const NO_PAGE: i32 = -2;

/// The shared page of a domain's bell.
#[repr(C)]
pub(super) struct Page {
    pub(super) magic: u64,
    pub(super) version: u32,
    /// Bytes of `addr` in use (the abstract name, its leading NUL included).
    pub(super) addr_len: u32,
    pub(super) addr: [u8; ADDR_MAX],
    pub(super) _pad: [u8; 256 - 16 - ADDR_MAX],
    /// The armed word, on a cache line of its own.
    pub(super) armed: bell::AtomicU32,
    /// 1 + the CPU of the last peer that rang the futex way (0: none since the sleeper
    /// looked): see `BellBlocker::note_the_ringers_cpu`.
    pub(super) ringer_cpu: bell::AtomicU32,
    /// Where a ringer's operation landed: one bit per feed slot of this domain (see
    /// [`BellBlocker::add_feed`]), set by the ringer before it disarms the word, taken by the
    /// thread its ring wakes (`BellBlocker::progress_hinted`).
    pub(super) hints: [std::sync::atomic::AtomicU64; 2],
    /// One bit per feed slot whose counter's waiter sleeps on its own ([`SlotBlocker`]):
    /// armed by that waiter, cleared by the ringer that wakes it alone.
    pub(super) slots: [bell::AtomicU32; SLOT_WORDS],
    /// The feeds of the counters bound to endpoints of this domain that asked a peer something
    /// only its progress answers (a read, a fetching atomic, a long send): what a peer that
    /// answered sets in `hints` when it rings (see `answers.rs`). Set by this domain, never
    /// cleared.
    pub(super) answer_hints: [std::sync::atomic::AtomicU64; 2],
    /// Those feeds' bits in the slot words: the slot waiters a peer that answered wakes.
    pub(super) answer_slots: [bell::AtomicU32; SLOT_WORDS],
}

/// A domain's answers page, one per rscntr(shm) domain, whether it waits or not, named by each
/// of its endpoints' name records: its peers that wait count here what they ask that only this
/// domain's progress answers, and list themselves once; this domain's progress rings the listed
/// peers after it ran past a new count (see `answers.rs`).
#[repr(C)]
pub(super) struct AnswersPage {
    pub(super) magic: u64,
    pub(super) version: u32,
    pub(super) _pad: [u8; 64 - 12],
    /// Operations asked, counted by their initiators after the core accepted each; on a cache
    /// line of its own (this domain loads it around every CQ read).
    pub(super) asked: std::sync::atomic::AtomicU32,
    pub(super) _pad2: [u8; 60],
    /// The askers: `pid << 32 | bell page fd` (see [`asker_key`]), filled from the front, 0
    /// after the last.
    pub(super) askers: [std::sync::atomic::AtomicU64; ASKERS],
    /// What each asker asked, counted by it before `asked` (which sums them).
    pub(super) counts: [std::sync::atomic::AtomicU32; ASKERS],
}

const _: () = assert!(std::mem::size_of::<Page>() <= PAGE);
const _: () = assert!(std::mem::size_of::<AnswersPage>() <= PAGE);

/// How an asker lists itself in a peer's [`AnswersPage`]: its pid and its bell page's descriptor
/// (what a name record holds), never 0.
pub(super) fn asker_key(pid: u32, fd: RawFd) -> u64 {
    u64::from(pid) << 32 | u64::from(fd as u32)
}

impl Page {
    /// The armed word as the kernel's futex calls take it (an AtomicU32 has the layout of a
    /// u32).
    pub(super) fn armed_word(&self) -> *const u32 {
        std::ptr::from_ref(&self.armed).cast()
    }

    /// Before a futex wake: where the woken thread should not stay (see
    /// `leave_the_ringers_cpu`), the ringer's CPU.
    pub(super) fn note_ringers_cpu(&self) {
        // SAFETY: no arguments.
        let cpu = unsafe { libc::sched_getcpu() };
        self.ringer_cpu.store(cpu.wrapping_add(1) as u32, SeqCst);
    }
}

/// What a bell's name file holds.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct NameRecord {
    pub(super) magic: u64,
    pub(super) version: u32,
    pub(super) pid: u32,
    /// The creator's pid namespace (the inode of /proc/self/ns/pid): its pid means nothing in
    /// another.
    pub(super) pid_ns: u64,
    /// The memfd's descriptor number in the creator; [`NO_PAGE`] for an endpoint of a domain
    /// that never waits (it rings its peers, it has nothing to be rung on).
    pub(super) fd: i32,
    /// The descriptor of the domain's [`AnswersPage`] in the creator; -1 for none.
    pub(super) answers: i32,
    /// What a peer that rings after an operation toward this endpoint sets in the page's
    /// `hints`: the bits of the feed slots of the counters bound to the endpoint (low, high
    /// halves of the [`Hints`]).
    pub(super) hints: [u64; 2],
}

/// std's mutex, whatever a panicking holder left: not parking_lot's, whose parking (the feeds
/// and peers are contended by a room's members) allocates a process-wide table that would
/// outlive the DSO.
pub(super) struct Mutex<T>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    pub(super) const fn new(v: T) -> Self {
        Mutex(std::sync::Mutex::new(v))
    }
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub(super) fn last_error() -> std::io::Error {
    std::io::Error::last_os_error()
}

pub(super) fn pid_ns() -> u64 {
    std::fs::metadata("/proc/self/ns/pid")
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
        .unwrap_or(0)
}

/// An shm address as shm names its region: up to its first NUL, without the `fi_shm://` or
/// `fi_ns://` prefix (an endpoint's own name has it, a peer's AV entry not always).
pub(super) fn bare_name(addr: &[u8]) -> &[u8] {
    let end = addr.iter().position(|&b| b == 0).unwrap_or(addr.len());
    let a = &addr[..end];
    [&b"fi_shm://"[..], &b"fi_ns://"[..]]
        .iter()
        .find_map(|p| a.strip_prefix(*p))
        .unwrap_or(a)
}

/// FNV-1a of an shm address (see [`bare_name`]), for the name file.
pub(super) fn name_hash(addr: &[u8]) -> u64 {
    bare_name(addr)
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
        })
}

/// The name file of the bell of the endpoint whose shm address is `addr`.
pub(super) fn name_path(addr: &[u8]) -> CString {
    // SAFETY: no arguments.
    let uid = unsafe { libc::geteuid() };
    CString::new(format!(
        "{SHM_DIR}{NAME_PREFIX}{uid}_{:016x}",
        name_hash(addr)
    ))
    .expect("no NUL in a formatted path")
}

/// A non-blocking datagram socket bound to an abstract address the kernel picks.
pub(super) fn wake_socket() -> std::io::Result<OwnedFd> {
    // SAFETY: no memory arguments; the result is checked.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(last_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an all-zero sockaddr_un is valid.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    // Binding only the family autobinds to an abstract address (unix(7)).
    // SAFETY: addr lives across the call; the length covers the family only.
    let ret = unsafe {
        libc::bind(
            fd,
            (&addr as *const libc::sockaddr_un).cast(),
            std::mem::size_of::<libc::sa_family_t>() as libc::socklen_t,
        )
    };
    if ret != 0 {
        return Err(last_error());
    }
    Ok(sock)
}

/// The sealed memfd page naming `socket`'s address, mapped.
pub(super) fn shared_page(socket: &OwnedFd) -> std::io::Result<(OwnedFd, *mut Page)> {
    // SAFETY: an all-zero sockaddr_un is valid.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    // SAFETY: addr and len live across the call.
    if unsafe {
        libc::getsockname(
            socket.as_raw_fd(),
            (&mut addr as *mut libc::sockaddr_un).cast(),
            &mut len,
        )
    } != 0
    {
        return Err(last_error());
    }
    let path_len = (len as usize).saturating_sub(std::mem::size_of::<libc::sa_family_t>());
    if path_len == 0 || path_len > ADDR_MAX {
        return Err(std::io::Error::other("unexpected socket address"));
    }
    let (memfd, page) = sealed_page(c"rscntr_bell")?;
    let page: *mut Page = page.cast();
    // SAFETY: a fresh mapping of PAGE bytes nobody else has opened yet.
    unsafe {
        let p = &mut *page;
        p.magic = MAGIC;
        p.version = VERSION;
        p.addr_len = path_len as u32;
        for (dst, src) in p.addr.iter_mut().zip(addr.sun_path.iter().take(path_len)) {
            *dst = *src as u8;
        }
    }
    Ok((memfd, page))
}

/// A domain's answers page, made and mapped (see [`AnswersPage`]).
pub(super) fn answers_page() -> std::io::Result<(OwnedFd, *mut AnswersPage)> {
    let (memfd, page) = sealed_page(c"rscntr_bell_answers")?;
    let page: *mut AnswersPage = page.cast();
    // SAFETY: a fresh mapping of PAGE bytes nobody else has opened yet.
    unsafe {
        (*page).magic = ANSWERS_MAGIC;
        (*page).version = VERSION;
    }
    Ok((memfd, page))
}

/// A memfd of one page, sealed against shrinking and growing (no peer can make a mapping of it
/// fault), and mapped.
fn sealed_page(name: &CStr) -> std::io::Result<(OwnedFd, *mut u8)> {
    // SAFETY: a NUL-terminated name; no memory arguments otherwise.
    let fd =
        unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(last_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let memfd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: our descriptor.
    if unsafe { libc::ftruncate(fd, PAGE as libc::off_t) } != 0 {
        return Err(last_error());
    }
    // No peer may shrink it under a mapping (a fault on access) or grow it.
    // SAFETY: our descriptor.
    if unsafe {
        libc::fcntl(
            fd,
            libc::F_ADD_SEALS,
            libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
        )
    } != 0
    {
        return Err(last_error());
    }
    let page = map_page(fd)?;
    Ok((memfd, page.cast()))
}

pub(super) fn map_page(fd: RawFd) -> std::io::Result<*mut Page> {
    // SAFETY: a descriptor of a file of at least PAGE bytes (checked by the callers).
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(last_error());
    }
    Ok(p.cast())
}

// ---- Name files, and their removal on fatal signals --------------------------------------

/// An endpoint's name file, removed when dropped.
pub struct NameFile {
    path: CString,
    slot: Option<usize>,
}

impl NameFile {
    pub(super) fn create(
        addr: &[u8],
        memfd: RawFd,
        answers: RawFd,
        hints: Hints,
    ) -> std::io::Result<NameFile> {
        reap_stale();
        let path = name_path(addr);
        crate::fi_dbg!(
            EpCtrl,
            "doorbell published for {:?} as {path:?}",
            String::from_utf8_lossy(bare_name(addr))
        );
        let record = NameRecord {
            magic: MAGIC,
            version: VERSION,
            pid: std::process::id(),
            pid_ns: pid_ns(),
            fd: memfd,
            answers,
            hints: split_hints(hints),
        };
        // A file left by an endpoint of the same address (a process of a former run) goes.
        for attempt in 0..2 {
            // SAFETY: a NUL-terminated path.
            let fd = unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_WRONLY
                        | libc::O_CREAT
                        | libc::O_EXCL
                        | libc::O_NOFOLLOW
                        | libc::O_CLOEXEC,
                    0o600,
                )
            };
            if fd < 0 {
                let e = last_error();
                if attempt == 0 && e.raw_os_error() == Some(libc::EEXIST) {
                    // SAFETY: a NUL-terminated path.
                    unsafe { libc::unlink(path.as_ptr()) };
                    continue;
                }
                return Err(e);
            }
            // SAFETY: a fresh descriptor nothing else owns.
            let file = unsafe { OwnedFd::from_raw_fd(fd) };
            let bytes = std::mem::size_of::<NameRecord>();
            // SAFETY: record lives across the call and is plain data.
            let n = unsafe {
                libc::write(
                    file.as_raw_fd(),
                    (&record as *const NameRecord).cast(),
                    bytes,
                )
            };
            if n != bytes as isize {
                // SAFETY: a NUL-terminated path.
                unsafe { libc::unlink(path.as_ptr()) };
                return Err(last_error());
            }
            install_cleanup();
            let slot = register(&path);
            return Ok(NameFile { path, slot });
        }
        Err(std::io::Error::other("name file exists"))
    }
}

impl Drop for NameFile {
    fn drop(&mut self) {
        if let Some(s) = self.slot {
            CLEANUP[s].store(std::ptr::null_mut(), SeqCst);
        }
        // SAFETY: a NUL-terminated path.
        unsafe { libc::unlink(self.path.as_ptr()) };
    }
}

/// Name files to remove on a fatal signal: a fixed table a signal handler can walk without a
/// lock or an allocation.
pub(super) const SLOTS: usize = 1024;
static CLEANUP: [AtomicPtr<libc::c_char>; SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];
pub(super) const FATAL: [c_int; 4] = [libc::SIGBUS, libc::SIGSEGV, libc::SIGTERM, libc::SIGINT];

/// The handlers the cleanup replaced, one per signal of [`FATAL`], written once before the
/// cleanup's own handler is installed for that signal (`HAVE_OLD`), read by that handler.
pub(super) struct OldActions(std::cell::UnsafeCell<[std::mem::MaybeUninit<libc::sigaction>; 4]>);
// SAFETY: each slot is written once, before its flag in HAVE_OLD is set and before the handler
// that reads it is installed; never written again while a handler may run.
unsafe impl Sync for OldActions {}
static OLD: OldActions = OldActions(std::cell::UnsafeCell::new(
    [std::mem::MaybeUninit::uninit(); 4],
));
static HAVE_OLD: [AtomicBool; 4] = [const { AtomicBool::new(false) }; 4];

pub(super) fn register(path: &CStr) -> Option<usize> {
    let p = path.as_ptr().cast_mut();
    let slot = CLEANUP.iter().position(|s| {
        s.compare_exchange(std::ptr::null_mut(), p, SeqCst, SeqCst)
            .is_ok()
    });
    if slot.is_none() {
        fi_info!(
            EpCtrl,
            "more than {SLOTS} doorbells: this one's file is not removed on a crash"
        );
    }
    slot
}

/// The action the cleanup replaced for `sig`, if it installed itself for it.
pub(super) fn old_action(sig: c_int) -> Option<*const libc::sigaction> {
    let i = FATAL.iter().position(|s| *s == sig)?;
    // SAFETY: the slot was written before its flag was set (see OldActions).
    HAVE_OLD[i]
        .load(SeqCst)
        .then(|| unsafe { (*OLD.0.get())[i].as_ptr() })
}

extern "C" fn on_fatal(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    for s in CLEANUP.iter() {
        let p = s.swap(std::ptr::null_mut(), SeqCst);
        if !p.is_null() {
            // SAFETY: a registered NUL-terminated path (unlink is async-signal-safe).
            unsafe { libc::unlink(p) };
        }
    }
    // SAFETY: restores the handler this one replaced (or the default), then runs it as shm's
    // own cleanup does: the previous handler's SA_SIGINFO function, or the signal raised again.
    unsafe {
        let Some(old) = old_action(sig) else {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
            return;
        };
        libc::sigaction(sig, old, std::ptr::null_mut());
        let h = (*old).sa_sigaction;
        if (*old).sa_flags & libc::SA_SIGINFO != 0 && h != libc::SIG_DFL && h != libc::SIG_IGN {
            let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(h);
            f(sig, info, ctx);
        } else {
            libc::raise(sig);
        }
    }
}

static INSTALLED: Mutex<bool> = Mutex::new(false);

pub(super) fn install_cleanup() {
    let mut installed = INSTALLED.lock();
    if *installed {
        return;
    }
    *installed = true;
    for (i, sig) in FATAL.iter().enumerate() {
        // SAFETY: an all-zero sigaction is valid; filled below.
        let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = on_fatal as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: the slot is not read until its flag is set (see OldActions); act and the
        // slot live across the call, which fills the slot with the action replaced.
        let ret = unsafe { libc::sigaction(*sig, &act, (*OLD.0.get())[i].as_mut_ptr()) };
        if ret != 0 {
            fi_info!(
                EpCtrl,
                "cannot catch signal {sig} to remove doorbell files on a crash"
            );
            continue;
        }
        HAVE_OLD[i].store(true, SeqCst);
    }
}

/// Puts back the handlers the cleanup replaced (where its own is still installed): the
/// provider is being unloaded, and a handler must not outlive the code it runs.
pub fn uninstall_cleanup() {
    let mut installed = INSTALLED.lock();
    if !*installed {
        return;
    }
    for (i, sig) in FATAL.iter().enumerate() {
        if !HAVE_OLD[i].load(SeqCst) {
            continue;
        }
        // SAFETY: an all-zero sigaction is valid as an out value.
        let mut now: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: reads the current action only.
        unsafe { libc::sigaction(*sig, std::ptr::null(), &mut now) };
        if now.sa_sigaction == on_fatal as *const () as usize {
            // SAFETY: the slot was written when the handler was installed.
            unsafe { libc::sigaction(*sig, (*OLD.0.get())[i].as_ptr(), std::ptr::null_mut()) };
        }
        HAVE_OLD[i].store(false, SeqCst);
    }
    *installed = false;
}

/// Removes the name files of dead processes of this pid namespace (left by a SIGKILL).
pub(super) fn reap_stale() {
    // SAFETY: no arguments.
    let uid = unsafe { libc::geteuid() };
    let prefix = format!("{NAME_PREFIX}{uid}_");
    let Ok(dir) = std::fs::read_dir(SHM_DIR) else {
        return;
    };
    let ns = pid_ns();
    for entry in dir.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with(&prefix) {
            continue;
        }
        let Some(r) = read_record(&entry.path()) else {
            continue;
        };
        // SAFETY: no memory arguments.
        let dead = unsafe { libc::kill(r.pid as libc::pid_t, 0) } != 0
            && last_error().raw_os_error() == Some(libc::ESRCH);
        if r.pid_ns == ns && dead {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A name file's record, if it is one: a regular file of this user with the right magic.
pub(super) fn read_record(path: &std::path::Path) -> Option<NameRecord> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let m = f.metadata().ok()?;
    // SAFETY: no arguments.
    if !m.is_file() || m.uid() != unsafe { libc::geteuid() } {
        return None;
    }
    let mut buf = [0u8; std::mem::size_of::<NameRecord>()];
    f.read_exact(&mut buf).ok()?;
    // SAFETY: NameRecord is plain data of that size; any bytes are a value of it.
    let r: NameRecord = unsafe { std::ptr::read_unaligned(buf.as_ptr().cast()) };
    (r.magic == MAGIC && r.version == VERSION).then_some(r)
}

/// The bits of `hints` (feed slots, [`HINT_ALL`] aside) in the page's slot words.
pub(super) fn slot_bits_of(hints: Hints) -> [u32; SLOT_WORDS] {
    std::array::from_fn(|k| ((hints & !HINT_ALL) >> (32 * k)) as u32)
}

/// [`Hints`] from its low and high halves (as the page and the name record keep them).
pub(super) fn join_hints([lo, hi]: [u64; 2]) -> Hints {
    Hints::from(lo) | Hints::from(hi) << 64
}

/// The low and high halves of [`Hints`] (see [`join_hints`]).
pub(super) fn split_hints(hints: Hints) -> [u64; 2] {
    [hints as u64, (hints >> 64) as u64]
}
