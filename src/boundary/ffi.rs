//! The C boundary's shared parts: panic containment, error codes, pointer checks, the generic
//! "not supported" ops every fid class shares, and the open children that keep a parent fid open.

use crate::ofi;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

/// libfabric error codes as the negative `int` the C API returns.
pub mod err {
    use crate::ofi;
    use std::ffi::c_int;
    pub const EAGAIN: c_int = -(ofi::FI_EAGAIN as c_int);
    pub const ENOMEM: c_int = -(ofi::FI_ENOMEM as c_int);
    pub const EBUSY: c_int = -(ofi::FI_EBUSY as c_int);
    pub const EINVAL: c_int = -(ofi::FI_EINVAL as c_int);
    pub const ENOSPC: c_int = -(ofi::FI_ENOSPC as c_int);
    pub const ENOSYS: c_int = -(ofi::FI_ENOSYS as c_int);
    pub const ENODATA: c_int = -(ofi::FI_ENODATA as c_int);
    pub const ETIMEDOUT: c_int = -(ofi::FI_ETIMEDOUT as c_int);
    pub const EOTHER: c_int = -(ofi::FI_EOTHER as c_int);
    pub const ETOOSMALL: c_int = -(ofi::FI_ETOOSMALL as c_int);
    pub const EAVAIL: c_int = -(ofi::FI_EAVAIL as c_int);
    pub const EBADFLAGS: c_int = -(ofi::FI_EBADFLAGS as c_int);
    pub const EOPNOTSUPP: c_int = -(ofi::FI_EOPNOTSUPP as c_int);
    pub const ENOENT: c_int = -(ofi::FI_ENOENT as c_int);
}

/// The value an `extern "C"` entry returns when its body panicked.
pub trait PanicValue {
    fn panic_value() -> Self;
}
impl PanicValue for c_int {
    fn panic_value() -> Self {
        err::EOTHER
    }
}
impl PanicValue for isize {
    fn panic_value() -> Self {
        err::EOTHER as isize
    }
}
/// `fi_cntr_read` has no error channel: a panicking read reports 0.
impl PanicValue for u64 {
    fn panic_value() -> Self {
        0
    }
}
impl PanicValue for () {
    fn panic_value() -> Self {}
}
impl<T> PanicValue for *mut T {
    fn panic_value() -> Self {
        std::ptr::null_mut()
    }
}
impl<T> PanicValue for *const T {
    fn panic_value() -> Self {
        std::ptr::null()
    }
}

/// Runs the body of an `extern "C"` function so that no panic unwinds into C: a panic is
/// logged and turned into the return type's [`PanicValue`] (-FI_EOTHER for status codes).
#[macro_export]
macro_rules! ffi_boundary {
    ($($body:tt)*) => {
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| { $($body)* })) {
            Ok(v) => v,
            Err(payload) => {
                $crate::boundary::ffi::report_panic($crate::function_name!(), line!(), payload.as_ref());
                $crate::boundary::ffi::PanicValue::panic_value()
            }
        }
    };
}

/// The status of a core op that must also write its result (an object, an fd) as a
/// `Result`: the core's error, or -FI_EOTHER for a success that wrote nothing usable.
pub fn wrote(ret: c_int, written: bool) -> Result<(), c_int> {
    match ret {
        0 if written => Ok(()),
        0 => Err(err::EOTHER),
        e => Err(e),
    }
}

/// Turns `Result<(), c_int>` style bodies into the C status convention.
pub fn status(r: Result<(), c_int>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e,
    }
}

/// Logs a panic caught by [`ffi_boundary!`] under the name and line of the `extern "C"` entry.
pub fn report_panic(func: &str, line: u32, payload: &(dyn std::any::Any + Send)) {
    let msg = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(non-string panic payload)");
    super::log::log(
        super::log::Level::Warn,
        super::log::Subsys::Core,
        func,
        line,
        format_args!("panic caught at the C boundary, returning an error: {msg}"),
    );
}

/// A Rust object that is handed to C as a fid: `#[repr(C)]` with its libfabric fid struct
/// (which starts with `struct fid`) as the first field.
///
/// # Safety
/// Implementors must be `#[repr(C)]` with a libfabric fid struct at offset 0 whose `struct fid`
/// has `fclass == FCLASS` and `ops == Self::fi_ops()` for every object of the type.
pub unsafe trait FidObject: Sized {
    const FCLASS: u32;
    const NAME: &'static str;
    fn fi_ops() -> *const ofi::fi_ops;
}

/// Open children (domains, EQs, counters) of a fabric or domain; closing a parent with children
/// fails.
#[derive(Debug, Default)]
pub struct Children(AtomicUsize);

impl Children {
    pub fn add(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
    pub fn remove(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
    pub fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

/// A fid that its children keep open: what a child's open checks and counts itself in.
pub trait Parent: FidObject {
    fn children(&self) -> &Children;
}

/// The one pointer check: a non-NULL fid of the right class whose ops table is ours.
///
/// # Safety
/// `fid` must be NULL or point to a readable `struct fid`.
#[inline]
pub unsafe fn object<'a, T: FidObject>(fid: *mut ofi::fid) -> Result<&'a T, c_int> {
    // SAFETY: caller's contract.
    match unsafe { try_object::<T>(fid) } {
        Some(obj) => Ok(obj),
        None => Err(reject::<T>(fid)),
    }
}

/// The refusal of [`object`], out of line: the check itself is on every counter op's path
/// (callgrind: 29 instructions per fi_cntr_read while it was not inlined), the log is not.
#[cold]
#[inline(never)]
fn reject<T: FidObject>(fid: *mut ofi::fid) -> c_int {
    if fid.is_null() {
        crate::fi_warn!(Core, "NULL {} passed", T::NAME);
    } else {
        crate::fi_warn!(Core, "fid {fid:p} is not an rscntr {}", T::NAME);
    }
    err::EINVAL
}

/// [`object`] without the log line, for fids that may legitimately belong to someone else.
///
/// # Safety
/// `fid` must be NULL or point to a readable `struct fid`.
#[inline(always)]
pub unsafe fn try_object<'a, T: FidObject>(fid: *mut ofi::fid) -> Option<&'a T> {
    // SAFETY: NULL or, by the caller's contract, a readable `struct fid`.
    let header = unsafe { fid.as_ref() }?;
    if header.fclass as u32 != T::FCLASS || !std::ptr::eq(header.ops, T::fi_ops()) {
        return None;
    }
    // SAFETY: class and ops table match, so this fid was made by `into_fid::<T>` and, by the
    // FidObject contract, sits at offset 0 of a live `T`.
    Some(unsafe { &*(fid as *const T) })
}

/// Hands a new object to C; it lives until [`release`] takes it back.
pub fn into_fid<T: FidObject>(obj: Box<T>) -> *mut ofi::fid {
    Box::into_raw(obj).cast()
}

/// Takes back an object made by [`into_fid`], to drop it.
///
/// # Safety
/// `obj` must come from [`object`] on a fid made by [`into_fid`], and C must not use it again.
pub unsafe fn release<T: FidObject>(obj: &T) -> Box<T> {
    // SAFETY: the object was leaked from a Box by `into_fid` (caller's contract).
    unsafe { Box::from_raw(obj as *const T as *mut T) }
}

/// The fid array of `fi_trywait`, checked: a non-negative count, a non-NULL array when the
/// count is positive, and no NULL entry (a core's trywait would crash on one).
///
/// # Safety
/// `fids` is NULL or points to `count` fid pointers.
pub unsafe fn fid_array<'a>(
    fids: *mut *mut ofi::fid,
    count: c_int,
) -> Result<&'a [*mut ofi::fid], c_int> {
    if count < 0 || (fids.is_null() && count > 0) {
        crate::fi_warn!(Fabric, "invalid fid array ({count} entries at {fids:p})");
        return Err(err::EINVAL);
    }
    if count == 0 {
        return Ok(&[]);
    }
    // SAFETY: non-NULL and `count` entries long (caller's contract).
    let array = unsafe { std::slice::from_raw_parts(fids, count as usize) };
    if array.iter().any(|f| f.is_null()) {
        crate::fi_warn!(Fabric, "NULL fid in fi_trywait's array");
        return Err(err::EINVAL);
    }
    Ok(array)
}

/// Stores `value` through an out pointer, or fails with -FI_EINVAL on NULL.
///
/// # Safety
/// `out` must be NULL or valid for a write of `T`.
pub unsafe fn write_out<T>(out: *mut T, value: T, what: &str) -> Result<(), c_int> {
    if out.is_null() {
        crate::fi_warn!(Core, "NULL {what} out pointer");
        return Err(err::EINVAL);
    }
    // SAFETY: non-NULL and valid for writes by the caller's contract.
    unsafe { out.write(value) };
    Ok(())
}

// Generic ops for what a fid class does not support. They touch none of their arguments.
pub extern "C" fn no_bind(_: *mut ofi::fid, _: *mut ofi::fid, _: u64) -> c_int {
    err::ENOSYS
}
pub extern "C" fn no_control(_: *mut ofi::fid, _: c_int, _: *mut c_void) -> c_int {
    err::ENOSYS
}
pub extern "C" fn no_ops_open(
    _: *mut ofi::fid,
    _: *const c_char,
    _: u64,
    _: *mut *mut c_void,
    _: *mut c_void,
) -> c_int {
    err::ENOSYS
}
pub extern "C" fn no_tostr(_: *const ofi::fid, _: *mut c_char, _: usize) -> c_int {
    err::ENOSYS
}
pub extern "C" fn no_ops_set(
    _: *mut ofi::fid,
    _: *const c_char,
    _: u64,
    _: *mut c_void,
    _: *mut c_void,
) -> c_int {
    err::ENOSYS
}
/// Fills slots that newer libfabric headers call without `FI_CHECK_OP` (the XPU exports):
/// the SysV ABI lets one pointer-argument stub stand in for each of them.
pub extern "C" fn no_xpu(_: *mut c_void, _: *mut c_void, _: *mut c_void, _: *mut c_void) -> c_int {
    err::ENOSYS
}

/// The fi_ops of a class, with only `close` (and optionally control/ops_open) of its own.
pub const fn fi_ops(
    close: unsafe extern "C" fn(*mut ofi::fid) -> c_int,
    control: unsafe extern "C" fn(*mut ofi::fid, c_int, *mut c_void) -> c_int,
    ops_open: unsafe extern "C" fn(
        *mut ofi::fid,
        *const c_char,
        u64,
        *mut *mut c_void,
        *mut c_void,
    ) -> c_int,
) -> ofi::fi_ops {
    ofi::fi_ops {
        size: std::mem::size_of::<ofi::fi_ops>(),
        close: Some(close),
        bind: Some(no_bind),
        control: Some(control),
        ops_open: Some(ops_open),
        tostr: Some(no_tostr),
        ops_set: Some(no_ops_set),
    }
}

/// A `struct fid` header for a new object.
pub fn fid_header(fclass: u32, context: *mut c_void, ops: &'static ofi::fi_ops) -> ofi::fid {
    ofi::fid {
        fclass: fclass as usize,
        context,
        ops: ops as *const _ as *mut _,
    }
}

/// The bytes of an iovec array (the remote length of a `readv`/`writev`, the length of a
/// `writemsg`, the size of a send).
///
/// # Safety
/// `iov` holds `count` elements (or is NULL, or `count` is 0).
pub unsafe fn iov_len(iov: *const libc::iovec, count: usize) -> usize {
    if iov.is_null() || count == 0 {
        return 0;
    }
    // SAFETY: caller's contract.
    unsafe { std::slice::from_raw_parts(iov, count) }
        .iter()
        .map(|v| v.iov_len)
        .sum()
}

/// Copies `orig` (NULL: an all-None table) into a table of rscntr's.
///
/// # Safety
/// `orig` is NULL or a valid table.
pub unsafe fn copy_table<T: Copy + Default>(orig: *const T) -> T {
    // SAFETY: caller's contract.
    unsafe { orig.as_ref() }.copied().unwrap_or_default()
}

/// A copy of an endpoint's data tables (message, tagged, RMA, atomic) that rscntr points the
/// endpoint at with [`point_data_tables`].
pub struct DataTables {
    pub msg: *mut ofi::fi_ops_msg,
    pub tagged: *mut ofi::fi_ops_tagged,
    pub rma: *mut ofi::fi_ops_rma,
    pub atomic: *mut ofi::fi_ops_atomic,
}

/// Points the data tables `ep` has at `ours` (a table it lacks stays NULL).
///
/// # Safety
/// `ep` is an open endpoint nobody else uses yet; `ours` outlive its use of them.
pub unsafe fn point_data_tables(ep: *mut ofi::fid_ep, ours: DataTables) {
    // SAFETY: caller's contract.
    let e = unsafe { &mut *ep };
    if !e.msg.is_null() {
        e.msg = ours.msg;
    }
    if !e.tagged.is_null() {
        e.tagged = ours.tagged;
    }
    if !e.rma.is_null() {
        e.rma = ours.rma;
    }
    if !e.atomic.is_null() {
        e.atomic = ours.atomic;
    }
}

/// Replaces entries of a copied ops table with rscntr's, only where the table has the op: a
/// missing one stays missing.
macro_rules! ours_where_the_core_has {
    ($($slot:expr => $f:expr),* $(,)?) => {
        $(if $slot.is_some() {
            $slot = Some($f);
        })*
    };
}
pub(crate) use ours_where_the_core_has;
