//! `fi_getinfo` over a core: which core (`FI_RSCNTR_CORE`, or the first that answers), the
//! core's infos mirrored as rscntr's, the core's copy of an application's info, and which core
//! each mirrored fabric came from.

use super::progress;
use super::rma_event;
use crate::boundary::ffi::err;
use crate::boundary::testhook::{self, Op};
use crate::boundary::versions;
use crate::boundary::{params, provider};
use crate::cntr::hw;
use crate::{fi_dbg, fi_info, fi_warn, ofi};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int};

/// libfabric's internal flag (include/ofi.h) that lets a provider's inner fi_getinfo see cores
/// that FI_PROVIDER hides; its own layered providers (efa over shm, lnx) pass it likewise.
pub const OFI_GETINFO_HIDDEN: u64 = 1 << 60;
/// libfabric's internal flag for utility providers probing for a core (include/ofi.h).
pub const OFI_CORE_PROV_ONLY: u64 = 1 << 59;

/// Capabilities rscntr serves itself over every core, never the core's: triggered operations
/// wait on rscntr counters, which a core cannot read (`trigger.rs`). Taken out of what the
/// core is asked and of its infos, and put in rscntr's infos where the application asked for
/// it (or asked for no capabilities in particular).
const OWN_CAPS: u64 = ofi::FI_TRIGGER as u64;

/// Cores tried, in order, when FI_RSCNTR_CORE is unset or "auto".
const AUTO_CORES: &[&str] = &[
    "efa",
    "verbs;ofi_rxm",
    "tcp;ofi_rxm",
    "tcp",
    "shm",
    "udp;ofi_rxd",
    "sockets",
];

/// What FI_RSCNTR_CORE asks for.
pub enum CoreSetting {
    /// Counters only: rscntr's own fabric, domain and EQ, no endpoints.
    None,
    Auto,
    Named(String),
}

pub fn core_setting() -> CoreSetting {
    match params::core() {
        None => CoreSetting::Auto,
        Some(s) if s.eq_ignore_ascii_case("auto") => CoreSetting::Auto,
        Some(s) if s.eq_ignore_ascii_case("none") => CoreSetting::None,
        Some(s) => CoreSetting::Named(s),
    }
}

/// The cores to try for a request, in order.
pub fn candidates() -> Vec<String> {
    AUTO_CORES
        .iter()
        .filter(|core| {
            let usable = !core_hidden_from_utility(core);
            if !usable {
                fi_dbg!(
                    Core,
                    "skipping {core}: FI_PROVIDER hides its core from the utility provider"
                );
            }
            usable
        })
        .map(|s| s.to_string())
        .collect()
}

/// A layering "core;util" cannot work when FI_PROVIDER hides the core: the utility provider's
/// own inner fi_getinfo (at fi_fabric/fi_domain) does not pass OFI_GETINFO_HIDDEN. libfabric
/// hides a core when FI_PROVIDER has positive entries and none of them names it (a layered
/// entry "core;util" names its core).
fn core_hidden_from_utility(layering: &str) -> bool {
    let Some((core, _util)) = layering.split_once(';') else {
        return false;
    };
    let Ok(filter) = std::env::var("FI_PROVIDER") else {
        return false;
    };
    let positive: Vec<&str> = filter
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty() && !e.starts_with('^'))
        .collect();
    !positive.is_empty()
        && !positive
            .iter()
            .any(|e| e.split(';').any(|n| n.eq_ignore_ascii_case(core)))
}

/// Which core each mirrored fabric name came from, so `fi_fabric` (which only gets the
/// fabric attr, whose prov_name libfabric rewrote to "rscntr") can open the same core.
static FABRIC_CORES: Mutex<Option<HashMap<String, String>>> = Mutex::new(None);

fn remember_fabric(name: &str, core: &str) {
    FABRIC_CORES
        .lock()
        .get_or_insert_with(HashMap::new)
        .insert(name.to_owned(), core.to_owned());
}

/// Forgets the fabric names and puts back the signal handlers the doorbell replaced (provider
/// cleanup, before libfabric unloads rscntr).
pub fn release() {
    *FABRIC_CORES.lock() = None;
    super::doorbell::bell::uninstall_cleanup();
}

pub fn core_of_fabric(name: &str) -> Option<String> {
    FABRIC_CORES
        .lock()
        .as_ref()
        .and_then(|m| m.get(name).cloned())
}

/// # Safety
/// `s` is NULL or a C string.
unsafe fn c_str<'a>(s: *const c_char) -> Option<&'a str> {
    // SAFETY: caller's contract.
    (!s.is_null()).then(|| unsafe { CStr::from_ptr(s) }.to_str().unwrap_or(""))
}

/// Replaces a malloc'ed string field of an info with a copy of `value` (NULL for None).
///
/// # Safety
/// `field` points to a string field of a libfabric-allocated info.
unsafe fn set_str(field: *mut *mut c_char, value: Option<&CStr>) {
    // SAFETY: libfabric allocated the field's string with malloc; free(NULL) is fine.
    unsafe {
        libc::free((*field).cast());
        *field = value.map_or(std::ptr::null_mut(), |v| libc::strdup(v.as_ptr()));
    }
}

/// A copy of `info` fit for the core: the core's provider name, no counter demands (rscntr
/// serves counters). The caller frees it with fi_freeinfo.
///
/// # Safety
/// `info` is NULL or a valid info (all attr pointers NULL or valid).
pub unsafe fn to_core(info: *const ofi::fi_info, core: &CStr) -> Option<*mut ofi::fi_info> {
    // SAFETY: fi_dupinfo accepts NULL (fresh info) or a valid info.
    let dup = unsafe { versions::dupinfo(info) };
    // SAFETY: fi_dupinfo returns NULL or an info with all attrs allocated.
    let i = unsafe { dup.as_mut()? };
    // SAFETY: the attrs of a fresh dup are valid.
    unsafe {
        set_str(&mut (*i.fabric_attr).prov_name, Some(core));
        (*i.domain_attr).cntr_cnt = 0;
        versions::set_max_cntr_values(i.domain_attr, 0);
        if rma_event::emulated(&core.to_string_lossy()) {
            // rscntr's own remote-access counters: the core is asked for none.
            i.caps &= !RMA_EVENT;
            (*i.domain_attr).mr_mode &= !(ofi::FI_MR_RMA_EVENT as c_int);
            if let Some(tx) = i.tx_attr.as_mut() {
                tx.caps &= !RMA_EVENT;
            }
            if let Some(rx) = i.rx_attr.as_mut() {
                rx.caps &= !RMA_EVENT;
            }
        }
        i.caps &= !OWN_CAPS;
        if let Some(tx) = i.tx_attr.as_mut() {
            tx.caps &= !OWN_CAPS;
            tx.op_flags &= !OWN_CAPS;
        }
        if let Some(rx) = i.rx_attr.as_mut() {
            rx.caps &= !OWN_CAPS;
            rx.op_flags &= !OWN_CAPS;
        }
    }
    Some(dup)
}

/// Keeps only the infos of exactly `core` (a lone core name also brings the utility providers
/// that layer over it: "tcp" answers with "tcp;ofi_rxm" infos too) and of the fabric and
/// domain the hints name, if they name one (libfabric 1.17's cores answer for any name; the
/// newer libraries leave out infos of other names). Returns the new head.
///
/// # Safety
/// `list` is NULL or a list returned by fi_getinfo; `hints` a valid info.
unsafe fn keep_only(
    list: *mut ofi::fi_info,
    core: &str,
    hints: &ofi::fi_info,
) -> *mut ofi::fi_info {
    // SAFETY: the hints' attrs are NULL or valid, their names NULL or C strings.
    let (fabric, domain) = unsafe {
        (
            hints.fabric_attr.as_ref().and_then(|f| c_str(f.name)),
            hints.domain_attr.as_ref().and_then(|d| c_str(d.name)),
        )
    };
    // SAFETY: an info of the list: attrs valid, names NULL or C strings.
    let named = |i: &ofi::fi_info| unsafe {
        fabric.is_none_or(|f| c_str((*i.fabric_attr).name) == Some(f))
            && domain.is_none_or(|d| c_str((*i.domain_attr).name) == Some(d))
    };
    let mut head: *mut ofi::fi_info = std::ptr::null_mut();
    let mut tail: *mut ofi::fi_info = std::ptr::null_mut();
    let mut cur = list;
    // SAFETY: walking a valid list; each dropped info is unlinked and freed alone.
    unsafe {
        while !cur.is_null() {
            let next = (*cur).next;
            (*cur).next = std::ptr::null_mut();
            let name = c_str((*(*cur).fabric_attr).prov_name).unwrap_or("");
            if name.eq_ignore_ascii_case(core) && named(&*cur) {
                if tail.is_null() {
                    head = cur
                } else {
                    (*tail).next = cur
                }
                tail = cur;
            } else {
                versions::freeinfo(cur);
            }
            cur = next;
        }
    }
    head
}

/// Turns a list of core infos into rscntr infos in place; `own` are the capabilities of
/// rscntr's own to add (see [`OWN_CAPS`]).
///
/// # Safety
/// `list` is a list returned by fi_getinfo.
unsafe fn mirror(mut cur: *mut ofi::fi_info, core: &str, own: u64) {
    // SAFETY: walking a valid fi_getinfo list; all attr pointers are set.
    while let Some(i) = unsafe { cur.as_mut() } {
        i.caps = (i.caps & !OWN_CAPS) | own;
        unsafe {
            (*i.tx_attr).caps = ((*i.tx_attr).caps & !OWN_CAPS) | own;
            (*i.rx_attr).caps &= !OWN_CAPS;
            let fab = &mut *i.fabric_attr;
            if let Some(name) = c_str(fab.name) {
                remember_fabric(name, core);
            }
            set_str(&mut fab.prov_name, None); // libfabric fills in "rscntr"
            let (cntr_cnt, max_cntr_value) = hw::advertised_limits();
            (*i.domain_attr).cntr_cnt = cntr_cnt;
            versions::set_max_cntr_values(i.domain_attr, max_cntr_value);
        }
        cur = i.next;
    }
}

const RMA_EVENT: u64 = ofi::FI_RMA_EVENT;

/// Over a core whose remote-access counters are rscntr's (`rma_event.rs`): FI_RMA_EVENT only
/// when the hints ask for it (tcp's own, which counts nothing, is taken out), and then
/// FI_MR_RMA_EVENT as asked and 4 bytes of remote CQ data (rscntr's notifications use the rest).
///
/// # Safety
/// `list` is a list rscntr mirrored; `hints` NULL or valid.
unsafe fn rma_events(mut cur: *mut ofi::fi_info, hints: Option<&ofi::fi_info>) {
    let asked = hints.is_some_and(|h| h.caps & RMA_EVENT != 0);
    // SAFETY: NULL or valid (caller's contract).
    let mr_asked = hints
        .and_then(|h| unsafe { h.domain_attr.as_ref() })
        .is_some_and(|d| d.mr_mode & ofi::FI_MR_RMA_EVENT as c_int != 0);
    // SAFETY: walking a valid list; all attr pointers are set.
    while let Some(i) = unsafe { cur.as_mut() } {
        unsafe {
            let (tx, rx, dom) = (&mut *i.tx_attr, &mut *i.rx_attr, &mut *i.domain_attr);
            i.caps &= !RMA_EVENT;
            tx.caps &= !RMA_EVENT;
            rx.caps &= !RMA_EVENT;
            if asked {
                i.caps |= RMA_EVENT;
                rx.caps |= RMA_EVENT;
                dom.cq_data_size = dom.cq_data_size.min(rma_event::APP_DATA_SIZE);
                if mr_asked {
                    dom.mr_mode |= ofi::FI_MR_RMA_EVENT as c_int;
                }
            }
        }
        cur = i.next;
    }
}

/// fi_getinfo over one core; Ok(list) only when the core answered.
///
/// # Safety
/// As fi_getinfo: node/service NULL or C strings, hints NULL or valid.
pub unsafe fn getinfo_over(
    core: &str,
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const ofi::fi_info,
) -> Result<*mut ofi::fi_info, c_int> {
    let core_c = CString::new(core).map_err(|_| err::EINVAL)?;
    // Primary capabilities come only when asked for, or when no capabilities are named.
    // SAFETY: hints NULL or valid (caller's contract).
    let own = match unsafe { hints.as_ref() } {
        None => OWN_CAPS,
        Some(h) if h.caps == 0 => OWN_CAPS,
        Some(h) => h.caps & OWN_CAPS,
    };
    // SAFETY: caller's contract.
    let Some(core_hints) = (unsafe { to_core(hints, &core_c) }) else {
        return Err(err::ENOMEM);
    };
    if let Some(e) = testhook::fail(Op::Getinfo) {
        // SAFETY: allocated by to_core.
        unsafe { versions::freeinfo(core_hints) };
        return Err(e);
    }
    let ask = |h: *mut ofi::fi_info| {
        // SAFETY: valid hints we own; the core name keeps this from recursing into rscntr.
        unsafe { core_getinfo(core, version, node, service, flags, h) }
    };
    // SAFETY: hints we own, with a domain attr (a dup).
    let core_dom = unsafe { &mut *(*core_hints).domain_attr };
    // Automatic data progress the core does not deliver itself is rscntr's (`progress.rs`):
    // the core is asked for its own progress, and the infos say AUTO.
    // SAFETY: NULL or valid (caller's contract).
    let app_hints = unsafe { hints.as_ref() };
    let asked_auto = progress::data_progress(core_dom) == AUTO;
    let caps = app_hints.map_or(0, |h| h.caps);
    let emulated_auto = progress::rscntr_provides_auto(core_dom, core, caps);
    if emulated_auto {
        // MANUAL rather than UNSPEC: rxm fills an unspecified progress with its own AUTO, and
        // then answers FI_THREAD_SAFE whatever threading was asked.
        progress::set_data_progress(core_dom, ofi::fi_progress_FI_PROGRESS_MANUAL);
    }
    let mut answer = ask(core_hints);
    if answer == Err(err::ENODATA) && emulated_auto && core_dom.control_progress == AUTO {
        // rxd refuses automatic control progress too.
        core_dom.control_progress = ofi::fi_progress_FI_PROGRESS_UNSPEC;
        answer = ask(core_hints);
    }
    let result = answer.inspect(|&list| {
        // SAFETY: a list the core just returned, ours; hints NULL or valid.
        unsafe { finish(list, core, own, app_hints) };
        let asked = app_hints.and_then(|h| unsafe { h.domain_attr.as_ref() });
        if emulated_auto {
            // SAFETY: as above; the caller's hints asked for it.
            unsafe { say_auto(list, asked) };
        } else if asked_auto {
            // The core's own automatic progress, with the threading asked: rscntr opens the
            // core domain thread safe for it (rxm's own thread needs it), whatever the
            // application promised of its own calls.
            // SAFETY: as above.
            unsafe { keep_threading(list, asked) };
        } else if progress::data_progress(core_dom) == ofi::fi_progress_FI_PROGRESS_UNSPEC {
            // SAFETY: as above.
            unsafe {
                say_manual_where_core_does_not_move(list, core);
                append_auto(list);
            }
        }
    });
    // SAFETY: allocated by to_core.
    unsafe { versions::freeinfo(core_hints) };
    match result {
        Ok(list) => {
            fi_info!(Core, "serving over core {core}");
            Ok(list)
        }
        Err(ret) => {
            fi_dbg!(Core, "core {core} has nothing for these hints ({ret})");
            Err(ret)
        }
    }
}

/// fi_getinfo over one core with hints in the core's name: its infos (and only its own), or
/// the error (-FI_ENODATA for none).
///
/// # Safety
/// As fi_getinfo: node/service NULL or C strings, `hints` valid, naming `core`.
pub unsafe fn core_getinfo(
    core: &str,
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *mut ofi::fi_info,
) -> Result<*mut ofi::fi_info, c_int> {
    let mut list: *mut ofi::fi_info = std::ptr::null_mut();
    // SAFETY: caller's contract; the out pointer lives across the call.
    let ret = unsafe {
        versions::getinfo(
            version,
            node,
            service,
            flags | OFI_GETINFO_HIDDEN,
            hints,
            &mut list,
        )
    };
    if ret != 0 {
        return Err(ret);
    }
    // SAFETY: the list fi_getinfo returned; the caller's valid hints.
    let list = unsafe { keep_only(list, core, &*hints) };
    if list.is_null() {
        Err(err::ENODATA)
    } else {
        Ok(list)
    }
}

/// Whether libfabric has a provider named `core` with any info at all here (hints naming it and
/// nothing else): what tells a misspelt or unloaded FI_RSCNTR_CORE from a core that only lacks
/// what the application asked.
///
/// # Safety
/// Calls fi_getinfo; nothing of the caller's is touched.
pub unsafe fn core_known(core: &str, version: u32) -> bool {
    let Ok(core_c) = CString::new(core) else {
        return false;
    };
    // SAFETY: NULL hints give a fresh info in the core's name.
    let Some(hints) = (unsafe { to_core(std::ptr::null(), &core_c) }) else {
        return false;
    };
    let null = std::ptr::null();
    // SAFETY: hints we own, naming the core.
    let found = unsafe { core_getinfo(core, version, null, null, 0, hints) };
    // SAFETY: allocated by to_core; the list, when there is one, by fi_getinfo.
    unsafe {
        versions::freeinfo(hints);
        if let Ok(list) = found {
            versions::freeinfo(list);
        }
    }
    found.is_ok()
}

/// Makes a core's list rscntr's.
///
/// # Safety
/// `list` is a list the core returned; `hints` NULL or valid.
unsafe fn finish(list: *mut ofi::fi_info, core: &str, own: u64, hints: Option<&ofi::fi_info>) {
    // SAFETY: caller's contract.
    unsafe { mirror(list, core, own) };
    if rma_event::emulated(core) {
        // SAFETY: as above.
        unsafe { rma_events(list, hints) };
    }
}

/// Infos of a core without automatic progress, for hints that asked for it: rscntr provides
/// it (`progress.rs`), so the infos say AUTO where the hints did.
///
/// # Safety
/// `list` is a list rscntr mirrored.
unsafe fn say_auto(mut cur: *mut ofi::fi_info, asked: Option<&ofi::fi_domain_attr>) {
    let Some(asked) = asked else { return };
    // SAFETY: walking a valid list; all attr pointers are set.
    while let Some(i) = unsafe { cur.as_mut() } {
        // SAFETY: as above.
        let dom = unsafe { &mut *i.domain_attr };
        if progress::data_progress(asked) == AUTO {
            progress::set_data_progress(dom, AUTO);
        }
        if asked.control_progress == AUTO {
            dom.control_progress = AUTO;
        }
        cur = i.next;
    }
}

const AUTO: ofi::fi_progress = ofi::fi_progress_FI_PROGRESS_AUTO;

/// Infos of a core's own automatic progress say the threading the hints asked for (rxm says
/// FI_THREAD_SAFE whatever was asked: its progress thread needs the core domain thread safe,
/// which rscntr opens it as; the application's promise about its own calls stands).
///
/// # Safety
/// `list` is a list rscntr mirrored.
unsafe fn keep_threading(mut cur: *mut ofi::fi_info, asked: Option<&ofi::fi_domain_attr>) {
    let Some(threading) = asked
        .map(|d| d.threading)
        .filter(|&t| t != ofi::fi_threading_FI_THREAD_UNSPEC)
    else {
        return;
    };
    // SAFETY: walking a valid list; all attr pointers are set.
    while let Some(i) = unsafe { cur.as_mut() } {
        // SAFETY: as above.
        unsafe { (*i.domain_attr).threading = threading };
        cur = i.next;
    }
}

/// For hints that leave the data progress open: the infos of a core that says AUTO without
/// moving data by itself (tcp, `progress::core_moves_data`) say MANUAL, what the application
/// gets from rscntr when it takes them, unasked, with no progress thread: automatic progress,
/// and rscntr's thread with it, is for those that ask (the AUTO copies [`append_auto`] adds,
/// or hints with AUTO). A program that takes the first info over tcp (fabtests) pays nothing.
///
/// # Safety
/// `list` is a list rscntr mirrored.
unsafe fn say_manual_where_core_does_not_move(mut cur: *mut ofi::fi_info, core: &str) {
    // SAFETY: walking a valid list; all attr pointers are set.
    while let Some(i) = unsafe { cur.as_mut() } {
        // SAFETY: as above.
        let dom = unsafe { &mut *i.domain_attr };
        if progress::rscntr_provides_auto(dom, core, i.caps) {
            progress::set_data_progress(dom, ofi::fi_progress_FI_PROGRESS_MANUAL);
        }
        cur = i.next;
    }
}

/// For hints that leave the data progress open: after the infos with manual data progress,
/// the same with automatic progress (rscntr's where the core does not move data by itself,
/// `progress.rs`). Applications taking the first info get what the core gives them; those that
/// choose among infos (MPICH scores them) may take automatic progress, which the core's own list
/// does not offer them unasked (rxm answers AUTO only when asked).
///
/// # Safety
/// `list` is a list rscntr mirrored.
unsafe fn append_auto(list: *mut ofi::fi_info) {
    let mut tail = list;
    // SAFETY: walking a valid list.
    unsafe {
        while !(*tail).next.is_null() {
            tail = (*tail).next;
        }
        (*tail).next = auto_copies(list, ofi::fi_progress_FI_PROGRESS_MANUAL);
    }
}

/// Copies of the infos of `list` with `manual` data progress, saying AUTO (rscntr's).
///
/// # Safety
/// `list` is a valid list.
unsafe fn auto_copies(mut cur: *mut ofi::fi_info, manual: ofi::fi_progress) -> *mut ofi::fi_info {
    let mut head: *mut ofi::fi_info = std::ptr::null_mut();
    let mut tail: *mut ofi::fi_info = std::ptr::null_mut();
    // SAFETY: walking a valid list; fi_dupinfo copies one info (without its next).
    unsafe {
        while let Some(i) = cur.as_ref() {
            if progress::data_progress(&*i.domain_attr) == manual {
                let copy = versions::dupinfo(i);
                if !copy.is_null() {
                    progress::set_data_progress(&mut *(*copy).domain_attr, AUTO);
                    (*copy).next = std::ptr::null_mut();
                    if tail.is_null() {
                        head = copy
                    } else {
                        (*tail).next = copy
                    }
                    tail = copy;
                }
            }
            cur = i.next;
        }
    }
    head
}

/// The core's fabric attr for an rscntr fabric attr: the same fabric, re-derived from the core.
///
/// # Safety
/// `attr` is a valid fabric attr.
pub unsafe fn core_fabric_info(
    attr: &ofi::fi_fabric_attr,
    core: &str,
) -> Result<*mut ofi::fi_info, c_int> {
    // SAFETY: fi_dupinfo(NULL) gives a fresh info with all attrs.
    let hints = unsafe { versions::dupinfo(std::ptr::null()) };
    if hints.is_null() {
        return Err(err::ENOMEM);
    }
    let version = if attr.api_version != 0 {
        attr.api_version
    } else {
        provider::runtime_version()
    };
    let core_c = CString::new(core).map_err(|_| err::EINVAL)?;
    let mut list: *mut ofi::fi_info = std::ptr::null_mut();
    // SAFETY: hints is ours; attr.name is a C string (checked by the caller).
    let ret = unsafe {
        let fab = &mut *(*hints).fabric_attr;
        set_str(&mut fab.prov_name, Some(&core_c));
        set_str(&mut fab.name, Some(CStr::from_ptr(attr.name)));
        (*hints).mode = !0;
        (*(*hints).domain_attr).mode = !0;
        (*(*hints).domain_attr).mr_mode = !3; // everything but the deprecated basic/scalable
        let ret = versions::getinfo(
            version,
            std::ptr::null(),
            std::ptr::null(),
            OFI_GETINFO_HIDDEN,
            hints,
            &mut list,
        );
        if ret == 0 {
            list = keep_only(list, core, &*hints)
        }
        versions::freeinfo(hints);
        ret
    };
    if ret != 0 || list.is_null() {
        fi_warn!(
            Fabric,
            "core {core} does not offer fabric {:?} any more ({ret})",
            // SAFETY: checked non-NULL by the caller.
            unsafe { CStr::from_ptr(attr.name) }
        );
        return Err(if ret != 0 { ret } else { err::ENODATA });
    }
    Ok(list)
}

/// For a domain about to open from `core_info` (the application's info, in the core's name):
/// true when it asks for automatic data progress that the core does not deliver itself, which
/// rscntr then provides; `core_info` is then changed to ask the core for manual data progress
/// (and for its own control progress, where it refuses the AUTO asked).
///
/// # Safety
/// `core_info` is a valid info with its attrs.
pub unsafe fn needs_emulation(core_info: *mut ofi::fi_info, core: &str, version: u32) -> bool {
    // SAFETY: caller's contract.
    let (caps, dom) = unsafe { ((*core_info).caps, (*core_info).domain_attr.as_mut()) };
    let Some(dom) = dom else { return false };
    if !progress::rscntr_provides_auto(dom, core, caps) {
        return false;
    }
    progress::set_data_progress(dom, ofi::fi_progress_FI_PROGRESS_MANUAL);
    // SAFETY: the core's getinfo with the info as hints (the core's name keeps it from
    // recursing into rscntr).
    if dom.control_progress == AUTO && !unsafe { core_answers(core, core_info, version) } {
        // SAFETY: as above.
        let dom = unsafe { &mut *(*core_info).domain_attr };
        dom.control_progress = ofi::fi_progress_FI_PROGRESS_UNSPEC;
    }
    fi_info!(
        Domain,
        "{core} does not move data by itself: rscntr's progress thread drives this domain \
        (FI_PROGRESS_AUTO)"
    );
    true
}

/// # Safety
/// `hints` is a valid info naming `core`.
unsafe fn core_answers(core: &str, hints: *mut ofi::fi_info, version: u32) -> bool {
    let null = std::ptr::null();
    // SAFETY: caller's contract.
    match unsafe { core_getinfo(core, version, null, null, 0, hints) } {
        Ok(list) => {
            // SAFETY: the list the core returned.
            unsafe { versions::freeinfo(list) };
            true
        }
        Err(_) => false,
    }
}
