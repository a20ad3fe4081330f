//! When counters are backed by hardware: the `FI_RSCNTR_HW` policy, detection (once per
//! process, at the first domain or counter open, never in fi_prov_ini), per-counter fallback,
//! errno mapping, and the log lines that say why hardware was or was not used.

use super::home::MAX_CNTRS;
use crate::boundary::ffi::err;
use crate::boundary::params::{self, HwPolicy};
use crate::boundary::statics::Released;
use crate::verbs::fake::{self, FakeConfig};
use crate::verbs::{self, CounterKind, Device, HwCounter, LoadError};
use crate::{fi_info, fi_warn, ofi};
use std::ffi::c_int;
use std::sync::Arc;

/// What detection found.
#[derive(Debug)]
pub enum HwState {
    /// FI_RSCNTR_HW=off: nothing was loaded.
    Off,
    /// No libibverbs could be loaded.
    NoLibrary(String),
    /// libibverbs has no completion counters (rdma-core < 65).
    NoCounterApi(String),
    /// The counter API is there but no device reports counters.
    NoDevice(String),
    /// Counters can be created on this device.
    Available(Arc<Device>),
}

impl HwState {
    fn why_not(&self) -> Option<&str> {
        match self {
            HwState::Off => Some("FI_RSCNTR_HW=off"),
            HwState::NoLibrary(s) | HwState::NoCounterApi(s) | HwState::NoDevice(s) => Some(s),
            HwState::Available(_) => None,
        }
    }
}

static STATE: Released<HwState> = Released::new();

/// Gives back the detection result (provider cleanup, before libfabric unloads rscntr).
pub fn release() {
    STATE.release();
}

/// The detection result, detecting on first call.
pub fn state() -> Arc<HwState> {
    STATE.get_or_init(|| {
        let state = detect();
        let policy = params::hw().policy;
        match &state {
            HwState::Available(d) => {
                let c = d.caps();
                fi_info!(
                    Core,
                    "hardware counters available: device {} via {} (max_counters {}, max_value \
                     {:#x}, attach ops {:#x}); FI_RSCNTR_HW={}",
                    d.name(),
                    d.api().origin,
                    c.max_counters,
                    c.max_value,
                    c.supported_qp_attach_ops,
                    format!("{policy:?}").to_lowercase()
                );
            }
            HwState::Off => fi_info!(Core, "FI_RSCNTR_HW=off: counters are software"),
            other if policy == HwPolicy::On => fi_warn!(
                Core,
                "FI_RSCNTR_HW=on but no hardware counters: {}; every fi_cntr_open will fail",
                other.why_not().unwrap_or_default()
            ),
            other => fi_info!(
                Core,
                "no hardware counters: {}; counters are software",
                other.why_not().unwrap_or_default()
            ),
        }
        state
    })
}

fn detect() -> HwState {
    let p = params::hw();
    if p.policy == HwPolicy::Off {
        return HwState::Off;
    }
    let api = if let Some(cfg) = &p.fake {
        match FakeConfig::parse(cfg) {
            Ok(c) => {
                fi_warn!(
                    Core,
                    "FI_RSCNTR_FAKE_VERBS is set: using the fake RDMA device (testing only)"
                );
                fake::install(c)
            }
            Err(e) => {
                fi_warn!(Core, "FI_RSCNTR_FAKE_VERBS={cfg:?}: {e}");
                return HwState::NoLibrary(format!("FI_RSCNTR_FAKE_VERBS is invalid: {e}"));
            }
        }
    } else {
        match verbs::load(&p.verbs_lib) {
            Ok(api) => api,
            Err(e @ (LoadError::NoLibrary(_) | LoadError::NotVerbs(_))) => {
                return HwState::NoLibrary(e.to_string());
            }
            Err(e @ LoadError::NoCounterApi(_)) => return HwState::NoCounterApi(e.to_string()),
        }
    };
    match Device::open(api, p.device.as_deref()) {
        Ok(d) => HwState::Available(d),
        Err(why) => HwState::NoDevice(format!("{}: {why}", api.origin)),
    }
}

/// `domain_attr->cntr_cnt` and `max_cntr_value` to advertise. With FI_RSCNTR_HW=on every
/// counter is on the device, so its limits are the domain's (this detects, in getinfo); in auto
/// a counter the device cannot hold falls back to software, so software limits hold, and
/// detection waits for the first domain.
pub fn advertised_limits() -> (usize, u64) {
    if params::hw().policy == HwPolicy::On
        && let HwState::Available(d) = &*state()
    {
        let c = d.caps();
        return (MAX_CNTRS.min(c.max_counters as usize), c.max_value);
    }
    (MAX_CNTRS, u64::MAX)
}

/// libfabric's code for an errno from rdma-core (the FI_E* values for these are the errnos).
pub fn fi_errno(errno: i32) -> c_int {
    match errno {
        libc::EPERM
        | libc::ENOENT
        | libc::EINTR
        | libc::EIO
        | libc::EAGAIN
        | libc::ENOMEM
        | libc::EACCES
        | libc::EBUSY
        | libc::ENODEV
        | libc::EINVAL
        | libc::ENOSPC
        | libc::EOPNOTSUPP => -errno,
        // What an old kernel or a provider without the ops answers.
        libc::ENOSYS | libc::EPROTONOSUPPORT | libc::ENOTTY => err::ENOSYS,
        _ => err::EOTHER,
    }
}

/// What backs a new counter.
pub enum Choice {
    Software,
    Hardware(HwCounter),
}

/// Chooses the backing of a counter counting `events`, per FI_RSCNTR_HW. `Err` (only with
/// `on`) is the -FI_E* for fi_cntr_open, already logged.
pub fn choose(events: ofi::fi_cntr_events) -> Result<Choice, c_int> {
    let policy = params::hw().policy;
    if policy == HwPolicy::Off {
        return Ok(Choice::Software);
    }
    let kind = if events == ofi::fi_cntr_events_FI_CNTR_EVENTS_BYTES {
        CounterKind::Bytes
    } else {
        CounterKind::Wrs
    };
    let state = state();
    let dev = match &*state {
        HwState::Available(d) => d,
        other => {
            let why = other.why_not().unwrap_or_default();
            if policy == HwPolicy::On {
                fi_warn!(Cntr, "FI_RSCNTR_HW=on but no hardware counters: {why}");
                return Err(-(ofi::FI_ENODEV as c_int));
            }
            fi_info!(Cntr, "software counter: {why}");
            return Ok(Choice::Software);
        }
    };
    let max = dev.caps().max_value;
    if policy == HwPolicy::Auto && max != u64::MAX {
        // getinfo advertised max_cntr_value = UINT64_MAX without detecting (auto): a counter
        // that wraps earlier would break that promise. FI_RSCNTR_HW=on advertises the device's.
        fi_info!(
            Cntr,
            "software counter: {} wraps at max_value {max:#x}, below the advertised \
             max_cntr_value UINT64_MAX (FI_RSCNTR_HW=on advertises the device's limits)",
            dev.name()
        );
        return Ok(Choice::Software);
    }
    match dev.create_counter(kind) {
        Ok(c) => Ok(Choice::Hardware(c)),
        Err(e) if policy == HwPolicy::On => {
            fi_warn!(
                Cntr,
                "FI_RSCNTR_HW=on: no hardware {kind} counter on {}: {e}",
                dev.name()
            );
            Err(fi_errno(e.errno))
        }
        Err(e) => {
            fi_info!(
                Cntr,
                "software counter: no hardware {kind} counter on {}: {e}",
                dev.name()
            );
            Ok(Choice::Software)
        }
    }
}
