//! `FI_RSCNTR_*` run-time parameters, declared to libfabric so `fi_info -e` lists them.

use super::provider;
use super::statics::Released;
use crate::ofi;
use std::ffi::{CStr, c_int};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// FI_RSCNTR_SPIN: how many doubling spin phases a waiter runs before it yields (YIELD) or
/// sleeps (UNSPEC, FD).
const SPIN: &CStr = c"spin";
pub const SPIN_MAX: u32 = 16;
static SPIN_LIMIT: AtomicU32 = AtomicU32::new(crate::engine::backoff::DEFAULT_SPIN_LIMIT);

/// FI_RSCNTR_HW: whether counters use rdma-core completion counters.
const HW: &CStr = c"hw";
/// FI_RSCNTR_DEVICE: which RDMA device.
const DEVICE: &CStr = c"device";
/// FI_RSCNTR_VERBS_LIB: the libibverbs to dlopen.
const VERBS_LIB: &CStr = c"verbs_lib";
/// FI_RSCNTR_HW_POLL_US: the cap of the poll interval on hardware counters.
const HW_POLL_US: &CStr = c"hw_poll_us";
/// FI_RSCNTR_CORE: the core provider rscntr layers over.
const CORE: &CStr = c"core";
/// FI_RSCNTR_SHM_BELL: whether waits over shm sleep on rscntr's doorbell.
const SHM_BELL: &CStr = c"shm_bell";
static SHM_BELL_ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);
/// FI_RSCNTR_FLAT_WAITS: whether a room's leader sleeps in one epoll set of its members' leaves.
const FLAT_WAITS: &CStr = c"flat_waits";
static FLAT_WAITS_ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);
/// FI_RSCNTR_FAKE_VERBS: testing only; a fake device instead of libibverbs.
const FAKE_VERBS: &CStr = c"fake_verbs";

pub const DEFAULT_VERBS_LIB: &str = "libibverbs.so.1";
pub const HW_POLL_US_MAX: u32 = 10_000;

/// `FI_RSCNTR_HW`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HwPolicy {
    /// Hardware where a device has counters, software otherwise and per counter on failure.
    Auto,
    /// Software counters only; libibverbs is not even loaded.
    Off,
    /// Hardware counters only: fi_cntr_open fails when none can be had.
    On,
}

/// Parameters read once, in fi_prov_ini (reading is a getenv: cheap).
#[derive(Debug)]
pub struct HwParams {
    pub policy: HwPolicy,
    pub device: Option<String>,
    pub verbs_lib: String,
    pub poll_max: Duration,
    pub fake: Option<String>,
}

static HW_PARAMS: Released<HwParams> = Released::new();

/// How a parameter is declared to libfabric, which is what `fi_info -e` prints as its type
/// ("String", "Integer", "Boolean (0/1, on/off, true/false, yes/no)") and how it is read.
#[derive(Clone, Copy)]
enum Kind {
    Str,
    Int,
    Bool,
}

fn define_one(name: &CStr, kind: Kind, help: &CStr) {
    let ty = match kind {
        Kind::Str => ofi::fi_param_type_FI_PARAM_STRING,
        Kind::Int => ofi::fi_param_type_FI_PARAM_INT,
        Kind::Bool => ofi::fi_param_type_FI_PARAM_BOOL,
    };
    // SAFETY: the provider record fi_prov_ini registered; name and help are NUL-terminated and
    // the help text has no conversion specifiers.
    unsafe { ofi::fi_param_define(provider::provider_ptr(), name.as_ptr(), ty, help.as_ptr()) };
}

pub fn define() {
    define_one(
        SPIN,
        Kind::Int,
        c"Spin phases (0-16; each doubles the spin count, 6 is about 1 us) a thread in \
          fi_cntr_wait runs before it yields (FI_WAIT_YIELD) or sleeps (FI_WAIT_UNSPEC, \
          FI_WAIT_FD). Default 6.",
    );
    define_one(
        HW,
        Kind::Str,
        c"Back counters with rdma-core completion counters: auto (hardware where a device \
          reports them, software otherwise and whenever a hardware counter cannot be \
          created), off (software only), on (hardware only: fi_cntr_open fails without). \
          Default auto.",
    );
    define_one(
        DEVICE,
        Kind::Str,
        c"RDMA device for hardware counters (e.g. rdmap0s6). Default: the first device that \
          reports completion counters.",
    );
    define_one(
        VERBS_LIB,
        Kind::Str,
        c"libibverbs to load at run time for hardware counters (a soname or a path). \
          Default libibverbs.so.1.",
    );
    define_one(
        HW_POLL_US,
        Kind::Int,
        c"Longest pause, in microseconds (1-10000), between two polls of a hardware counter \
          by a waiting thread or the fd watcher: the device signals nothing, so this bounds \
          how late a waiter sees a change. Default 100.",
    );
    define_one(
        CORE,
        Kind::Str,
        c"Core provider rscntr layers over: a provider name or a layering such as \
          'tcp;ofi_rxm'; 'none' serves counters only, without endpoints; unset or 'auto' \
          picks the first of efa, verbs;ofi_rxm, tcp;ofi_rxm, tcp, shm, udp;ofi_rxd, sockets \
          that answers the application's hints.",
    );
    define_one(
        SHM_BELL,
        Kind::Bool,
        c"Waits on counters bound over shm sleep in the kernel and are woken by the rscntr \
          peer that completes an operation toward them (rscntr's doorbell): on or off \
          (they then yield between progress calls, as shm's own waits do). Default on.",
    );
    define_one(
        FLAT_WAITS,
        Kind::Bool,
        c"When threads wait on several counters of one domain whose core gives a wait set per \
          counter (tcp;ofi_rxm, udp;ofi_rxd), the one that sleeps for all of them sleeps in \
          one epoll set of what those wait sets hold (read from /proc/self/fdinfo) instead \
          of polling them all: on or off. Default on.",
    );
    define_one(
        FAKE_VERBS,
        Kind::Str,
        c"Testing only: use rscntr's fake RDMA device instead of libibverbs, configured by \
          key=value pairs (see src/verbs/fake.rs).",
    );
    SPIN_LIMIT.store(
        read_int(SPIN, 0..=SPIN_MAX as c_int)
            .map_or(crate::engine::backoff::DEFAULT_SPIN_LIMIT, |v| v as u32),
        Ordering::Relaxed,
    );
    SHM_BELL_ON.store(
        read_on_off(SHM_BELL, "FI_RSCNTR_SHM_BELL"),
        Ordering::Relaxed,
    );
    FLAT_WAITS_ON.store(
        read_on_off(FLAT_WAITS, "FI_RSCNTR_FLAT_WAITS"),
        Ordering::Relaxed,
    );
    let policy = match read_str(HW).as_deref().map(str::trim) {
        None | Some("") | Some("auto") => HwPolicy::Auto,
        Some("off") => HwPolicy::Off,
        Some("on") => HwPolicy::On,
        Some(other) => {
            crate::fi_warn_user!(
                Core,
                "FI_RSCNTR_HW = {other:?} is not auto, off or on; using the default (auto)"
            );
            HwPolicy::Auto
        }
    };
    let poll_us = read_int(HW_POLL_US, 1..=HW_POLL_US_MAX as c_int)
        .map_or(crate::engine::DEFAULT_POLL_MAX, |v| {
            Duration::from_micros(v as u64)
        });
    HW_PARAMS.set_if_unset(HwParams {
        policy,
        device: read_str(DEVICE).filter(|s| !s.trim().is_empty()),
        verbs_lib: read_str(VERBS_LIB)
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_VERBS_LIB.into()),
        poll_max: poll_us,
        fake: read_str(FAKE_VERBS).filter(|s| !s.trim().is_empty()),
    });
}

/// `FI_RSCNTR_SHM_BELL` (on unless set off).
pub fn shm_bell() -> bool {
    SHM_BELL_ON.load(Ordering::Relaxed)
}

/// `FI_RSCNTR_FLAT_WAITS` (on unless set off).
pub fn flat_waits() -> bool {
    FLAT_WAITS_ON.load(Ordering::Relaxed)
}

/// An on/off parameter (declared FI_PARAM_BOOL: libfabric takes 0/1, on/off, true/false,
/// yes/no) that defaults to on; a value that is none of those is logged and ignored.
fn read_on_off(name: &CStr, var: &str) -> bool {
    let mut value: c_int = 1;
    // SAFETY: the parameter was defined as FI_PARAM_BOOL, so libfabric writes one int, or
    // leaves it untouched when the variable is unset or not a boolean.
    let ret = unsafe {
        ofi::fi_param_get(
            provider::provider_ptr(),
            name.as_ptr(),
            (&mut value as *mut c_int).cast(),
        )
    };
    if ret == super::ffi::err::EINVAL {
        let text = std::env::var(var).unwrap_or_default();
        crate::fi_warn_user!(
            Core,
            "{var} = {text:?} is not on or off; using the default (on)"
        );
        return true;
    }
    ret != 0 || value != 0
}

pub fn spin_limit() -> u32 {
    SPIN_LIMIT.load(Ordering::Relaxed)
}

/// The hardware parameters (the defaults before fi_prov_ini, i.e. in cargo's own tests).
pub fn hw() -> Arc<HwParams> {
    HW_PARAMS.get_or_init(|| HwParams {
        policy: HwPolicy::Auto,
        device: None,
        verbs_lib: DEFAULT_VERBS_LIB.into(),
        poll_max: crate::engine::DEFAULT_POLL_MAX,
        fake: None,
    })
}

/// Reads a string parameter; `None` when unset.
fn read_str(name: &CStr) -> Option<String> {
    let mut value: *mut std::ffi::c_char = std::ptr::null_mut();
    // SAFETY: the parameter was defined as FI_PARAM_STRING, so libfabric writes one char *
    // (which it owns) or leaves it untouched when the variable is unset.
    let ret = unsafe {
        ofi::fi_param_get(
            provider::provider_ptr(),
            name.as_ptr(),
            (&mut value as *mut *mut std::ffi::c_char).cast(),
        )
    };
    if ret != 0 || value.is_null() {
        return None;
    }
    // SAFETY: non-NULL C string from libfabric's parameter table.
    Some(
        unsafe { CStr::from_ptr(value) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// Reads an integer parameter (declared FI_PARAM_INT); `None` when unset, or when the value is
/// outside `range` or not an integer, both reported. libfabric's own parsing (`strtol`) turns
/// "abc" into 0 and "5x" into 5, so the variable's text is checked as well.
fn read_int(name: &CStr, range: std::ops::RangeInclusive<c_int>) -> Option<c_int> {
    let var = format!("FI_RSCNTR_{}", name.to_string_lossy().to_uppercase());
    let mut value: c_int = 0;
    // SAFETY: the parameter was defined as FI_PARAM_INT, so libfabric writes one int, or leaves
    // it untouched when the variable is unset.
    let ret = unsafe {
        ofi::fi_param_get(
            provider::provider_ptr(),
            name.as_ptr(),
            (&mut value as *mut c_int).cast(),
        )
    };
    if ret != 0 {
        return None;
    }
    // The text is the environment's (libfabric 2.x may also take it from its config file, whose
    // value then stands as libfabric parsed it).
    if let Ok(text) = std::env::var(&var)
        && text.trim().parse::<c_int>().is_err()
    {
        crate::fi_warn_user!(
            Core,
            "{var} = {text:?} is not an integer; using the default"
        );
        return None;
    }
    if !range.contains(&value) {
        crate::fi_warn_user!(
            Core,
            "{var} = {value} is outside {range:?}; using the default"
        );
        return None;
    }
    Some(value)
}

/// Gives back what [`define`] allocated (provider cleanup, before libfabric unloads rscntr).
pub fn release() {
    HW_PARAMS.release();
}

/// The FI_RSCNTR_CORE setting, read at each use (fi_getinfo) so tests can change it.
pub fn core() -> Option<String> {
    read_str(CORE)
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}
