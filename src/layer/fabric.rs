//! The core's fabric, handed to the application with rscntr's ops for opening domains and
//! passive endpoints (which need the core's name in their info) and for fi_trywait (which must
//! tell rscntr counters from core fids).

use super::cq;
use super::domain::{self, FabricShare};
use super::getinfo::{self, core_fabric_info, core_of_fabric};
use super::interpose::{CoreInfo, close_through_core, open_through_core};
use super::progress;
use super::wait::CoreFabric;
use crate::boundary::ffi::{self, Children, err};
use crate::boundary::params;
use crate::boundary::testhook::{self, Op};
use crate::boundary::versions::Api;
use crate::{cntr, fi_warn, ofi};
use std::ffi::{CStr, CString, c_int, c_void};

/// Per core fabric: rscntr's copies of its ops tables (the fid points at them) and the
/// originals they forward to.
#[repr(C)]
pub struct LayeredFabric {
    fi_ops: ofi::fi_ops,
    /// The core fabric itself (its fid now leads to the tables here).
    pub fid: *mut ofi::fid_fabric,
    ops: ofi::fi_ops_fabric,
    orig_fi_ops: *const ofi::fi_ops,
    orig_ops: *const ofi::fi_ops_fabric,
    /// What its domains use. `share.domains` is checked before the core's close runs: some
    /// cores (rxm) free state before they notice a fabric is still in use.
    share: FabricShare,
    /// The core's info list whose fabric attr the core fabric was opened with, freed once the
    /// core has closed it (`interpose.rs`: a core may keep pointers into what it was given).
    _core_info: CoreInfo,
}

impl LayeredFabric {
    /// # Safety
    /// `fabric` is a core fabric patched by [`fabric_open`].
    unsafe fn of<'a>(fabric: *mut ofi::fid_fabric) -> &'a LayeredFabric {
        // SAFETY: its ops point at our `ops` field (caller's contract).
        unsafe {
            &*((*fabric).ops as *const u8)
                .sub(std::mem::offset_of!(LayeredFabric, ops))
                .cast::<LayeredFabric>()
        }
    }

    fn orig(&self) -> &ofi::fi_ops_fabric {
        // SAFETY: the core's static ops table.
        unsafe { &*self.orig_ops }
    }
}

/// `fi_fabric` for a mirrored core fabric attr.
///
/// # Safety
/// `attr` valid with a non-NULL name; `fabric` an out pointer.
pub unsafe fn fabric_open(
    attr: &ofi::fi_fabric_attr,
    fabric: *mut *mut ofi::fid_fabric,
    context: *mut c_void,
) -> c_int {
    // Checked before anything is opened: a core fabric opened for a NULL out pointer could
    // never be closed.
    if fabric.is_null() {
        fi_warn!(Fabric, "NULL fabric out pointer");
        return err::EINVAL;
    }
    // SAFETY: caller's contract.
    let name = unsafe { CStr::from_ptr(attr.name) }
        .to_string_lossy()
        .into_owned();
    let core = match core_of_fabric(&name).or_else(|| match params::core() {
        Some(c) if !c.eq_ignore_ascii_case("auto") && !c.eq_ignore_ascii_case("none") => Some(c),
        _ => None,
    }) {
        Some(core) => core,
        None => {
            fi_warn!(
                Fabric,
                "fabric {name:?} came from no core rscntr knows (call fi_getinfo first)"
            );
            return err::ENODATA;
        }
    };
    // SAFETY: attr valid (caller's contract).
    let info = match unsafe { core_fabric_info(attr, &core) } {
        Ok(i) => i,
        Err(e) => return e,
    };
    // Kept with the fabric, freed when it closes (or now, if the core does not open it).
    let info = CoreInfo::own(info);
    let mut core_fabric: *mut ofi::fid_fabric = std::ptr::null_mut();
    // SAFETY: the first info of a fresh fi_getinfo list, which lives as long as the fabric.
    let ret = testhook::fail(Op::Fabric).unwrap_or_else(|| unsafe {
        ofi::fi_fabric((*info.as_ptr()).fabric_attr, &mut core_fabric, context)
    });
    if ret != 0 {
        fi_warn!(Fabric, "core {core} failed to open fabric {name:?}: {ret}");
        return ret;
    }
    // SAFETY: an open core fabric with valid ops tables.
    let layered = unsafe {
        let fab = &mut *core_fabric;
        let mut l = Box::new(LayeredFabric {
            fi_ops: *fab.fid.ops,
            fid: core_fabric,
            ops: *fab.ops,
            orig_fi_ops: fab.fid.ops,
            orig_ops: fab.ops,
            share: FabricShare {
                core: CString::new(core.clone()).unwrap_or_default(),
                // The core fabric's own ops for wait sets, for waits on its counters.
                ops: CoreFabric {
                    fabric: core_fabric,
                    wait_open: (*fab.ops).wait_open,
                    trywait: (*fab.ops).trywait,
                },
                domains: Children::default(),
                api: Api((*core_fabric).api_version),
            },
            _core_info: info,
        });
        l.fi_ops.close = Some(fabric_close);
        l.ops.size = l.ops.size.min(std::mem::size_of::<ofi::fi_ops_fabric>());
        l.ops.domain = Some(domain_open);
        l.ops.domain2 = Some(domain_open2);
        l.ops.passive_ep = Some(passive_ep);
        l.ops.trywait = Some(trywait);
        Box::into_raw(l)
    };
    // SAFETY: the Box lives until fabric_close; fi_ops is its first field.
    unsafe {
        (*core_fabric).fid.ops = &mut (*layered).fi_ops;
        (*core_fabric).ops = &mut (*layered).ops;
    }
    crate::fi_info!(Fabric, "opened fabric {name:?} over core {core}");
    // SAFETY: caller's contract.
    ffi::status(unsafe { ffi::write_out(fabric, core_fabric, "fabric") })
}

unsafe extern "C" fn fabric_close(fid: *mut ofi::fid) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched core fabrics reach this op; fi_ops is LayeredFabric's first field.
        let layered = unsafe { (*fid).ops as *mut LayeredFabric };
        // SAFETY: live until freed below.
        let open = unsafe { (*layered).share.domains.count() };
        if open != 0 {
            fi_warn!(Fabric, "fabric still has {open} open domain(s)");
            return err::EBUSY;
        }
        // SAFETY: the record of this fabric; nothing refers to its tables once it is gone.
        match unsafe { close_through_core(fid, layered, (*layered).orig_fi_ops) } {
            Ok(_) => 0,
            Err(e) => e,
        }
    }
}

unsafe extern "C" fn domain_open(
    fabric: *mut ofi::fid_fabric,
    info: *mut ofi::fi_info,
    dom: *mut *mut ofi::fid_domain,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { domain_open2(fabric, info, dom, 0, context) }
}

unsafe extern "C" fn domain_open2(
    fabric: *mut ofi::fid_fabric,
    info: *mut ofi::fi_info,
    dom: *mut *mut ofi::fid_domain,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched core fabrics reach this op.
        let layered = unsafe { LayeredFabric::of(fabric) };
        let thread_safe = std::cell::Cell::new(false);
        let rma_events = std::cell::Cell::new(false);
        let auto_progress = std::cell::Cell::new(false);
        let open = |core_info: *mut ofi::fi_info, out| {
            // After rscntr's pointer checks, as ever; unwinding frees the core's info.
            testhook::panic(Op::Domain);
            // The core keeps the application's threading model when rscntr adds no concurrency
            // of its own: FI_THREAD_DOMAIN serializes every call on the domain, including the
            // fi_cntr_read/wait that drive the core's progress. Under FI_THREAD_COMPLETION and
            // FI_THREAD_ENDPOINT the application may read a CQ in one thread while a counter
            // read drives the same domain's progress in another, which cores such as tcp only
            // survive when thread safe, so those become FI_THREAD_SAFE (fabtests' multi_ep
            // --threading completion fails otherwise). Forcing FI_THREAD_SAFE everywhere would
            // cost the data path the core's locks (2x on tcp's small messages, measured). The
            // watcher drives a core only when the domain is FI_THREAD_SAFE (see
            // CoreHome::watcher_may_progress).
            // Automatic progress the core lacks (`progress.rs`): rscntr's thread drives the
            // core beside the application.
            // SAFETY: the core's copy of the info, a fresh dup; the fabric is open.
            // SAFETY: as above.
            let asks_auto = unsafe { progress::data_progress(&*(*core_info).domain_attr) }
                == ofi::fi_progress_FI_PROGRESS_AUTO;
            // SAFETY: as above.
            let auto = unsafe {
                getinfo::needs_emulation(core_info, &layered.share.core.to_string_lossy(), (*fabric).api_version)
            };
            auto_progress.set(auto);
            // SAFETY: a fresh dup with a domain attr.
            let threading = unsafe { &mut (*(*core_info).domain_attr).threading };
            // A domain for triggered operations: rscntr's trigger thread posts to the core
            // beside the application (to_core has taken FI_TRIGGER out of the caps: the info
            // the application passed says whether it asked).
            // SAFETY: NULL or the application's valid info.
            let trigger = unsafe { info.as_ref() }.is_some_and(|i| i.caps & ofi::FI_TRIGGER as u64 != 0);
            // Remote-access counters rscntr provides (`rma_event.rs`): rscntr's threads post
            // notifications and read CQs for waiters beside the application.
            // SAFETY: as above.
            let rma = unsafe { info.as_ref() }.is_some_and(|i| i.caps & ofi::FI_RMA_EVENT != 0)
                && super::rma_event::emulated(&layered.share.core.to_string_lossy());
            rma_events.set(rma);
            // A core's own automatic progress runs a thread of its own (rxm's asserts it).
            if trigger
                || rma
                || asks_auto
                || *threading == ofi::fi_threading_FI_THREAD_COMPLETION
                || *threading == ofi::fi_threading_FI_THREAD_ENDPOINT
            {
                *threading = ofi::fi_threading_FI_THREAD_SAFE;
            }
            thread_safe.set(*threading == ofi::fi_threading_FI_THREAD_SAFE);
            // SAFETY: the core's own ops on its own fabric, with an info it accepts.
            let ret = testhook::fail(Op::Domain).unwrap_or_else(|| unsafe {
                match (flags, layered.orig().domain2) {
                    (0, _) | (_, None) => layered.orig().domain.unwrap()(fabric, core_info, out, context),
                    (f, Some(d2)) => d2(fabric, core_info, out, f, context),
                }
            });
            if ret != 0 {
                fi_warn!(Domain, "core {:?} failed to open a domain: {ret}", layered.share.core);
            }
            ret
        };
        // SAFETY: a just-opened core domain; the core's info describes it, and is kept with it.
        let patch = |out, core_info| unsafe {
            domain::patch(out, &layered.share, thread_safe.get(), rma_events.get(), auto_progress.get(), core_info)
        };
        // A domain opened for a NULL out pointer could never be closed (its fabric neither).
        let refuse = || fi_warn!(Domain, "NULL info or domain out pointer");
        // SAFETY: `info` NULL or valid, `dom` NULL or an out pointer (the caller's contract).
        unsafe { open_through_core(dom, Some((info, &layered.share.core)), refuse, open, patch) }
    }
}

/// Per core passive endpoint: rscntr's copy of its `fi_ops`, for a close that frees the info
/// the core opened it with once the core has closed it. sockets copies that `fi_info` struct
/// into its passive endpoint (`sock_msg_passive_ep`) and duplicates the attrs it points to
/// for every connection request (`sock_ep_msg_get_info`, in its connection-management
/// thread): freed at once, the first request read freed memory and crashed the listener.
#[repr(C)]
struct LayeredPep {
    fi_ops: ofi::fi_ops,
    orig_fi_ops: *const ofi::fi_ops,
    _core_info: CoreInfo,
}

unsafe extern "C" fn passive_ep(
    fabric: *mut ofi::fid_fabric,
    info: *mut ofi::fi_info,
    pep: *mut *mut ofi::fid_pep,
    context: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched core fabrics reach this op.
        let layered = unsafe { LayeredFabric::of(fabric) };
        let open = |core_info, out| {
            // SAFETY: the core's own op.
            testhook::fail(Op::Pep).unwrap_or_else(|| unsafe {
                layered.orig().passive_ep.unwrap()(fabric, core_info, out, context)
            })
        };
        let patch = |out: *mut ofi::fid_pep, core_info| {
            // SAFETY: a just-opened core passive endpoint with a valid ops table.
            unsafe {
                let fid = &mut (*out).fid;
                let mut l = Box::new(LayeredPep { fi_ops: *fid.ops, orig_fi_ops: fid.ops, _core_info: core_info });
                l.fi_ops.close = Some(pep_close);
                // The Box lives until pep_close; fi_ops is its first field.
                fid.ops = &mut Box::leak(l).fi_ops;
            }
        };
        let refuse = || fi_warn!(Fabric, "NULL info or passive endpoint out pointer");
        // SAFETY: `info` NULL or valid, `pep` NULL or an out pointer (the caller's contract).
        unsafe { open_through_core(pep, Some((info, &layered.share.core)), refuse, open, patch) }
    }
}

unsafe extern "C" fn pep_close(fid: *mut ofi::fid) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched core passive endpoints reach this op; fi_ops is LayeredPep's
        // first field.
        let layered = unsafe { (*fid).ops as *mut LayeredPep };
        // SAFETY: the record of this passive endpoint; its info is freed with it, once the core
        // has closed the endpoint.
        match unsafe { close_through_core(fid, layered, (*layered).orig_fi_ops) } {
            Ok(_) => 0,
            Err(e) => e,
        }
    }
}

/// rscntr counters are armed by rscntr, everything else by the core.
unsafe extern "C" fn trywait(
    fabric: *mut ofi::fid_fabric,
    fids: *mut *mut ofi::fid,
    count: c_int,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched core fabrics reach this op.
        let layered = unsafe { LayeredFabric::of(fabric) };
        // SAFETY: the caller passes `count` fid pointers.
        let fids = match unsafe { ffi::fid_array(fids, count) } {
            Ok(f) => f,
            Err(e) => return e,
        };
        let mut core_fids = Vec::new();
        for &fid in fids {
            // SAFETY: a readable fid (fid_array rejects NULL entries).
            if unsafe { cntr::as_cntr(fid) }.is_some() {
                // SAFETY: an rscntr counter.
                let ret = unsafe { cntr::trywait(fid) };
                if ret != 0 {
                    return ret;
                }
            } else if unsafe { cq::is_emulated(fid) } {
                // SAFETY: a CQ whose wait object rscntr emulates.
                let ret = unsafe { cq::trywait(fid) };
                if ret != 0 {
                    return ret;
                }
            } else {
                core_fids.push(fid);
            }
        }
        if core_fids.is_empty() {
            return 0;
        }
        // SAFETY: the core's own op with core fids.
        unsafe { layered.orig().trywait.unwrap()(fabric, core_fids.as_mut_ptr(), core_fids.len() as c_int) }
    }
}
