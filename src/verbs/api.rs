//! The one table every rdma-core call goes through, and loading it from libibverbs at run time.
//!
//! rscntr never links libibverbs: the same `librscntr-fi.so` must load where libibverbs is
//! absent, where it predates completion counters (rdma-core < 65) and where it has them. So the
//! library is `dlopen`ed on first use and each function looked up with plain `dlsym` (not
//! `dlvsym`: a vendor backport may export the symbols under another version node). Tests put a
//! fake device behind the same table (`super::fake`).

use super::abi::{
    IbvCompCntr, IbvCompCntrCaps, IbvCompCntrInitAttr, IbvContext, IbvDevice, IbvQp,
    IbvQpAttachCompCntrAttr,
};
use std::ffi::{CStr, CString, c_char, c_int, c_void};

/// rdma-core's entry points, as function pointers. Return conventions are rdma-core's:
/// `create_comp_cntr` returns NULL and sets `errno`; the other counter calls return 0 or an
/// errno value (never -1).
#[derive(Clone, Copy, Debug)]
pub struct VerbsApi {
    /// Where the table came from (a library path, or "fake"), for log lines.
    pub origin: &'static str,
    pub get_device_list: unsafe extern "C" fn(num_devices: *mut c_int) -> *mut *mut IbvDevice,
    pub free_device_list: unsafe extern "C" fn(list: *mut *mut IbvDevice),
    pub get_device_name: unsafe extern "C" fn(device: *mut IbvDevice) -> *const c_char,
    pub open_device: unsafe extern "C" fn(device: *mut IbvDevice) -> *mut IbvContext,
    pub close_device: unsafe extern "C" fn(context: *mut IbvContext) -> c_int,
    /// `_ibv_query_comp_cntr_caps(ctx, caps, sizeof(*caps))`: the public
    /// `ibv_query_comp_cntr_caps` is a header inline around it.
    pub query_comp_cntr_caps:
        unsafe extern "C" fn(*mut IbvContext, *mut IbvCompCntrCaps, usize) -> c_int,
    pub create_comp_cntr:
        unsafe extern "C" fn(*mut IbvContext, *mut IbvCompCntrInitAttr) -> *mut IbvCompCntr,
    pub destroy_comp_cntr: unsafe extern "C" fn(*mut IbvCompCntr) -> c_int,
    pub set_comp_cntr: unsafe extern "C" fn(*mut IbvCompCntr, u64) -> c_int,
    pub set_err_comp_cntr: unsafe extern "C" fn(*mut IbvCompCntr, u64) -> c_int,
    pub inc_comp_cntr: unsafe extern "C" fn(*mut IbvCompCntr, u64) -> c_int,
    pub inc_err_comp_cntr: unsafe extern "C" fn(*mut IbvCompCntr, u64) -> c_int,
    pub read_comp_cntr: unsafe extern "C" fn(*mut IbvCompCntr, *mut u64) -> c_int,
    pub read_err_comp_cntr: unsafe extern "C" fn(*mut IbvCompCntr, *mut u64) -> c_int,
    pub qp_attach_comp_cntr:
        unsafe extern "C" fn(*mut IbvQp, *mut IbvCompCntr, *mut IbvQpAttachCompCntrAttr) -> c_int,
}

/// Why no table could be loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// `dlopen` failed: no libibverbs (or not loadable).
    NoLibrary(String),
    /// The library lacks a basic verbs symbol: not a libibverbs at all.
    NotVerbs(String),
    /// The library is a libibverbs without completion counters (rdma-core < 65).
    NoCounterApi(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::NoLibrary(s) | LoadError::NotVerbs(s) | LoadError::NoCounterApi(s) => {
                f.write_str(s)
            }
        }
    }
}

/// The completion counter symbols, all required: rdma-core 65 added them together.
pub const COUNTER_SYMBOLS: [&str; 10] = [
    "_ibv_query_comp_cntr_caps",
    "ibv_create_comp_cntr",
    "ibv_destroy_comp_cntr",
    "ibv_set_comp_cntr",
    "ibv_set_err_comp_cntr",
    "ibv_inc_comp_cntr",
    "ibv_inc_err_comp_cntr",
    "ibv_read_comp_cntr",
    "ibv_read_err_comp_cntr",
    "ibv_qp_attach_comp_cntr",
];

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a thread-local C string valid until the next dl* call.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-NULL C string from dlerror, copied at once.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

struct Lib {
    handle: *mut c_void,
}

impl Lib {
    fn sym(&self, name: &str) -> Option<*mut c_void> {
        let cname = CString::new(name).ok()?;
        // SAFETY: a live handle from dlopen and a NUL-terminated name.
        let p = unsafe { libc::dlsym(self.handle, cname.as_ptr()) };
        (!p.is_null()).then_some(p)
    }
}

/// Loads the table from the library `name` (a soname such as `libibverbs.so.1`, or a path).
/// On success the library stays loaded for the life of the process (the table is `'static`).
pub fn load(name: &str) -> Result<&'static VerbsApi, LoadError> {
    let cname =
        CString::new(name).map_err(|_| LoadError::NoLibrary(format!("{name:?}: bad name")))?;
    // SAFETY: a NUL-terminated name; RTLD_LOCAL keeps its symbols out of the global scope, and
    // an instance libfabric's own verbs provider loaded already is shared, as it should be.
    let handle = unsafe { libc::dlopen(cname.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(LoadError::NoLibrary(format!(
            "cannot load {name}: {}",
            dlerror()
        )));
    }
    let lib = Lib { handle };
    let close = |e: LoadError| {
        // SAFETY: the handle is ours and nothing from it was called or kept.
        unsafe { libc::dlclose(lib.handle) };
        Err(e)
    };
    let base = [
        "ibv_get_device_list",
        "ibv_free_device_list",
        "ibv_get_device_name",
        "ibv_open_device",
        "ibv_close_device",
    ];
    if let Some(missing) = base.iter().find(|s| lib.sym(s).is_none()) {
        return close(LoadError::NotVerbs(format!(
            "{name} has no {missing}: not a libibverbs"
        )));
    }
    let missing: Vec<&str> = COUNTER_SYMBOLS
        .iter()
        .copied()
        .filter(|s| lib.sym(s).is_none())
        .collect();
    if !missing.is_empty() {
        return close(LoadError::NoCounterApi(format!(
            "{name} has no completion counters (rdma-core < 65; missing {} of {} symbols, e.g. {})",
            missing.len(),
            COUNTER_SYMBOLS.len(),
            missing[0]
        )));
    }
    macro_rules! f {
        ($name:literal) => {{
            let p = lib.sym($name).expect("checked above");
            // SAFETY: `p` is rdma-core's exported function of that name, whose C prototype the
            // field's type mirrors (see abi.rs and the notes on rdma-core 65's verbs.h).
            unsafe { fn_ptr(p) }
        }};
    }
    let api = VerbsApi {
        origin: Box::leak(name.to_owned().into_boxed_str()),
        get_device_list: f!("ibv_get_device_list"),
        free_device_list: f!("ibv_free_device_list"),
        get_device_name: f!("ibv_get_device_name"),
        open_device: f!("ibv_open_device"),
        close_device: f!("ibv_close_device"),
        query_comp_cntr_caps: f!("_ibv_query_comp_cntr_caps"),
        create_comp_cntr: f!("ibv_create_comp_cntr"),
        destroy_comp_cntr: f!("ibv_destroy_comp_cntr"),
        set_comp_cntr: f!("ibv_set_comp_cntr"),
        set_err_comp_cntr: f!("ibv_set_err_comp_cntr"),
        inc_comp_cntr: f!("ibv_inc_comp_cntr"),
        inc_err_comp_cntr: f!("ibv_inc_err_comp_cntr"),
        read_comp_cntr: f!("ibv_read_comp_cntr"),
        read_err_comp_cntr: f!("ibv_read_err_comp_cntr"),
        qp_attach_comp_cntr: f!("ibv_qp_attach_comp_cntr"),
    };
    // The handle is never closed: the table's pointers live as long as the process.
    Ok(Box::leak(Box::new(api)))
}

/// Turns a `dlsym` result into the function pointer type `T`.
///
/// # Safety
/// `p` must be a function whose C prototype is `T`'s.
unsafe fn fn_ptr<T: Copy>(p: *mut c_void) -> T {
    const { assert!(std::mem::size_of::<T>() == std::mem::size_of::<*mut c_void>()) };
    // SAFETY: same size (checked above); the caller vouches for the prototype.
    unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) }
}
