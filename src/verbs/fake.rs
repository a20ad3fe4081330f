//! A fake rdma-core device behind the same [`VerbsApi`] table: in-memory completion counters
//! with the behaviours rscntr must handle. **Testing only.**
//!
//! Cargo tests open fake contexts directly ([`open_context`]); the loaded provider uses the
//! fake instead of libibverbs when `FI_RSCNTR_FAKE_VERBS` holds a configuration ([`install`]),
//! so the C test suites can run on "hardware" counters on a machine without RDMA hardware.
//!
//! Configuration: comma-separated `key=value` (an empty string or `1` means all defaults):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `devices` | 1 | devices in the list, named `fake0`, `fake1`, … |
//! | `counterless` | 0 | the first N devices report `max_counters` 0 |
//! | `delay_us` | 0 | an update becomes visible to reads this long after it was made |
//! | `max_counters` | 64 | counters per device context; creating one more fails with ENOMEM |
//! | `max_value` | 2^64-1 | values wrap to 0 past this; setting a larger value is EINVAL |
//! | `bytes` | `enotsup` | `ok`: BYTES counters work; `enotsup`: creating one fails (as on EFA) |
//! | `attach_ops` | 0x3f | `supported_qp_attach_ops` |
//! | `fail` | `none` | calls that fail, `+`-separated: list, open, caps, create, destroy, read, inc, set, attach, or `all` |
//! | `errno` | 5 (EIO) | the errno of failing calls |
//!
//! Like the real device: destroying a counter still attached to a QP is EBUSY; attaching
//! requires a QP in RESET or INIT (EINVAL), a non-empty (EINVAL) supported (EOPNOTSUPP) op
//! mask that overlaps no other counter's on the QP (EBUSY). [`device_add`] plays the device
//! counting completions: it changes the value without any call through rscntr.

use super::abi::*;
use super::api::VerbsApi;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::ffi::{CString, c_char, c_int};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Which calls fail (`fail=`).
pub mod call {
    pub const LIST: u32 = 1 << 0;
    pub const OPEN: u32 = 1 << 1;
    pub const CAPS: u32 = 1 << 2;
    pub const CREATE: u32 = 1 << 3;
    pub const DESTROY: u32 = 1 << 4;
    pub const READ: u32 = 1 << 5;
    pub const INC: u32 = 1 << 6;
    pub const SET: u32 = 1 << 7;
    pub const ATTACH: u32 = 1 << 8;
    pub const ALL: u32 = (1 << 9) - 1;
    pub const NAMES: [(&str, u32); 10] = [
        ("list", LIST),
        ("open", OPEN),
        ("caps", CAPS),
        ("create", CREATE),
        ("destroy", DESTROY),
        ("read", READ),
        ("inc", INC),
        ("set", SET),
        ("attach", ATTACH),
        ("all", ALL),
    ];
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeConfig {
    pub devices: u32,
    pub counterless: u32,
    pub delay: Duration,
    pub max_counters: u32,
    pub max_value: u64,
    pub bytes: bool,
    pub attach_ops: u32,
    pub fail: u32,
    pub errno: i32,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            devices: 1,
            counterless: 0,
            delay: Duration::ZERO,
            max_counters: 64,
            max_value: u64::MAX,
            bytes: false,
            attach_ops: IBV_QP_ATTACH_COMP_CNTR_OP_ALL,
            fail: 0,
            errno: libc::EIO,
        }
    }
}

fn parse_num(key: &str, v: &str) -> Result<u64, String> {
    let r = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    r.map_err(|_| format!("{key}={v}: not a number"))
}

impl FakeConfig {
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut c = FakeConfig::default();
        let text = text.trim();
        if text.is_empty() || text == "1" {
            return Ok(c);
        }
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, v) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?}: expected key=value"))?;
            let num = || parse_num(key, v);
            let small = || {
                num().and_then(|n| u32::try_from(n).map_err(|_| format!("{key}={v}: too large")))
            };
            match key {
                "devices" => c.devices = small()?,
                "counterless" => c.counterless = small()?,
                "delay_us" => c.delay = Duration::from_micros(num()?),
                "max_counters" => c.max_counters = small()?,
                "max_value" => c.max_value = num()?,
                "attach_ops" => c.attach_ops = small()?,
                "errno" => c.errno = small()? as i32,
                "bytes" => {
                    c.bytes = match v {
                        "ok" => true,
                        "enotsup" => false,
                        _ => return Err(format!("bytes={v}: expected ok or enotsup")),
                    }
                }
                "fail" => {
                    c.fail = 0;
                    for name in v.split('+').filter(|s| *s != "none") {
                        let bit = call::NAMES
                            .iter()
                            .find(|(n, _)| *n == name)
                            .ok_or_else(|| format!("fail={v}: unknown call {name:?}"))?
                            .1;
                        c.fail |= bit;
                    }
                }
                _ => return Err(format!("unknown key {key:?}")),
            }
        }
        Ok(c)
    }
}

fn set_errno(e: i32) {
    // SAFETY: errno is a thread-local int.
    unsafe { *libc::__errno_location() = e };
}

const DEV_MAGIC: u64 = 0x6661_6b65_6465_7630; // "fakedev0"
const CTX_MAGIC: u64 = 0x6661_6b65_6374_7830; // "fakectx0"

#[repr(C)]
struct FakeDev {
    magic: u64,
    name: CString,
    config: FakeConfig,
    counterless: bool,
}

#[repr(C)]
struct FakeCtx {
    magic: u64,
    config: FakeConfig,
    counterless: bool,
    live: AtomicU32,
}

/// One value with its not-yet-visible updates.
#[derive(Default)]
struct Lagged {
    visible: u64,
    latest: u64,
    pending: VecDeque<(Instant, u64)>,
}

impl Lagged {
    fn catch_up(&mut self, now: Instant) {
        while let Some(&(at, v)) = self.pending.front() {
            if at > now {
                break;
            }
            self.visible = v;
            self.pending.pop_front();
        }
    }
    fn update(&mut self, v: u64, delay: Duration) {
        self.latest = v;
        if delay.is_zero() {
            self.visible = v;
            self.pending.clear();
        } else {
            self.pending.push_back((Instant::now() + delay, v));
        }
    }
}

#[repr(C)]
struct FakeCntr {
    base: IbvCompCntr,
    vals: Mutex<[Lagged; 2]>,
    attached: AtomicU32,
}

/// A fake QP for attach tests: `context` first, as in `struct ibv_qp`.
#[repr(C)]
struct FakeQp {
    context: *mut IbvContext,
    /// False once moved past INIT.
    attachable: bool,
    attached: Mutex<Vec<(*mut FakeCntr, u32)>>,
}

/// # Safety
/// `ctx` is a context from this fake.
unsafe fn ctx_ref<'a>(ctx: *mut IbvContext) -> &'a FakeCtx {
    // SAFETY: caller's contract; every fake context is a FakeCtx.
    let c = unsafe { &*(ctx as *const FakeCtx) };
    assert_eq!(c.magic, CTX_MAGIC, "not a fake context");
    c
}

/// # Safety
/// `c` is a counter from this fake, not destroyed.
unsafe fn cntr_ref<'a>(c: *mut IbvCompCntr) -> (&'a FakeCntr, &'a FakeCtx) {
    // SAFETY: caller's contract; every fake counter is a FakeCntr whose context is a FakeCtx.
    unsafe {
        let f = &*(c as *const FakeCntr);
        (f, ctx_ref(f.base.context))
    }
}

fn fails(config: &FakeConfig, which: u32) -> Option<c_int> {
    (config.fail & which != 0).then_some(config.errno)
}

fn wrap_add(v: u64, n: u64, max: u64) -> u64 {
    if max == u64::MAX {
        v.wrapping_add(n)
    } else {
        ((v as u128 + n as u128) % (max as u128 + 1)) as u64
    }
}

/// The devices [`install`] made, which the fake `ibv_get_device_list` lists.
static INSTALLED: Mutex<Vec<&'static FakeDev>> = Mutex::new(Vec::new());

unsafe extern "C" fn get_device_list(num: *mut c_int) -> *mut *mut IbvDevice {
    let devs = INSTALLED.lock();
    if let Some(first) = devs.first()
        && let Some(e) = fails(&first.config, call::LIST)
    {
        set_errno(e);
        return std::ptr::null_mut();
    }
    // SAFETY: calloc of n+1 pointers (NULL-terminated, as rdma-core's list); freed by
    // free_device_list.
    let list =
        unsafe { libc::calloc(devs.len() + 1, size_of::<*mut IbvDevice>()) } as *mut *mut IbvDevice;
    if list.is_null() {
        set_errno(libc::ENOMEM);
        return list;
    }
    for (i, d) in devs.iter().enumerate() {
        // SAFETY: within the n+1 slots just allocated.
        unsafe { *list.add(i) = *d as *const FakeDev as *mut IbvDevice };
    }
    if !num.is_null() {
        // SAFETY: the caller's count out pointer.
        unsafe { *num = devs.len() as c_int };
    }
    list
}

unsafe extern "C" fn free_device_list(list: *mut *mut IbvDevice) {
    // SAFETY: a list from get_device_list (calloc).
    unsafe { libc::free(list.cast()) };
}

unsafe extern "C" fn get_device_name(dev: *mut IbvDevice) -> *const c_char {
    // SAFETY: a device from the fake list.
    unsafe { &*(dev as *const FakeDev) }.name.as_ptr()
}

unsafe extern "C" fn open_device(dev: *mut IbvDevice) -> *mut IbvContext {
    // SAFETY: a device from the fake list.
    let d = unsafe { &*(dev as *const FakeDev) };
    assert_eq!(d.magic, DEV_MAGIC, "not a fake device");
    if let Some(e) = fails(&d.config, call::OPEN) {
        set_errno(e);
        return std::ptr::null_mut();
    }
    new_context(d.config.clone(), d.counterless)
}

fn new_context(config: FakeConfig, counterless: bool) -> *mut IbvContext {
    Box::into_raw(Box::new(FakeCtx {
        magic: CTX_MAGIC,
        config,
        counterless,
        live: AtomicU32::new(0),
    }))
    .cast()
}

unsafe extern "C" fn close_device(ctx: *mut IbvContext) -> c_int {
    // SAFETY: a context from open_device/open_context, closed once.
    drop(unsafe { Box::from_raw(ctx as *mut FakeCtx) });
    0
}

unsafe extern "C" fn query_caps(
    ctx: *mut IbvContext,
    caps: *mut IbvCompCntrCaps,
    size: usize,
) -> c_int {
    // SAFETY: a fake context.
    let c = unsafe { ctx_ref(ctx) };
    if let Some(e) = fails(&c.config, call::CAPS) {
        return e;
    }
    if size < size_of::<IbvCompCntrCaps>() {
        return libc::EINVAL;
    }
    let out = IbvCompCntrCaps {
        max_value: c.config.max_value,
        max_counters: if c.counterless {
            0
        } else {
            c.config.max_counters
        },
        supported_qp_attach_ops: c.config.attach_ops,
    };
    // SAFETY: the caller's caps struct, at least `size` bytes.
    unsafe { caps.write(out) };
    0
}

unsafe extern "C" fn create(
    ctx: *mut IbvContext,
    attr: *mut IbvCompCntrInitAttr,
) -> *mut IbvCompCntr {
    // SAFETY: a fake context.
    let c = unsafe { ctx_ref(ctx) };
    // SAFETY: the caller's attr.
    let attr = unsafe { attr.as_ref() };
    let errno = if let Some(e) = fails(&c.config, call::CREATE) {
        e
    } else if attr.is_none_or(|a| a.comp_mask != 0 || a.flags != 0) {
        libc::EINVAL
    } else if c.counterless {
        libc::EOPNOTSUPP
    } else {
        match attr.map(|a| a.cntr_type) {
            Some(IBV_COMP_CNTR_TYPE_WRS) => 0,
            Some(IBV_COMP_CNTR_TYPE_BYTES) if c.config.bytes => 0,
            _ => libc::EOPNOTSUPP,
        }
    };
    if errno == 0
        && c.live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < c.config.max_counters).then_some(n + 1)
            })
            .is_ok()
    {
        let handle = c.live.load(Ordering::Relaxed);
        return Box::into_raw(Box::new(FakeCntr {
            base: IbvCompCntr {
                context: ctx,
                handle,
            },
            vals: Mutex::new(Default::default()),
            attached: AtomicU32::new(0),
        }))
        .cast();
    }
    set_errno(if errno == 0 { libc::ENOMEM } else { errno });
    std::ptr::null_mut()
}

unsafe extern "C" fn destroy(cntr: *mut IbvCompCntr) -> c_int {
    // SAFETY: a live fake counter.
    let (f, c) = unsafe { cntr_ref(cntr) };
    if let Some(e) = fails(&c.config, call::DESTROY) {
        return e;
    }
    if f.attached.load(Ordering::Acquire) != 0 {
        return libc::EBUSY;
    }
    c.live.fetch_sub(1, Ordering::AcqRel);
    // SAFETY: made by create, destroyed once.
    drop(unsafe { Box::from_raw(cntr as *mut FakeCntr) });
    0
}

fn modify(
    cntr: *mut IbvCompCntr,
    which: usize,
    op: u32,
    f: impl FnOnce(u64, u64) -> Option<u64>,
) -> c_int {
    // SAFETY: a live fake counter (the entry points' contract).
    let (fc, c) = unsafe { cntr_ref(cntr) };
    if let Some(e) = fails(&c.config, op) {
        return e;
    }
    let mut vals = fc.vals.lock();
    let v = &mut vals[which];
    match f(v.latest, c.config.max_value) {
        Some(new) => {
            v.update(new, c.config.delay);
            0
        }
        None => libc::EINVAL,
    }
}

fn read(cntr: *mut IbvCompCntr, which: usize, out: *mut u64) -> c_int {
    // SAFETY: a live fake counter (the entry points' contract).
    let (fc, c) = unsafe { cntr_ref(cntr) };
    if let Some(e) = fails(&c.config, call::READ) {
        return e;
    }
    if out.is_null() {
        return libc::EINVAL;
    }
    let mut vals = fc.vals.lock();
    vals[which].catch_up(Instant::now());
    // SAFETY: the caller's u64.
    unsafe { *out = vals[which].visible };
    0
}

unsafe extern "C" fn set_value(cntr: *mut IbvCompCntr, v: u64) -> c_int {
    modify(cntr, 0, call::SET, |_, max| (v <= max).then_some(v))
}
unsafe extern "C" fn set_errors(cntr: *mut IbvCompCntr, v: u64) -> c_int {
    modify(cntr, 1, call::SET, |_, max| (v <= max).then_some(v))
}
unsafe extern "C" fn inc_value(cntr: *mut IbvCompCntr, n: u64) -> c_int {
    modify(cntr, 0, call::INC, |old, max| Some(wrap_add(old, n, max)))
}
unsafe extern "C" fn inc_errors(cntr: *mut IbvCompCntr, n: u64) -> c_int {
    modify(cntr, 1, call::INC, |old, max| Some(wrap_add(old, n, max)))
}
unsafe extern "C" fn read_value(cntr: *mut IbvCompCntr, out: *mut u64) -> c_int {
    read(cntr, 0, out)
}
unsafe extern "C" fn read_errors(cntr: *mut IbvCompCntr, out: *mut u64) -> c_int {
    read(cntr, 1, out)
}

unsafe extern "C" fn qp_attach(
    qp: *mut IbvQp,
    cntr: *mut IbvCompCntr,
    attr: *mut IbvQpAttachCompCntrAttr,
) -> c_int {
    // SAFETY: a fake QP and a live fake counter (the caller's contract).
    let (q, (fc, c)) = unsafe { (&*(qp as *const FakeQp), cntr_ref(cntr)) };
    if let Some(e) = fails(&c.config, call::ATTACH) {
        return e;
    }
    // SAFETY: the caller's attr.
    let Some(attr) = (unsafe { attr.as_ref() }) else {
        return libc::EINVAL;
    };
    if attr.comp_mask != 0 || attr.op_mask == 0 || !q.attachable || q.context != fc.base.context {
        return libc::EINVAL;
    }
    if attr.op_mask & !c.config.attach_ops != 0 {
        return libc::EOPNOTSUPP;
    }
    let mut attached = q.attached.lock();
    if attached.iter().any(|(_, m)| m & attr.op_mask != 0) {
        return libc::EBUSY;
    }
    attached.push((cntr as *mut FakeCntr, attr.op_mask));
    fc.attached.fetch_add(1, Ordering::AcqRel);
    0
}

/// The fake's table.
pub static FAKE_API: VerbsApi = VerbsApi {
    origin: "fake",
    get_device_list,
    free_device_list,
    get_device_name,
    open_device,
    close_device,
    query_comp_cntr_caps: query_caps,
    create_comp_cntr: create,
    destroy_comp_cntr: destroy,
    set_comp_cntr: set_value,
    set_err_comp_cntr: set_errors,
    inc_comp_cntr: inc_value,
    inc_err_comp_cntr: inc_errors,
    read_comp_cntr: read_value,
    read_err_comp_cntr: read_errors,
    qp_attach_comp_cntr: qp_attach,
};

/// Makes the fake device list show `config.devices` devices and returns the fake's table.
/// Devices from an earlier install stay valid (they are leaked: testing only).
pub fn install(config: FakeConfig) -> &'static VerbsApi {
    let devs = (0..config.devices)
        .map(|i| {
            &*Box::leak(Box::new(FakeDev {
                magic: DEV_MAGIC,
                name: CString::new(format!("fake{i}")).expect("no NUL"),
                config: config.clone(),
                counterless: i < config.counterless,
            }))
        })
        .collect();
    *INSTALLED.lock() = devs;
    &FAKE_API
}

/// Opens a fake device context directly (no device list), for tests of the counter layer.
pub fn open_context(config: FakeConfig) -> *mut IbvContext {
    new_context(config, false)
}

/// Plays the device completing `n` operations: the value moves, visible after the configured
/// delay, and nothing in rscntr is told.
///
/// # Safety
/// `cntr` is a live counter of this fake.
pub unsafe fn device_add(cntr: *mut IbvCompCntr, n: u64) {
    modify(cntr, 0, 0, |old, max| Some(wrap_add(old, n, max)));
}

/// Plays the device completing `n` operations in error.
///
/// # Safety
/// As [`device_add`].
pub unsafe fn device_add_err(cntr: *mut IbvCompCntr, n: u64) {
    modify(cntr, 1, 0, |old, max| Some(wrap_add(old, n, max)));
}

/// A fake QP on `ctx` in RESET state.
pub fn create_qp(ctx: *mut IbvContext) -> *mut IbvQp {
    Box::into_raw(Box::new(FakeQp {
        context: ctx,
        attachable: true,
        attached: Mutex::new(Vec::new()),
    }))
    .cast()
}

/// Moves a fake QP to RTS: attaching is no longer allowed.
///
/// # Safety
/// `qp` is a live fake QP not used concurrently.
pub unsafe fn qp_to_rts(qp: *mut IbvQp) {
    // SAFETY: caller's contract.
    unsafe { (*(qp as *mut FakeQp)).attachable = false };
}

/// Destroys a fake QP, detaching its counters (as the kernel does).
///
/// # Safety
/// `qp` is a live fake QP whose counters are alive.
pub unsafe fn destroy_qp(qp: *mut IbvQp) {
    // SAFETY: caller's contract.
    let q = unsafe { Box::from_raw(qp as *mut FakeQp) };
    for (c, _) in q.attached.lock().iter() {
        // SAFETY: attached counters cannot be destroyed (EBUSY), so they are alive.
        unsafe { &**c }.attached.fetch_sub(1, Ordering::AcqRel);
    }
}
