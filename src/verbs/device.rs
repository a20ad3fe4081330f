//! A device with completion counters, its counters (a [`Store`] for the engine) and attaching
//! them to QPs.

use super::abi::*;
use super::api::VerbsApi;
use crate::engine::{Store, StoreError};
use crate::fi_warn;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::{CStr, c_int};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering, fence};

/// A failed rdma-core call: which one, and its errno.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HwError {
    pub call: &'static str,
    pub errno: i32,
}

impl std::fmt::Display for HwError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} failed: {}",
            self.call,
            std::io::Error::from_raw_os_error(self.errno)
        )
    }
}

fn check(call: &'static str, ret: c_int) -> Result<(), HwError> {
    match ret {
        0 => Ok(()),
        // rdma-core returns errno values; a stray -1 would mean "see errno".
        -1 => Err(HwError {
            call,
            errno: last_errno(),
        }),
        e => Err(HwError {
            call,
            errno: e.abs(),
        }),
    }
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// What a counter counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CounterKind {
    /// Completed work requests (`FI_CNTR_EVENTS_COMP`).
    Wrs,
    /// Completed bytes (`FI_CNTR_EVENTS_BYTES`).
    Bytes,
}

impl std::fmt::Display for CounterKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CounterKind::Wrs => "WRS (FI_CNTR_EVENTS_COMP)",
            CounterKind::Bytes => "BYTES (FI_CNTR_EVENTS_BYTES)",
        })
    }
}

/// One opened device whose caps report completion counters. Opened once, kept for the life of
/// the process (or of the test that opened it).
pub struct Device {
    api: &'static VerbsApi,
    ctx: *mut IbvContext,
    name: String,
    caps: IbvCompCntrCaps,
    /// Hardware counters alive on this device (checked against `caps.max_counters`).
    live: AtomicU32,
    /// Per QP: the op bits already taken and the counters attached (for `forget_qp`).
    qps: Mutex<HashMap<usize, QpRecord>>,
}

#[derive(Default)]
struct QpRecord {
    ops: u32,
    counters: Vec<Arc<AtomicU32>>,
}

// SAFETY: rdma-core's verbs are thread safe on a context and its objects; the raw context
// pointer is only passed to them.
unsafe impl Send for Device {}
// SAFETY: as above; the mutable state is in atomics and a mutex.
unsafe impl Sync for Device {}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("name", &self.name)
            .field("caps", &self.caps)
            .finish()
    }
}

impl Device {
    /// Opens the device `wanted` (by name), or else the first device with counter caps.
    /// `Err` tells why none could be had, for the log.
    pub fn open(api: &'static VerbsApi, wanted: Option<&str>) -> Result<Arc<Device>, String> {
        let mut n: c_int = 0;
        // SAFETY: `n` is a live c_int the call writes the count into.
        let list = unsafe { (api.get_device_list)(&mut n) };
        if list.is_null() {
            return Err(format!(
                "ibv_get_device_list failed: {} (no RDMA subsystem?)",
                std::io::Error::from_raw_os_error(last_errno())
            ));
        }
        let mut notes = Vec::new();
        let mut found = None;
        for i in 0..n.max(0) as usize {
            // SAFETY: the list holds `n` device pointers.
            let dev = unsafe { *list.add(i) };
            if dev.is_null() {
                break;
            }
            // SAFETY: a device from the list; the name is a C string owned by the device.
            let name = unsafe { (api.get_device_name)(dev) };
            let name = if name.is_null() {
                format!("device{i}")
            } else {
                // SAFETY: non-NULL C string, copied at once.
                unsafe { CStr::from_ptr(name) }
                    .to_string_lossy()
                    .into_owned()
            };
            if wanted.is_some_and(|w| w != name) {
                notes.push(format!("{name}: not FI_RSCNTR_DEVICE"));
                continue;
            }
            match Self::probe(api, dev, &name) {
                Ok(d) => {
                    found = Some(d);
                    break;
                }
                Err(why) => notes.push(why),
            }
        }
        // SAFETY: the list from get_device_list, freed once; opened contexts stay valid.
        unsafe { (api.free_device_list)(list) };
        match found {
            Some(d) => Ok(Arc::new(d)),
            None if n == 0 => Err("no RDMA device".into()),
            None if notes.is_empty() => Err("no usable RDMA device".into()),
            None => Err(notes.join("; ")),
        }
    }

    fn probe(api: &'static VerbsApi, dev: *mut IbvDevice, name: &str) -> Result<Device, String> {
        // SAFETY: a device from the live list.
        let ctx = unsafe { (api.open_device)(dev) };
        if ctx.is_null() {
            return Err(format!(
                "{name}: ibv_open_device failed: {}",
                std::io::Error::from_raw_os_error(last_errno())
            ));
        }
        let mut caps = IbvCompCntrCaps::default();
        // SAFETY: an open context and a caps struct of the size passed.
        let ret = unsafe {
            (api.query_comp_cntr_caps)(ctx, &mut caps, std::mem::size_of::<IbvCompCntrCaps>())
        };
        let why = match check("ibv_query_comp_cntr_caps", ret) {
            Err(e) => Some(format!("{name}: no completion counters ({e})")),
            Ok(()) if caps.max_counters == 0 => {
                Some(format!("{name}: no completion counters (max_counters 0)"))
            }
            Ok(()) => None,
        };
        if let Some(why) = why {
            // SAFETY: the context opened above, not used after.
            unsafe { (api.close_device)(ctx) };
            return Err(why);
        }
        Ok(Device {
            api,
            ctx,
            name: name.to_owned(),
            caps,
            live: AtomicU32::new(0),
            qps: Mutex::new(HashMap::new()),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn caps(&self) -> IbvCompCntrCaps {
        self.caps
    }

    pub fn api(&self) -> &'static VerbsApi {
        self.api
    }

    /// Hardware counters alive on this device.
    pub fn live_counters(&self) -> u32 {
        self.live.load(Ordering::Relaxed)
    }

    /// Creates a counter. Fails with ENOSPC before calling the device when `max_counters` are
    /// alive, and with the device's errno otherwise (EOPNOTSUPP: the device cannot count this
    /// kind; ENOMEM: out of counters).
    pub fn create_counter(self: &Arc<Self>, kind: CounterKind) -> Result<HwCounter, HwError> {
        let max = self.caps.max_counters;
        if self
            .live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_err()
        {
            return Err(HwError {
                call: "max_counters",
                errno: libc::ENOSPC,
            });
        }
        let mut attr = IbvCompCntrInitAttr {
            comp_mask: 0,
            cntr_type: match kind {
                CounterKind::Wrs => IBV_COMP_CNTR_TYPE_WRS,
                CounterKind::Bytes => IBV_COMP_CNTR_TYPE_BYTES,
            },
            flags: 0,
        };
        // SAFETY: the device's open context and a filled init attr.
        let raw = unsafe { (self.api.create_comp_cntr)(self.ctx, &mut attr) };
        if raw.is_null() {
            let errno = last_errno();
            self.live.fetch_sub(1, Ordering::AcqRel);
            return Err(HwError {
                call: "ibv_create_comp_cntr",
                errno,
            });
        }
        Ok(HwCounter {
            dev: self.clone(),
            raw: AtomicPtr::new(raw),
            kind,
            last: AtomicU64::new(0),
            last_err: AtomicU64::new(0),
            read_failed: AtomicBool::new(false),
            attached: Arc::new(AtomicU32::new(0)),
        })
    }

    /// Attaches `cntr` to `qp` for the operations in `op_mask` (`IBV_QP_ATTACH_COMP_CNTR_OP_*`;
    /// see [`op_mask_from_bind_flags`]). The QP must be in RESET or INIT (the device checks);
    /// `op_mask` must be non-empty, supported by the device, and disjoint from what other
    /// counters on this QP already count (EBUSY otherwise). There is no detach: destroying the
    /// QP detaches; call [`Device::forget_qp`] then.
    ///
    /// # Safety
    /// `qp` is NULL or a live QP on this device that the caller owns.
    pub unsafe fn attach(
        &self,
        qp: *mut IbvQp,
        cntr: &HwCounter,
        op_mask: u32,
    ) -> Result<(), HwError> {
        let fail = |errno| {
            Err(HwError {
                call: "ibv_qp_attach_comp_cntr",
                errno,
            })
        };
        if qp.is_null() || !std::ptr::eq(Arc::as_ptr(&cntr.dev), self) {
            return fail(libc::EINVAL);
        }
        if op_mask == 0 || op_mask & !IBV_QP_ATTACH_COMP_CNTR_OP_ALL != 0 {
            return fail(libc::EINVAL);
        }
        if op_mask & !self.caps.supported_qp_attach_ops != 0 {
            return fail(libc::EOPNOTSUPP);
        }
        let raw = cntr.raw.load(Ordering::Acquire);
        if raw.is_null() {
            return fail(libc::EINVAL);
        }
        let mut qps = self.qps.lock();
        let rec = qps.entry(qp as usize).or_default();
        if rec.ops & op_mask != 0 {
            return fail(libc::EBUSY);
        }
        let mut attr = IbvQpAttachCompCntrAttr {
            comp_mask: 0,
            op_mask,
        };
        // SAFETY: a QP the caller owns on this device (caller's contract), a live counter, a
        // filled attr.
        check("ibv_qp_attach_comp_cntr", unsafe {
            (self.api.qp_attach_comp_cntr)(qp, raw, &mut attr)
        })?;
        rec.ops |= op_mask;
        rec.counters.push(cntr.attached.clone());
        cntr.attached.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Records that `qp` was destroyed: its counters are detached and its op bits free.
    pub fn forget_qp(&self, qp: *mut IbvQp) {
        if let Some(rec) = self.qps.lock().remove(&(qp as usize)) {
            for c in rec.counters {
                c.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

/// Maps libfabric's counter bind flags (`fi_ep_bind(ep, &cntr->fid, flags)`) to attach op bits.
/// Unknown bits are returned as the error.
pub fn op_mask_from_bind_flags(flags: u64) -> Result<u32, u64> {
    use crate::ofi;
    // FI_TRANSMIT is FI_SEND.
    const MAP: [(u64, u32); 6] = [
        (ofi::FI_SEND as u64, IBV_QP_ATTACH_COMP_CNTR_OP_SEND),
        (ofi::FI_RECV as u64, IBV_QP_ATTACH_COMP_CNTR_OP_RECV),
        (ofi::FI_READ as u64, IBV_QP_ATTACH_COMP_CNTR_OP_RDMA_READ),
        (ofi::FI_WRITE as u64, IBV_QP_ATTACH_COMP_CNTR_OP_RDMA_WRITE),
        (
            ofi::FI_REMOTE_READ as u64,
            IBV_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_READ,
        ),
        (
            ofi::FI_REMOTE_WRITE as u64,
            IBV_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_WRITE,
        ),
    ];
    let known = MAP.iter().fold(0, |acc, (f, _)| acc | f);
    if flags & !known != 0 {
        return Err(flags & !known);
    }
    Ok(MAP
        .iter()
        .filter(|(f, _)| flags & f != 0)
        .fold(0, |acc, (_, op)| acc | op))
}

/// One device completion counter: the engine's [`Store`] for a hardware-backed `fi_cntr`.
///
/// Reads go to the device (`ibv_read_comp_cntr`, on EFA a load from memory the device writes)
/// and may lag an inc or set made a moment before; see the engine's notes on polled stores.
pub struct HwCounter {
    dev: Arc<Device>,
    raw: AtomicPtr<IbvCompCntr>,
    kind: CounterKind,
    /// Last good reads, returned when a read fails (fi_cntr_read has no error channel).
    last: AtomicU64,
    last_err: AtomicU64,
    read_failed: AtomicBool,
    /// QPs this counter is attached to.
    attached: Arc<AtomicU32>,
}

impl std::fmt::Debug for HwCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HwCounter")
            .field("device", &self.dev.name)
            .field("kind", &self.kind)
            .field("raw", &self.raw)
            .finish()
    }
}

impl HwCounter {
    pub fn device(&self) -> &Arc<Device> {
        &self.dev
    }

    pub fn kind(&self) -> CounterKind {
        self.kind
    }

    /// The rdma-core counter (NULL once destroyed).
    pub fn raw(&self) -> *mut IbvCompCntr {
        self.raw.load(Ordering::Acquire)
    }

    /// QPs the counter is attached to.
    pub fn attachments(&self) -> u32 {
        self.attached.load(Ordering::Acquire)
    }

    /// Destroys the device counter. EBUSY while it is attached to a QP (the counter stays
    /// usable); idempotent once it succeeded. The caller makes sure nothing reads it meanwhile.
    pub fn destroy(&self) -> Result<(), HwError> {
        let raw = self.raw.load(Ordering::Acquire);
        if raw.is_null() {
            return Ok(());
        }
        if self.attachments() != 0 {
            return Err(HwError {
                call: "ibv_destroy_comp_cntr",
                errno: libc::EBUSY,
            });
        }
        // SAFETY: a live counter of this device, destroyed at most once (raw is cleared below).
        check("ibv_destroy_comp_cntr", unsafe {
            (self.dev.api.destroy_comp_cntr)(raw)
        })?;
        self.raw.store(std::ptr::null_mut(), Ordering::Release);
        self.dev.live.fetch_sub(1, Ordering::AcqRel);
        Ok(())
    }

    fn read_with(
        &self,
        call: &'static str,
        f: unsafe extern "C" fn(*mut IbvCompCntr, *mut u64) -> c_int,
        last: &AtomicU64,
    ) -> u64 {
        let raw = self.raw();
        if raw.is_null() {
            return last.load(Ordering::Relaxed);
        }
        let mut v = 0u64;
        // SAFETY: a live counter and a u64 to write the value into.
        match check(call, unsafe { f(raw, &mut v) }) {
            Ok(()) => {
                // Order what the application reads next (data a RECV or remote WRITE delivered)
                // after this read of the count; rdma-core's read has no barrier of its own.
                fence(Ordering::Acquire);
                last.store(v, Ordering::Relaxed);
                v
            }
            Err(e) => {
                if !self.read_failed.swap(true, Ordering::Relaxed) {
                    fi_warn!(
                        Cntr,
                        "hardware counter on {}: {e}; returning the last value read (logged \
                         once per counter)",
                        self.dev.name
                    );
                }
                last.load(Ordering::Relaxed)
            }
        }
    }

    fn modify(
        &self,
        call: &'static str,
        f: unsafe extern "C" fn(*mut IbvCompCntr, u64) -> c_int,
        v: u64,
    ) -> Result<(), StoreError> {
        let raw = self.raw();
        if raw.is_null() {
            return Err(StoreError(libc::EINVAL));
        }
        // SAFETY: a live counter of this device.
        check(call, unsafe { f(raw, v) }).map_err(|e| StoreError(e.errno))
    }
}

impl Store for HwCounter {
    const POLLED: bool = true;
    fn read(&self) -> u64 {
        self.read_with(
            "ibv_read_comp_cntr",
            self.dev.api.read_comp_cntr,
            &self.last,
        )
    }
    fn read_err(&self) -> u64 {
        self.read_with(
            "ibv_read_err_comp_cntr",
            self.dev.api.read_err_comp_cntr,
            &self.last_err,
        )
    }
    fn add(&self, v: u64) -> Result<(), StoreError> {
        self.modify("ibv_inc_comp_cntr", self.dev.api.inc_comp_cntr, v)
    }
    fn add_err(&self, v: u64) -> Result<(), StoreError> {
        self.modify("ibv_inc_err_comp_cntr", self.dev.api.inc_err_comp_cntr, v)
    }
    fn set(&self, v: u64) -> Result<(), StoreError> {
        self.modify("ibv_set_comp_cntr", self.dev.api.set_comp_cntr, v)
    }
    fn set_err(&self, v: u64) -> Result<(), StoreError> {
        self.modify("ibv_set_err_comp_cntr", self.dev.api.set_err_comp_cntr, v)
    }
}

impl Drop for HwCounter {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            // Still attached (or the device refused): the counter is leaked, not freed under
            // the device's feet.
            fi_warn!(Cntr, "leaking a hardware counter on {}: {e}", self.dev.name);
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: the context this Device opened; every counter holds an Arc to the Device, so
        // none is alive any more.
        unsafe { (self.api.close_device)(self.ctx) };
    }
}
