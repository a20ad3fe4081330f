//! What differs between the libfabric versions rscntr runs under, 1.17 to 2.x, decided here
//! and nowhere else: the rest of the code asks this file.
//!
//! - **Which entry points.** `fi_getinfo`, `fi_dupinfo` and `fi_freeinfo` carry a new symbol
//!   version each time `fi_info` grows (FABRIC_1.3 up to 1.19, 1.7 from 1.20, 1.8 from 2.0,
//!   1.9 from 2.5). A DSO that imports them at link time imports the version of the headers it
//!   was built with, which no older library exports, and the dynamic loader refuses the whole
//!   provider. rscntr imports only what every version exports at the same symbol version
//!   (`fi_version`, `fi_log`, `fi_param_*`, `fi_strerror` at FABRIC_1.0, `fi_fabric` at 1.1) and
//!   looks the three up in the running library by name, which gives its default (newest)
//!   version: the one that allocates and reads the structs at the running library's sizes, as
//!   the library's own providers do.
//! - **Which struct fields.** rscntr is built against 2.1's headers; every change from 1.17 to
//!   2.5 appended fields, so a field is there exactly when the running `fi_version()` (or, for
//!   what the application reads, the API version it asked for) is at least the version that
//!   appended it ([`Api`]).
//! - **Which counting path.** Whether a core counts into a bound rscntr counter through the
//!   peer counter API (`FI_PEER`, from 1.19), or keeps a counter of its own that rscntr reads or
//!   hooks ([`counting`]).
//!
//! Read from libfabric's sources at the release tags (src/fabric.c's `DEFAULT_SYMVER` lines,
//! include/rdma/*.h, prov/util/src/util_cntr.c, each core's counter increments); the project's
//! notes keep the table per release.

use crate::ofi;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::OnceLock;

/// A libfabric API version, `FI_VERSION(major, minor)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Api(pub u32);

impl Api {
    pub const V1_18: Api = Api::new(1, 18);
    pub const V1_19: Api = Api::new(1, 19);
    pub const V1_20: Api = Api::new(1, 20);
    pub const V1_22: Api = Api::new(1, 22);
    pub const V2_0: Api = Api::new(2, 0);
    pub const V2_5: Api = Api::new(2, 5);

    pub const fn new(major: u32, minor: u32) -> Api {
        Api((major << 16) | minor)
    }

    /// The running library's `fi_version()` (what `fi_prov_ini` registered; before that, in
    /// cargo's own tests, the library the test binary is linked with).
    pub fn running() -> Api {
        match super::provider::runtime_version() {
            0 => Api(linked_version()),
            v => Api(v),
        }
    }

    pub fn major(self) -> u32 {
        self.0 >> 16
    }

    pub fn minor(self) -> u32 {
        self.0 & 0xffff
    }

    /// `fi_domain_attr.max_cntr_value` and `max_err_cntr_value` (appended in 2.5).
    pub fn has_max_cntr_values(self) -> bool {
        self >= Api::V2_5
    }

    /// The peer counter API (`FI_PEER` on `fi_cntr_open`, `fid_peer_cntr`), from 1.19: before,
    /// util's counters refuse every flag.
    pub fn has_peer_counters(self) -> bool {
        self >= Api::V1_19
    }

    /// Whether a wait with a timeout on a condition variable inside libfabric sleeps
    /// (`ofi_wait_cond`, src/unix/osd.c): before 1.22 it computes its deadline on the
    /// monotonic clock and hands it to a condition variable that runs on the realtime one, so
    /// every such wait returns at once (sockets' own `fi_cntr_wait` with a timeout, for one).
    pub fn timed_cond_waits_sleep(self) -> bool {
        self >= Api::V1_22
    }

    /// How many bytes of an `fi_cq_err_entry` an application of this API version owns:
    /// `src_addr` was appended in 1.20, and libfabric's own CQs write it only for applications
    /// that asked for 1.20 or newer.
    pub fn cq_err_entry_size(self) -> usize {
        if self >= Api::V1_20 {
            std::mem::size_of::<ofi::fi_cq_err_entry>()
        } else {
            std::mem::offset_of!(ofi::fi_cq_err_entry, src_addr)
        }
    }
}

impl std::fmt::Display for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major(), self.minor())
    }
}

// The bindings describe the 2.1 structs; the 2.5 fields are written at the offsets below only
// when the running library is 2.5 or newer. Building against 2.5+ headers would need this
// code to use the generated fields instead, so refuse it loudly.
const _: () = assert!(
    ofi::FI_MAJOR_VERSION == 2 && ofi::FI_MINOR_VERSION < 5,
    "rscntr must be built against libfabric 2.1-2.4 headers (it runs on 1.17 and newer)"
);
/// In 2.5, `max_cntr_value` and `max_err_cntr_value` follow `max_group_id`, 8-byte aligned,
/// which is exactly where the 2.1 struct (padded to 8) ends.
const MAX_CNTR_VALUE_OFFSET: usize = std::mem::size_of::<ofi::fi_domain_attr>();
const _: () = assert!(
    MAX_CNTR_VALUE_OFFSET
        == (std::mem::offset_of!(ofi::fi_domain_attr, max_group_id) + 4).next_multiple_of(8)
);
// 1.17's fi_cq_err_entry ends where src_addr begins (80 bytes on x86-64).
const _: () = assert!(std::mem::offset_of!(ofi::fi_cq_err_entry, src_addr) == 80);

/// Sets `max_cntr_value` and `max_err_cntr_value` where the running library has them.
///
/// # Safety
/// `dom` was allocated by the running libfabric (through [`dupinfo`]), so it is as large as
/// that version's struct.
pub unsafe fn set_max_cntr_values(dom: *mut ofi::fi_domain_attr, value: u64) {
    if !Api::running().has_max_cntr_values() {
        return;
    }
    // SAFETY: caller's contract; a 2.5+ struct has the two u64 fields right after the 2.1
    // layout (checked at compile time above).
    unsafe {
        let base = dom.cast::<u8>();
        base.add(MAX_CNTR_VALUE_OFFSET)
            .cast::<u64>()
            .write_unaligned(value);
        base.add(MAX_CNTR_VALUE_OFFSET + 8)
            .cast::<u64>()
            .write_unaligned(value);
    }
}

/// How a core's completions reach a bound rscntr counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counting {
    /// The core calls the owner's `inc` (`FI_PEER`).
    Peer,
    /// The core counts through its own counter's `add` and `adderr`, which the layer points at
    /// rscntr's counter (tcp at every version, rxm before 2.0, rxd at every version); opened
    /// with `FI_PEER` where the core takes it and still counts through `add` (tcp from 1.19).
    OwnAdd { peer_flag: bool },
    /// A core counter of its own, whose increase rscntr takes in on each pull; why.
    CoreCounter(&'static str),
}

impl Counting {
    /// Whether the core counter is opened with `FI_PEER`.
    pub fn peer_flag(self) -> bool {
        matches!(self, Counting::Peer | Counting::OwnAdd { peer_flag: true })
    }
}

/// How `core` counts into a bound rscntr counter under libfabric `api`. Never a peer counter
/// that accepts `FI_PEER` and drops what it should count.
///
/// rxm and rxd count every completion through the bound counter's own ops, where rscntr's hook
/// catches it (read at the tags 1.17.0 to 1.22.0, rxd also at 2.1.0): util's
/// `ofi_ep_bind_cntr` (prov/util/src/util_ep.c), which both bind counters with (rxm through
/// `ofi_ep_fid_bind`, from 1.18 `rxm_ep_bind`'s `ofi_ep_bind`; rxd in `rxd_ep_bind`), sets the
/// endpoint's increment functions to `ofi_cntr_inc` (include/ofi_util.h:
/// `cntr->cntr_fid.ops->add(&cntr->cntr_fid, 1)`). rxm counts with `ofi_ep_*_cntr_inc` (from
/// 1.19 `ofi_ep_cntr_inc`) and its errors with `rxm_cntr_incerr` (prov/rxm/src/rxm.h:
/// `ops->adderr`), all in prov/rxm/src/rxm_cq.c; rxd with `ofi_ep_tx_cntr_inc_func` and
/// `ofi_ep_rx_cntr_inc_func` (rxd_cq.c) and its errors with `rxd_cntr_report_error`
/// (rxd_cntr.c: `ops->adderr`). Neither reads the counter's value but through its ops (rxd's
/// own `rxd_cntr_wait` reads `cnt`, a wait rscntr never calls), and util's `ofi_cntr_read`
/// still runs the bound endpoints' progress (`ofi_cntr_progress`) before it returns the value,
/// which stays at zero. From 2.0 rxm calls the owner's `inc` itself (`ofi_ep_peer_tx_cntr_inc`
/// and the like, rxm_cq.c). (rxm's pass-through domains count elsewhere:
/// `layer::wait::core_counting`.)
pub fn counting(core: &str, api: Api) -> Counting {
    let util = core.rsplit_once(';').map(|(_, u)| u);
    if core == "tcp" {
        Counting::OwnAdd {
            peer_flag: api.has_peer_counters(),
        }
    } else if util == Some("ofi_rxd") {
        // Not FI_PEER: rxd counts through its counter's own `add`, which util's peer counters
        // (from 1.19, `util_peer_cntr_ops`) do not implement, at every version.
        Counting::OwnAdd { peer_flag: false }
    } else if util == Some("ofi_rxm") && api < Api::V2_0 {
        // Not FI_PEER: before 2.0 rxm counts through its counter's `add`, a stub in util's
        // peer counters, which accept FI_PEER from 1.19 and lose every count.
        Counting::OwnAdd { peer_flag: false }
    } else if !api.has_peer_counters() {
        Counting::CoreCounter("libfabric before 1.19 has no peer counters")
    } else if core == "sockets" {
        Counting::CoreCounter("sockets refuses FI_PEER")
    } else {
        Counting::Peer
    }
}

/// The longest a waiter over `core` may sleep between pulls, where the core makes progress
/// that nothing it gives rscntr to sleep on announces (None: what the core gives announces
/// everything). rxm over 1.17's tcp: a peer's connection request reaches rxm only through rxm's
/// own connection progress, and rxm puts its EQ in a counter's wait set only for manual
/// progress or atomics, so nothing wakes a sleeper for it; rxm's own counter waits run its
/// progress every 50 ms (util's OFI_TIMEOUT_QUANTUM_MS), and so do rscntr's. From 1.18 tcp's
/// own progress, whose fd the wait sets hold, takes connections.
pub fn unannounced_progress(core: &str, api: Api) -> Option<std::time::Duration> {
    let util = core.rsplit_once(';').map(|(_, u)| u);
    (util == Some("ofi_rxm") && api < Api::V1_18).then(|| std::time::Duration::from_millis(50))
}

type GetinfoFn = unsafe extern "C" fn(
    u32,
    *const c_char,
    *const c_char,
    u64,
    *const ofi::fi_info,
    *mut *mut ofi::fi_info,
) -> c_int;
type DupinfoFn = unsafe extern "C" fn(*const ofi::fi_info) -> *mut ofi::fi_info;
type FreeinfoFn = unsafe extern "C" fn(*mut ofi::fi_info);

/// The running library's `fi_getinfo`, `fi_dupinfo` and `fi_freeinfo`.
struct Entries {
    getinfo: GetinfoFn,
    dupinfo: DupinfoFn,
    freeinfo: FreeinfoFn,
}

/// Function pointers only: nothing to give back at unload, so a plain `OnceLock`.
static ENTRIES: OnceLock<Result<Entries, String>> = OnceLock::new();

fn entries() -> Result<&'static Entries, &'static str> {
    ENTRIES
        .get_or_init(|| {
            let found = resolve();
            match &found {
                Ok(_) => crate::fi_info!(
                    Core,
                    "fi_getinfo, fi_dupinfo, fi_freeinfo: the default versions of libfabric API {}",
                    Api::running()
                ),
                Err(why) => crate::fi_warn!(Core, "{why}"),
            }
            found
        })
        .as_ref()
        .map_err(String::as_str)
}

/// Looks the three entry points up in the library that holds `fi_version`, the one rscntr is
/// linked with and loaded by. `dlsym` answers a symbol's default version.
fn resolve() -> Result<Entries, String> {
    // SAFETY: Dl_info is plain data, filled by dladdr.
    let mut dl: libc::Dl_info = unsafe { std::mem::zeroed() };
    let addr = ofi::fi_version as *const c_void;
    // SAFETY: dladdr only reads the address and fills `dl`.
    if unsafe { libc::dladdr(addr, &mut dl) } == 0 || dl.dli_fname.is_null() {
        return Err("cannot find the libfabric that holds fi_version (dladdr)".into());
    }
    // SAFETY: dli_fname is a C string dladdr set; RTLD_NOLOAD only finds a loaded library.
    let handle = unsafe { libc::dlopen(dl.dli_fname, libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        // SAFETY: a C string from dladdr.
        let path = unsafe { CStr::from_ptr(dl.dli_fname) }.to_string_lossy();
        return Err(format!("cannot open the loaded libfabric {path}"));
    }
    let sym = |name: &CStr| {
        // SAFETY: a handle from dlopen and a C string.
        let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
        (!p.is_null())
            .then_some(p)
            .ok_or_else(|| format!("libfabric has no {}", name.to_string_lossy()))
    };
    let found = (|| {
        let (g, d, f) = (
            sym(c"fi_getinfo")?,
            sym(c"fi_dupinfo")?,
            sym(c"fi_freeinfo")?,
        );
        // SAFETY: libfabric's entry points, with these C signatures at every version.
        Ok(unsafe {
            Entries {
                getinfo: std::mem::transmute::<*mut c_void, GetinfoFn>(g),
                dupinfo: std::mem::transmute::<*mut c_void, DupinfoFn>(d),
                freeinfo: std::mem::transmute::<*mut c_void, FreeinfoFn>(f),
            }
        })
    })();
    // The library stays loaded: it is the one that loaded rscntr. This only drops the
    // reference dlopen took.
    // SAFETY: the handle dlopen returned above.
    unsafe { libc::dlclose(handle) };
    found
}

/// The running library's `fi_getinfo`.
///
/// # Safety
/// As `fi_getinfo`: `node`, `service` NULL or C strings; `hints` NULL or a valid info;
/// `info` an out pointer.
pub unsafe fn getinfo(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const ofi::fi_info,
    info: *mut *mut ofi::fi_info,
) -> c_int {
    match entries() {
        // SAFETY: caller's contract.
        Ok(e) => unsafe { (e.getinfo)(version, node, service, flags, hints, info) },
        Err(_) => -(ofi::FI_ENOSYS as c_int),
    }
}

/// The running library's `fi_dupinfo`: NULL gives a fresh info with every attr allocated at
/// the running library's sizes.
///
/// # Safety
/// `info` is NULL or a valid info.
pub unsafe fn dupinfo(info: *const ofi::fi_info) -> *mut ofi::fi_info {
    match entries() {
        // SAFETY: caller's contract.
        Ok(e) => unsafe { (e.dupinfo)(info) },
        Err(_) => std::ptr::null_mut(),
    }
}

/// The running library's `fi_freeinfo`.
///
/// # Safety
/// `info` is NULL or a list the running library allocated (through [`getinfo`], [`dupinfo`]).
pub unsafe fn freeinfo(info: *mut ofi::fi_info) {
    if let Ok(e) = entries() {
        // SAFETY: caller's contract.
        unsafe { (e.freeinfo)(info) }
    }
}

/// `fi_version()` of the library this binary is linked with.
fn linked_version() -> u32 {
    // SAFETY: fi_version takes no arguments.
    unsafe { ofi::fi_version() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_appear_with_the_version_that_appended_them() {
        assert!(!Api::new(1, 17).has_max_cntr_values());
        assert!(!Api::new(2, 4).has_max_cntr_values());
        assert!(Api::new(2, 5).has_max_cntr_values());
        assert!(!Api::new(1, 21).timed_cond_waits_sleep());
        assert!(Api::new(1, 22).timed_cond_waits_sleep());
        assert!(!Api::new(1, 18).has_peer_counters());
        assert!(Api::new(1, 19).has_peer_counters());
        assert_eq!(Api::new(1, 17).cq_err_entry_size(), 80);
        assert_eq!(Api::new(1, 19).cq_err_entry_size(), 80);
        assert_eq!(Api::new(1, 20).cq_err_entry_size(), 88);
        assert_eq!(Api::new(2, 5).to_string(), "2.5");
    }

    #[test]
    fn no_core_is_fed_through_a_peer_counter_that_drops_counts() {
        let peer = |core, major, minor| counting(core, Api::new(major, minor)).peer_flag();
        for core in ["shm", "tcp", "tcp;ofi_rxm", "udp;ofi_rxd", "sockets"] {
            assert!(!peer(core, 1, 17), "{core} at 1.17");
            assert!(!peer(core, 1, 18), "{core} at 1.18");
        }
        assert_eq!(counting("shm", Api::new(1, 19)), Counting::Peer);
        assert_eq!(counting("shm", Api::new(1, 22)), Counting::Peer);
        assert!(!peer("tcp;ofi_rxm", 1, 22));
        assert!(!peer("verbs;ofi_rxm", 1, 22));
        assert_eq!(counting("tcp;ofi_rxm", Api::new(2, 0)), Counting::Peer);
        assert!(!peer("udp;ofi_rxd", 2, 5));
        assert!(!peer("sockets", 2, 5));
    }

    #[test]
    fn cores_that_count_through_their_own_add_are_hooked() {
        let own = |peer_flag| Counting::OwnAdd { peer_flag };
        assert_eq!(counting("tcp", Api::new(1, 17)), own(false));
        assert_eq!(counting("tcp", Api::new(2, 1)), own(true));
        // rxm before 2.0 and rxd at every version, never with FI_PEER.
        for (major, minor) in [(1, 17), (1, 18), (1, 19), (1, 22)] {
            let api = Api::new(major, minor);
            assert_eq!(counting("tcp;ofi_rxm", api), own(false), "rxm at {api}");
            assert_eq!(counting("verbs;ofi_rxm", api), own(false), "rxm at {api}");
        }
        for (major, minor) in [(1, 17), (1, 19), (2, 1), (2, 5)] {
            let api = Api::new(major, minor);
            assert_eq!(counting("udp;ofi_rxd", api), own(false), "rxd at {api}");
        }
        // What keeps a counter of its own: no peer counters before 1.19, sockets refusing them.
        assert!(matches!(
            counting("shm", Api::new(1, 18)),
            Counting::CoreCounter(_)
        ));
        assert!(matches!(
            counting("sockets", Api::new(2, 1)),
            Counting::CoreCounter(_)
        ));
    }

    #[test]
    fn only_rxm_over_the_old_tcp_sleeps_bounded() {
        assert!(unannounced_progress("tcp;ofi_rxm", Api::new(1, 17)).is_some());
        assert!(unannounced_progress("tcp;ofi_rxm", Api::new(1, 18)).is_none());
        assert!(unannounced_progress("tcp", Api::new(1, 17)).is_none());
        assert!(unannounced_progress("udp;ofi_rxd", Api::new(1, 17)).is_none());
    }
}
