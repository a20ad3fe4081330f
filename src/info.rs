//! `getinfo`: what rscntr offers, matched against the application's hints.
//!
//! rscntr serves counters; endpoints come with the data-path work. It answers RDM (or
//! unspecified) endpoint types with caps it can honour, and -FI_ENODATA to anything else, in
//! particular to the `rscntr;^ofi_rxm` (MSG) and `rscntr;^ofi_rxd` (DGRAM) probes that libfabric's
//! utility providers send, so that no utility provider layers over rscntr.

use crate::boundary::ffi::err;
use crate::boundary::provider::{self, is_our_name};
use crate::boundary::versions;
use crate::cntr::hw;
use crate::layer::{self, CoreSetting};
use crate::{fi_dbg, fi_warn, fi_warn_user, ofi};
use std::ffi::{CStr, c_char, c_int};

/// Capabilities rscntr can honour today: none beyond counters, which need no cap bit.
const PROV_CAPS: u64 = 0;

/// Why a request does not match what rscntr serves (logged at debug level, returned as ENODATA).
type Mismatch = &'static str;

pub unsafe extern "C" fn getinfo(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const ofi::fi_info,
    info: *mut *mut ofi::fi_info,
) -> c_int {
    crate::ffi_boundary! {
        if info.is_null() {
            fi_warn!(Core, "NULL info out pointer");
            return err::EINVAL;
        }
        // SAFETY: libfabric passes NULL or its own fully allocated hints.
        let hints_ref = unsafe { hints.as_ref() };
        // SAFETY: as above.
        if let Err(why) = unsafe { check_probe(flags, hints_ref) } {
            fi_dbg!(Core, "no match: {why}");
            return err::ENODATA;
        }
        let cores = match layer::core_setting() {
            CoreSetting::None => Vec::new(),
            CoreSetting::Named(core) => vec![core],
            CoreSetting::Auto => layer::candidates(),
        };
        let mut last = err::ENODATA;
        for core in &cores {
            // SAFETY: arguments as libfabric passed them.
            match unsafe { layer::getinfo_over(core, version, node, service, flags, hints) } {
                Ok(list) => {
                    // SAFETY: checked non-NULL above.
                    unsafe { *info = list };
                    return 0;
                }
                Err(e) => last = e,
            }
        }
        if matches!(layer::core_setting(), CoreSetting::Named(_)) {
            let core = &cores[0];
            // SAFETY: a fi_getinfo of our own, in the core's name.
            if unsafe { layer::core_known(core, version) } {
                fi_warn_user!(
                    Core,
                    "FI_RSCNTR_CORE={core:?} has nothing for what this application asks ({last}); \
                     unset FI_RSCNTR_CORE to let rscntr try each core in turn, or name another"
                );
            } else {
                fi_warn_user!(
                    Core,
                    "FI_RSCNTR_CORE={core:?} names no provider this libfabric has: `fi_info -l` \
                     lists those it has; a core built as a DSO (lib<name>-fi.so) loads from \
                     FI_PROVIDER_PATH, or, unset, from libfabric's provider directory (`fi_info -e` \
                     shows FI_PROVIDER_PATH's default)"
                );
            }
            return last;
        }
        // No core: counters only.
        let hints = hints_ref;
        // SAFETY: as above; every attr pointer in hints is NULL or valid.
        if let Err(why) = unsafe { check_request(node, service, hints) } {
            fi_dbg!(Core, "no match (version {:#x}, flags {flags:#x}): {why}", version);
            return err::ENODATA;
        }
        // SAFETY: `info` is non-NULL and points to the caller's out pointer.
        match unsafe { new_info(hints) } {
            Some(new) => {
                // SAFETY: checked non-NULL above.
                unsafe { *info = new };
                0
            }
            None => {
                fi_warn!(Core, "out of memory allocating fi_info");
                err::ENOMEM
            }
        }
    }
}

/// Utility providers probe every core for MSG/DGRAM endpoints to layer over
/// (`rscntr;^ofi_rxm` with OFI_CORE_PROV_ONLY); rscntr answers none of them, so no utility
/// provider layers over it (its own core may already be layered).
///
/// # Safety
/// hints' attr pointers NULL or valid.
unsafe fn check_probe(flags: u64, hints: Option<&ofi::fi_info>) -> Result<(), Mismatch> {
    if flags & layer::OFI_CORE_PROV_ONLY != 0 {
        return Err("a utility provider's probe for a core");
    }
    // SAFETY: caller's contract.
    if let Some(fab) = hints.and_then(|h| unsafe { h.fabric_attr.as_ref() }) {
        // SAFETY: prov_name NULL or a C string.
        unsafe { check_prov_name(fab.prov_name) }?;
    }
    Ok(())
}

/// # Safety
/// `node`/`service` NULL or C strings; hints' attr pointers NULL or valid.
unsafe fn check_request(
    node: *const c_char,
    service: *const c_char,
    hints: Option<&ofi::fi_info>,
) -> Result<(), Mismatch> {
    if !node.is_null() || !service.is_null() {
        return Err("rscntr has no endpoints yet, so it resolves no node or service");
    }
    let Some(h) = hints else { return Ok(()) };
    if h.caps & !PROV_CAPS != 0 {
        return Err("hints ask for capabilities rscntr does not offer");
    }
    if h.addr_format != ofi::FI_FORMAT_UNSPEC {
        return Err("hints ask for an address format; rscntr has no addresses yet");
    }
    // SAFETY: each attr pointer is NULL or valid (caller's contract).
    unsafe {
        if let Some(ep) = h.ep_attr.as_ref()
            && ep.type_ != ofi::fi_ep_type_FI_EP_UNSPEC
            && ep.type_ != ofi::fi_ep_type_FI_EP_RDM
        {
            return Err("rscntr serves only FI_EP_RDM");
        }
        for caps in [
            h.tx_attr.as_ref().map(|a| a.caps),
            h.rx_attr.as_ref().map(|a| a.caps),
        ] {
            if caps.unwrap_or(0) & !PROV_CAPS != 0 {
                return Err("tx/rx hints ask for capabilities rscntr does not offer");
            }
        }
        if let Some(fab) = h.fabric_attr.as_ref() {
            check_prov_name(fab.prov_name)?;
            if !is_our_name(fab.name) {
                return Err("hints name another fabric");
            }
        }
        if let Some(dom) = h.domain_attr.as_ref() {
            if !is_our_name(dom.name) {
                return Err("hints name another domain");
            }
            if dom.cntr_cnt > hw::advertised_limits().0 {
                return Err("hints ask for more counters than a domain offers");
            }
        }
    }
    Ok(())
}

/// Accepts `rscntr`, and layered forms where `rscntr` is the only positive name; rejects any
/// request that excludes rscntr (`^rscntr`) or names another provider.
///
/// # Safety
/// `prov_name` is NULL or a C string.
unsafe fn check_prov_name(prov_name: *const c_char) -> Result<(), Mismatch> {
    if prov_name.is_null() {
        return Ok(());
    }
    // SAFETY: caller's contract.
    let text = unsafe { CStr::from_ptr(prov_name) }.to_string_lossy();
    let mut named_us = false;
    for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        match part.strip_prefix('^') {
            Some(excluded) if excluded.eq_ignore_ascii_case(provider::NAME) => {
                return Err("hints exclude rscntr");
            }
            Some(_) => return Err("a utility provider's probe (it excludes itself)"),
            None if part.eq_ignore_ascii_case(provider::NAME) => named_us = true,
            None => return Err("hints name another provider"),
        }
    }
    if named_us
        || text
            .split(';')
            .all(|p| p.trim().is_empty() || p.trim().starts_with('^'))
    {
        Ok(())
    } else {
        Err("hints name another provider")
    }
}

/// A complete info, allocated by the running libfabric (so its struct sizes are the library's
/// and `fi_freeinfo` can free it). Returns None when allocation fails.
///
/// # Safety
/// hints' attr pointers NULL or valid.
unsafe fn new_info(hints: Option<&ofi::fi_info>) -> Option<*mut ofi::fi_info> {
    // SAFETY: fi_dupinfo(NULL) allocates a zeroed info with all attr structs.
    let info = unsafe { versions::dupinfo(std::ptr::null()) };
    // SAFETY: fi_dupinfo returns NULL or a valid info whose attr pointers are all set.
    let i = unsafe { info.as_mut()? };
    let dom_hint = hints.and_then(|h| unsafe { h.domain_attr.as_ref() });
    // SAFETY: the attr pointers of a fresh info are valid and distinct.
    let (tx, rx, ep, dom, fab) = unsafe {
        (
            &mut *i.tx_attr,
            &mut *i.rx_attr,
            &mut *i.ep_attr,
            &mut *i.domain_attr,
            &mut *i.fabric_attr,
        )
    };
    i.caps = PROV_CAPS;
    i.mode = 0;
    i.addr_format = ofi::FI_FORMAT_UNSPEC;
    tx.caps = PROV_CAPS;
    tx.size = 1024;
    tx.iov_limit = 1;
    tx.rma_iov_limit = 1;
    rx.caps = PROV_CAPS;
    rx.size = 1024;
    rx.iov_limit = 1;
    ep.type_ = ofi::fi_ep_type_FI_EP_RDM;
    ep.protocol = ofi::FI_PROTO_UNSPEC;
    ep.protocol_version = 1;
    ep.tx_ctx_cnt = 1;
    ep.rx_ctx_cnt = 1;

    // Counters are thread safe and progress on their own: echo whatever the application asked.
    let echo = |asked: u32, default: u32| if asked != 0 { asked } else { default };
    dom.threading = echo(
        dom_hint.map_or(0, |d| d.threading),
        ofi::fi_threading_FI_THREAD_SAFE,
    );
    dom.control_progress = echo(
        dom_hint.map_or(0, |d| d.control_progress),
        ofi::fi_progress_FI_PROGRESS_AUTO,
    );
    // SAFETY: `data_progress` and `progress` are one enum under two names (a C union).
    dom.__bindgen_anon_1.data_progress = echo(
        dom_hint.map_or(0, |d| unsafe { d.__bindgen_anon_1.data_progress }),
        ofi::fi_progress_FI_PROGRESS_AUTO,
    );
    dom.resource_mgmt = echo(
        dom_hint.map_or(0, |d| d.resource_mgmt),
        ofi::fi_resource_mgmt_FI_RM_ENABLED,
    );
    dom.av_type = ofi::fi_av_type_FI_AV_UNSPEC;
    dom.mr_mode = 0;
    let (cntr_cnt, max_cntr_value) = hw::advertised_limits();
    dom.cntr_cnt = cntr_cnt;
    dom.mr_iov_limit = 1;
    dom.tclass = ofi::FI_TC_UNSPEC;
    // SAFETY: the running library allocated this attr (versions::dupinfo).
    unsafe { versions::set_max_cntr_values(dom, max_cntr_value) };
    fab.prov_name = std::ptr::null_mut(); // libfabric fills in "rscntr"
    fab.prov_version = provider::PROVIDER_VERSION;
    fab.api_version = provider::runtime_version();
    // SAFETY: strdup of static C strings; libfabric frees them with free().
    unsafe {
        dom.name = libc::strdup(provider::NAME_C.as_ptr());
        fab.name = libc::strdup(provider::NAME_C.as_ptr());
    }
    if dom.name.is_null() || fab.name.is_null() {
        // SAFETY: `info` came from fi_dupinfo; fi_freeinfo frees whatever was set.
        unsafe { versions::freeinfo(info) };
        return None;
    }
    Some(info)
}
