//! The core's domain, with rscntr's counters: `fi_cntr_open` opens an rscntr counter, and
//! endpoints and MRs opened here get rscntr's bind so rscntr counters can be bound to them.

use super::bind;
use super::home::CoreHome;
use super::interpose::{CoreInfo, close_through_core, open_through_core};
use super::progress;
use super::rma_event::RmaEvents;
use super::trigger::Notifications;
use super::trigger::work::{self, WorkQueue};
use super::wait::{self, CoreFabric};
use crate::boundary::ffi::{self, Children, err};
use crate::boundary::provider;
use crate::boundary::testhook::{self, Op};
use crate::boundary::versions::Api;
use crate::cntr::{self, Slots};
use crate::{fi_warn, ofi};
use std::ffi::{CStr, CString, c_int, c_void};

/// The part of a layered fabric its domains use: which core it is, the core fabric's own ops
/// for wait sets, and the domains open on it. It outlives them: rscntr refuses to close a
/// fabric with domains open.
pub struct FabricShare {
    pub core: CString,
    pub ops: CoreFabric,
    pub domains: Children,
    /// The API version the application opened the fabric with (what its structs hold).
    pub api: Api,
}

/// The domain ops in the newest layout (2.7 appends `xpu_ctx`, called without FI_CHECK_OP).
#[repr(C)]
struct DomainOps {
    base: ofi::fi_ops_domain,
    xpu_ctx: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, *mut c_void) -> c_int,
}

#[repr(C)]
pub struct LayeredDomain {
    fi_ops: ofi::fi_ops,
    ops: DomainOps,
    mr: ofi::fi_ops_mr,
    orig_fi_ops: *const ofi::fi_ops,
    orig_ops: *const ofi::fi_ops_domain,
    orig_mr: *const ofi::fi_ops_mr,
    fabric: *const FabricShare,
    pub home: CoreHome,
    /// Deferred work queued on the domain (`work.rs`).
    work: WorkQueue,
    /// The info the core opened the domain with, freed once the core has closed it: sockets
    /// keeps a copy of the `fi_info` struct, attr pointers and all (`sock_domain`).
    _core_info: CoreInfo,
}

impl LayeredDomain {
    /// # Safety
    /// `domain` is a core domain patched by [`patch`].
    unsafe fn of<'a>(domain: *mut ofi::fid_domain) -> &'a LayeredDomain {
        // SAFETY: its ops point at our `ops` field (caller's contract).
        unsafe {
            &*((*domain).ops as *const u8)
                .sub(std::mem::offset_of!(LayeredDomain, ops))
                .cast::<LayeredDomain>()
        }
    }

    /// # Safety
    /// `fid` is the fid of a core domain patched by [`patch`] (MR ops get the domain's fid).
    unsafe fn of_fid<'a>(fid: *mut ofi::fid) -> &'a LayeredDomain {
        // SAFETY: fid_domain starts with its fid (caller's contract).
        unsafe { Self::of(fid.cast()) }
    }

    fn orig(&self) -> &ofi::fi_ops_domain {
        // SAFETY: the core's static table.
        unsafe { &*self.orig_ops }
    }

    fn orig_mr(&self) -> &ofi::fi_ops_mr {
        // SAFETY: the core's static table.
        unsafe { &*self.orig_mr }
    }

    /// The flags of an MR registration, for the core: where rscntr counts remote accesses
    /// itself (`rma_event.rs`), FI_RMA_EVENT is its business, and the core was asked for no
    /// such mode (under FI_MR_RMA_EVENT a core may hold the MR back until fi_mr_enable).
    fn core_mr_flags(&self, flags: u64) -> u64 {
        if self.home.rma.is_some() {
            flags & !ofi::FI_RMA_EVENT
        } else {
            flags
        }
    }

    fn core_name(&self) -> &CStr {
        // SAFETY: the fabric outlives its domains (rscntr refuses to close it before).
        unsafe { &(*self.fabric).core }
    }
}

/// Is `dom` a core domain rscntr patched?
///
/// # Safety
/// `dom` is a readable domain fid.
pub unsafe fn is_layered(dom: *mut ofi::fid_domain) -> bool {
    // SAFETY: a readable fid has a readable ops table.
    unsafe { (*(*dom).fid.ops).close.map(|f| f as *const ()) == Some(domain_close as *const ()) }
}

/// For a core without counters (udp, verbs): binding an rscntr counter then fails cleanly.
unsafe extern "C" fn no_core_cntr_open(
    _: *mut ofi::fid_domain,
    _: *mut ofi::fi_cntr_attr,
    _: *mut *mut ofi::fid_cntr,
    _: *mut c_void,
) -> c_int {
    err::ENOSYS
}

/// For a core without CQs: waits on its counters then yield.
unsafe extern "C" fn no_core_cq_open(
    _: *mut ofi::fid_domain,
    _: *mut ofi::fi_cq_attr,
    _: *mut *mut ofi::fid_cq,
    _: *mut c_void,
) -> c_int {
    err::ENOSYS
}

/// Points a freshly opened core domain at rscntr's tables; `core_info`, what the core opened
/// it with, is freed once the core has closed it.
///
/// # Safety
/// `dom` is an open core domain.
pub unsafe fn patch(
    dom: *mut ofi::fid_domain,
    fabric: &FabricShare,
    thread_safe: bool,
    rma: bool,
    auto_progress: bool,
    core_info: CoreInfo,
) {
    // Hardware detection runs once per process, at the first domain open, as for rscntr's own
    // domains.
    cntr::hw::state();
    let core = fabric.core.to_string_lossy();
    let peers = std::sync::Arc::new(super::doorbell::peers::DomainPeers::default());
    let answers = std::sync::Arc::new(super::doorbell::answers::DomainAnswers::new(peers.clone()));
    // SAFETY: the core's domain is valid.
    unsafe {
        let d = &mut *dom;
        let mut l = Box::new(LayeredDomain {
            fi_ops: *d.fid.ops,
            ops: DomainOps {
                base: *d.ops,
                xpu_ctx: ffi::no_xpu,
            },
            mr: *d.mr,
            orig_fi_ops: d.fid.ops,
            orig_ops: d.ops,
            orig_mr: d.mr,
            fabric,
            home: CoreHome {
                slots: Slots::default(),
                domain: dom,
                cntr_open: (*d.ops).cntr_open.unwrap_or(no_core_cntr_open),
                watcher_may_progress: thread_safe,
                fabric: fabric.ops,
                plan: wait::plan_for(&core),
                counting: wait::core_counting(&core),
                cq_open: (*d.ops).cq_open.unwrap_or(no_core_cq_open),
                progress: parking_lot::Mutex::new(None),
                bell: parking_lot::Mutex::new(None),
                peers,
                answers,
                // rscntr's progress thread waits on the domain's behalf.
                waits_seen: std::sync::atomic::AtomicBool::new(auto_progress),
                unbelled: std::sync::atomic::AtomicBool::new(false),
                fd_held_plainly: std::sync::atomic::AtomicBool::new(false),
                room: Default::default(),
                deferred: Default::default(),
                rma: rma.then(RmaEvents::default),
                auto_progress,
                closed_regions: Default::default(),
            },
            work: WorkQueue::default(),
            _core_info: core_info,
        });
        if crate::boundary::params::flat_waits() {
            l.home.room.flatten_wait_sets(Some(report_flat_waits));
        }
        if let Some(r) = &l.home.rma {
            // The record lives in the box as long as the domain.
            l.home
                .deferred
                .take_notifications(r as *const RmaEvents as *const dyn Notifications);
            crate::fi_info!(
                Domain,
                "remote-access counters over {core} are rscntr's (FI_RMA_EVENT)"
            );
        }
        l.fi_ops.close = Some(domain_close);
        l.fi_ops.ops_open = Some(domain_ops_open);
        l.fi_ops.control = Some(domain_control);
        l.ops.base.size = std::mem::size_of::<DomainOps>();
        l.ops.base.cntr_open = Some(cntr_open);
        l.ops.base.cq_open = Some(cq_open);
        l.ops.base.endpoint = Some(endpoint);
        l.ops.base.endpoint2 = Some(endpoint2);
        l.ops.base.scalable_ep = Some(scalable_ep);
        l.mr.size = l.mr.size.min(std::mem::size_of::<ofi::fi_ops_mr>());
        l.mr.reg = Some(mr_reg);
        l.mr.regv = Some(mr_regv);
        l.mr.regattr = Some(mr_regattr);
        fabric.domains.add();
        let l = Box::into_raw(l);
        d.fid.ops = &mut (*l).fi_ops;
        d.ops = &mut (*l).ops.base;
        d.mr = &mut (*l).mr;
        if auto_progress {
            // SAFETY: the domain's record, stopped in domain_close before it is freed. A
            // thread that cannot start is logged; the domain then progresses manually.
            let _ = progress::start(&(*l).home);
        }
    }
}

unsafe extern "C" fn domain_close(fid: *mut ofi::fid) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched core domains reach this op; fi_ops is the first field.
        let layered = unsafe { (*fid).ops as *mut LayeredDomain };
        // The arrivals counter (`rma_event.rs`) is rscntr's own child of the domain: it goes
        // first, unless endpoints are still bound to it.
        // SAFETY: live until we free it below.
        if let Some(r) = unsafe { &(*layered).home.rma } {
            let mut arrivals = r.arrivals.lock();
            if let Some(a) = *arrivals {
                // SAFETY: rscntr's own counter, closed only here.
                let ret = unsafe { ofi::fi_close(a.cast()) };
                if ret != 0 {
                    fi_warn!(Domain, "domain still has endpoints open");
                    return ret;
                }
                *arrivals = None;
            }
        }
        // SAFETY: live until we free it below.
        let open = unsafe { (*layered).home.slots.children.count() };
        if open != 0 {
            fi_warn!(Domain, "domain still has {open} open rscntr counter(s)");
            return err::EBUSY;
        }
        // SAFETY: as above.
        let (queued, outstanding) = unsafe { ((*layered).work.len(), (*layered).home.deferred.outstanding()) };
        if queued != 0 || outstanding != 0 {
            fi_warn!(Domain, "domain still has {queued} deferred work request(s) queued (FI_FLUSH_WORK first) \
                and {outstanding} deferred operation(s) in progress");
            return err::EBUSY;
        }
        // rscntr's progress thread lets go of the domain (and of its progress fd) before the
        // core closes it.
        // SAFETY: live until we free it below.
        let auto = unsafe { (*layered).home.auto_progress };
        if auto {
            // SAFETY: as above.
            progress::stop(unsafe { &(*layered).home });
        }
        // The CQ whose fd waits slept on goes next: the core refuses to close a domain
        // with CQs open.
        // SAFETY: live until we free it below.
        unsafe { (*layered).home.release_progress() };
        // The CQs are closed (the core refuses to close a domain with CQs open, and its
        // refusal comes after: the filters are freed only once the domain has closed).
        // SAFETY: the record of this domain; nothing refers to its tables once it is gone.
        match unsafe { close_through_core(fid, layered, (*layered).orig_fi_ops) } {
            Ok(l) => {
                l.home.deferred.release();
                // SAFETY: its fabric cannot have closed before it.
                unsafe { &*l.fabric }.domains.remove();
                0
            }
            Err(e) => {
                if auto {
                    // The domain stays open: its progress goes on.
                    // SAFETY: as above.
                    let _ = unsafe { progress::start(&(*layered).home) };
                }
                e
            }
        }
    }
}

/// The deferred work queue's commands are rscntr's (`work.rs`); the rest are the core's.
unsafe extern "C" fn domain_control(fid: *mut ofi::fid, command: c_int, arg: *mut c_void) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched core domains reach this op; fi_ops is the first field.
        let layered = unsafe { &*((*fid).ops as *const LayeredDomain) };
        // SAFETY: the application's argument for the command.
        if let Some(ret) = unsafe { work::control(&layered.work, &layered.home, command, arg) } {
            return ret;
        }
        // SAFETY: the core's own op.
        match unsafe { (*layered.orig_fi_ops).control } {
            Some(control) => unsafe { control(fid, command, arg) },
            None => err::ENOSYS,
        }
    }
}

/// rscntr's extension ops, else the core's.
unsafe extern "C" fn domain_ops_open(
    fid: *mut ofi::fid,
    name: *const std::ffi::c_char,
    flags: u64,
    ops: *mut *mut c_void,
    context: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        if name.is_null() {
            // As on rscntr's own domains; a core may strcmp it.
            fi_warn!(Domain, "NULL ops name");
            return err::EINVAL;
        }
        // SAFETY: a C string.
        let name_c = unsafe { CStr::from_ptr(name) };
        if let Some(ext) = provider::ext_ops().filter(|ext| name_c == ext.name) {
            if flags != 0 {
                return err::EBADFLAGS;
            }
            // SAFETY: out pointer from the caller.
            return ffi::status(unsafe { ffi::write_out(ops, ext.table, "ops") });
        }
        // SAFETY: only patched core domains reach this op; fi_ops is the first field.
        let layered = unsafe { &*((*fid).ops as *const LayeredDomain) };
        // SAFETY: the core's own op.
        match unsafe { (*layered.orig_fi_ops).ops_open } {
            Some(open) => unsafe { open(fid, name, flags, ops, context) },
            None => err::ENOSYS,
        }
    }
}

unsafe extern "C" fn cq_open(
    domain: *mut ofi::fid_domain,
    attr: *mut ofi::fi_cq_attr,
    cq_out: *mut *mut ofi::fid_cq,
    context: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched core domains reach this op.
        let layered = unsafe { LayeredDomain::of(domain) };
        if attr.is_null() || cq_out.is_null() {
            // Cores dereference both without checking.
            fi_warn!(Domain, "NULL CQ attr or out pointer");
            return err::EINVAL;
        }
        let Some(orig) = layered.orig().cq_open else { return err::ENOSYS };
        // SAFETY: checked above.
        let app_format = unsafe { (*attr).format };
        // SAFETY: checked above.
        layered.home.note_wait_obj(unsafe { (*attr).wait_obj });
        // Notifications of remote accesses come as remote CQ data, which CONTEXT and MSG
        // entries have no room for: the core CQ then has DATA entries, which rscntr's filter
        // narrows for the application (`deferred.rs`).
        let widen = layered.home.rma.is_some()
            && !matches!(app_format, ofi::fi_cq_format_FI_CQ_FORMAT_DATA | ofi::fi_cq_format_FI_CQ_FORMAT_TAGGED);
        // SAFETY: checked above.
        let mut wide = unsafe { *attr };
        let core_attr = if widen {
            wide.format = ofi::fi_cq_format_FI_CQ_FORMAT_DATA;
            &mut wide as *mut ofi::fi_cq_attr
        } else {
            attr
        };
        // SAFETY: forwarded; the domain outlives its CQs (the core refuses to close it before).
        let ret = unsafe { super::cq::open(orig, domain, core_attr, cq_out, context, &layered.home) };
        if ret == 0 {
            // SAFETY: both checked above; the core wrote the CQ.
            unsafe {
                let api = (*layered.fabric).api;
                layered.home.deferred.opened_cq(*cq_out, app_format, (*core_attr).format, api);
            }
        }
        ret
    }
}

unsafe extern "C" fn cntr_open(
    domain: *mut ofi::fid_domain,
    attr: *mut ofi::fi_cntr_attr,
    cntr_out: *mut *mut ofi::fid_cntr,
    context: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched core domains reach this op.
        let layered = unsafe { LayeredDomain::of(domain) };
        // SAFETY: NULL or the application's attr.
        if let Some(a) = unsafe { attr.as_ref() } {
            layered.home.note_wait_obj(a.wait_obj);
        }
        // SAFETY: forwarded; the domain outlives its counters.
        unsafe { cntr::open_in(&layered.home, attr, cntr_out, context) }
    }
}

/// Opens a core endpoint from an rscntr info and gives it rscntr's bind.
///
/// # Safety
/// As the endpoint ops: `info` NULL or valid, `ep` an out pointer; `open` the core's op.
unsafe fn open_ep(
    domain: *mut ofi::fid_domain,
    info: *mut ofi::fi_info,
    ep: *mut *mut ofi::fid_ep,
    open: impl FnOnce(&ofi::fi_ops_domain, *mut ofi::fi_info, *mut *mut ofi::fid_ep) -> c_int,
) -> c_int {
    // SAFETY: only patched core domains reach the endpoint ops.
    let layered = unsafe { LayeredDomain::of(domain) };
    let open = |core_info, out| {
        if layered.home.auto_progress {
            // SAFETY: the core's copy of the application's info.
            unsafe { progress::manual_for_core(core_info) };
        }
        testhook::fail(Op::Endpoint).unwrap_or_else(|| open(layered.orig(), core_info, out))
    };
    // SAFETY: NULL or the application's valid info.
    let trigger = unsafe { info.as_ref() }.is_some_and(|i| i.caps & ofi::FI_TRIGGER as u64 != 0);
    if trigger && !layered.home.watcher_may_progress {
        // rscntr's trigger thread posts to the core beside the application's own calls.
        fi_warn!(
            Domain,
            "an FI_TRIGGER endpoint needs an FI_THREAD_SAFE domain: open the domain \
            from an info with FI_TRIGGER (rscntr then makes it so) or FI_THREAD_SAFE"
        );
        return err::EINVAL;
    }
    // The endpoint keeps the core's info (cores may keep pointers into it) and frees it on
    // close.
    let patch = |out, core_info: CoreInfo| {
        let core = layered.core_name().to_string_lossy();
        // SAFETY: a just-opened core endpoint of this domain; the info is ours.
        unsafe { bind::patch_ep(out, &layered.home, &core, core_info.keep(), trigger) }
    };
    let refuse = || fi_warn!(Domain, "NULL info or endpoint out pointer");
    // SAFETY: the caller's contract.
    let ret =
        unsafe { open_through_core(ep, Some((info, layered.core_name())), refuse, open, patch) };
    if ret == 0
        && let Some(rma) = &layered.home.rma
        // SAFETY: NULL or the application's valid info.
        && unsafe { info.as_ref() }.is_none_or(may_be_accessed)
    {
        // SAFETY: the endpoint just opened (written through the checked out pointer).
        let out = unsafe { *ep };
        // SAFETY: an open endpoint of this domain.
        if let Err(e) = unsafe { bind_arrivals(layered, rma, out) } {
            // SAFETY: the endpoint rscntr just handed out, closed before the application
            // used it.
            unsafe { ofi::fi_close(out.cast()) };
            // SAFETY: the application's out pointer.
            unsafe { *ep = std::ptr::null_mut() };
            return e;
        }
    }
    ret
}

/// Whether remote accesses may target an endpoint opened with `info`: its capabilities name a
/// remote direction (FI_REMOTE_READ, FI_REMOTE_WRITE) or none at all, which implies every
/// direction (fi_getinfo(3)). An endpoint asked for FI_READ and FI_WRITE alone only initiates,
/// as an OpenSHMEM context's does: it needs no arrivals counter, and over `tcp;ofi_rxm` each one
/// bound would put the endpoint's fds in one more wait set (see `bind_arrivals`).
fn may_be_accessed(info: &ofi::fi_info) -> bool {
    let dirs = (ofi::FI_READ | ofi::FI_WRITE | ofi::FI_REMOTE_READ | ofi::FI_REMOTE_WRITE) as u64;
    let remote = (ofi::FI_REMOTE_READ | ofi::FI_REMOTE_WRITE) as u64;
    // SAFETY: the attrs of a valid info are NULL or valid.
    let rx = unsafe { info.rx_attr.as_ref() }.map_or(0, |r| r.caps);
    let caps = info.caps | rx;
    caps & dirs == 0 || caps & remote != 0
}

/// Binds the domain's arrivals counter (`rma_event.rs`: what waiters on remote-access
/// counters sleep on) to a new endpoint with FI_REMOTE_WRITE, opening it with the first.
///
/// # Safety
/// `ep` is an open endpoint of the domain, not enabled yet.
unsafe fn bind_arrivals(
    layered: &LayeredDomain,
    rma: &RmaEvents,
    ep: *mut ofi::fid_ep,
) -> Result<(), c_int> {
    let arrivals = {
        let mut a = rma.arrivals.lock();
        match *a {
            Some(c) => c,
            None => {
                // A wait object, so that waits on it sleep instead of yielding between
                // progress calls (a whole CPU per waiter): over shm on the domain's doorbell,
                // which the peers' writes ring (`doorbell/ring.rs`); elsewhere on the core's own
                // wait (tcp's progress fd, rxm's wait set).
                let mut attr = ofi::fi_cntr_attr {
                    events: ofi::fi_cntr_events_FI_CNTR_EVENTS_COMP,
                    wait_obj: ofi::fi_wait_obj_FI_WAIT_UNSPEC,
                    wait_set: std::ptr::null_mut(),
                    flags: 0,
                };
                let mut c: *mut ofi::fid_cntr = std::ptr::null_mut();
                // SAFETY: the domain's own counter open, with valid pointers.
                let ret = unsafe {
                    cntr::open_in(&layered.home, &mut attr, &mut c, std::ptr::null_mut())
                };
                if ret != 0 {
                    fi_warn!(
                        Domain,
                        "cannot open the counter remote-access waits sleep on: {ret}"
                    );
                    return Err(ret);
                }
                *a = Some(c);
                c
            }
        }
    };
    // SAFETY: rscntr's bind on the endpoint (its table), with rscntr's own counter.
    let ret = unsafe {
        (*(*ep).fid.ops).bind.map_or(err::ENOSYS, |bind| {
            bind(ep.cast(), arrivals.cast(), ofi::FI_REMOTE_WRITE as u64)
        })
    };
    if ret != 0 {
        fi_warn!(
            Domain,
            "cannot bind the counter remote-access waits sleep on: {ret}"
        );
        return Err(ret);
    }
    // SAFETY: rscntr's counter, just bound: its feed is open.
    if let Some(c) = unsafe { cntr::as_cntr::<'static>(arrivals.cast()) }
        && let Ok(feed) = c.feed_or_open(&mut |_| Err(err::ENOENT))
    {
        // SAFETY: the arrivals counter, open until the domain closes.
        unsafe { rma.set_arrivals(arrivals, feed) };
    }
    Ok(())
}

unsafe extern "C" fn endpoint(
    domain: *mut ofi::fid_domain,
    info: *mut ofi::fi_info,
    ep: *mut *mut ofi::fid_ep,
    context: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: the core's own op with an info it accepts.
        unsafe { open_ep(domain, info, ep, |o, i, out| o.endpoint.unwrap()(domain, i, out, context)) }
    }
}

unsafe extern "C" fn endpoint2(
    domain: *mut ofi::fid_domain,
    info: *mut ofi::fi_info,
    ep: *mut *mut ofi::fid_ep,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: the core's own op with an info it accepts.
        unsafe {
            open_ep(domain, info, ep, |o, i, out| match o.endpoint2 {
                Some(e2) => e2(domain, i, out, flags, context),
                None => err::ENOSYS,
            })
        }
    }
}

unsafe extern "C" fn scalable_ep(
    domain: *mut ofi::fid_domain,
    info: *mut ofi::fi_info,
    ep: *mut *mut ofi::fid_ep,
    context: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: the core's own op with an info it accepts.
        unsafe {
            open_ep(domain, info, ep, |o, i, out| match o.scalable_ep {
                Some(s) => s(domain, i, out, context),
                None => err::ENOSYS,
            })
        }
    }
}

/// Registers through the core (`reg`, behind the test hook), then gives the new core MR
/// rscntr's bind.
///
/// # Safety
/// `fid` a patched domain's fid; `mr` NULL or the application's out pointer; `reg` the core's
/// registration, filling its argument when it returns 0.
unsafe fn patched_mr(
    fid: *mut ofi::fid,
    mr: *mut *mut ofi::fid_mr,
    reg: impl FnOnce(*mut *mut ofi::fid_mr) -> c_int,
) -> c_int {
    // SAFETY: only patched core domains reach the MR ops.
    let layered = unsafe { LayeredDomain::of_fid(fid) };
    let open = |_, out| testhook::fail(Op::MrReg).unwrap_or_else(|| reg(out));
    let patch = |out: *mut ofi::fid_mr, _| {
        let core = layered.core_name().to_string_lossy();
        // SAFETY: the core registered an MR of this domain.
        unsafe { bind::patch(out.cast(), &layered.home, &core) }
    };
    let refuse = || fi_warn!(Domain, "NULL MR out pointer");
    // SAFETY: the caller's contract.
    let ret = unsafe { open_through_core(mr, None, refuse, open, patch) };
    if ret == 0
        && let Some(r) = &layered.home.rma
    {
        // SAFETY: the MR just registered (written through the checked out pointer).
        let out = unsafe { *mr };
        // SAFETY: as above.
        if let Err(e) = r.registered(out, unsafe { (*out).key }) {
            // SAFETY: the MR rscntr just handed out, closed again before the application saw it.
            unsafe { ofi::fi_close(out.cast()) };
            // SAFETY: the application's out pointer.
            unsafe { *mr = std::ptr::null_mut() };
            return e;
        }
    }
    ret
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn mr_reg(
    fid: *mut ofi::fid,
    buf: *const c_void,
    len: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut ofi::fid_mr,
    context: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched core domains reach this op; the core's own op.
        unsafe {
            let layered = LayeredDomain::of_fid(fid);
            let (reg, flags) = (layered.orig_mr().reg.unwrap(), layered.core_mr_flags(flags));
            patched_mr(fid, mr, |out| reg(fid, buf, len, access, offset, requested_key, flags, out, context))
        }
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn mr_regv(
    fid: *mut ofi::fid,
    iov: *const libc::iovec,
    count: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut ofi::fid_mr,
    context: *mut c_void,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched core domains reach this op; the core's own op.
        unsafe {
            let layered = LayeredDomain::of_fid(fid);
            let (regv, flags) = (layered.orig_mr().regv.unwrap(), layered.core_mr_flags(flags));
            patched_mr(fid, mr, |out| regv(fid, iov, count, access, offset, requested_key, flags, out, context))
        }
    }
}

unsafe extern "C" fn mr_regattr(
    fid: *mut ofi::fid,
    attr: *const ofi::fi_mr_attr,
    flags: u64,
    mr: *mut *mut ofi::fid_mr,
) -> c_int {
    crate::ffi_boundary! {
        // SAFETY: only patched core domains reach this op; the core's own op.
        unsafe {
            let layered = LayeredDomain::of_fid(fid);
            let (regattr, flags) = (layered.orig_mr().regattr.unwrap(), layered.core_mr_flags(flags));
            patched_mr(fid, mr, |out| regattr(fid, attr, flags, out))
        }
    }
}

/// What a room's leader sleeps in (see `engine::flat_set`): its flattened set, the first time,
/// or why it polls its members' fds instead (once per cause and generation of the wait sets).
fn report_flat_waits(why: &str) {
    crate::fi_info!(Domain, "{why}");
}
