//! A counter's attributes: what of `fi_cntr_attr` rscntr accepts.

use crate::boundary::ffi::err;
use crate::engine::WaitStrategy;
use crate::{fi_warn, ofi};
use std::ffi::c_int;

/// `FI_XPU` (bit 44) from libfabric 2.7's headers, where `fi_cntr_attr` also grows `xpu_ctx`.
pub const FI_XPU: u64 = 1 << 44;

/// The parts of `fi_cntr_attr` rscntr accepts, validated.
pub struct Config {
    pub events: ofi::fi_cntr_events,
    pub wait_obj: ofi::fi_wait_obj,
    pub strategy: WaitStrategy,
}

/// Validates an application's counter attributes. Reads only the 2.1 fields (24 bytes): older
/// applications pass the smaller struct, and `xpu_ctx` exists only with FI_XPU, refused here.
pub fn parse_attr(attr: Option<&ofi::fi_cntr_attr>) -> Result<Config, c_int> {
    let Some(attr) = attr else {
        // NULL attr: the defaults libfabric documents for an all-zero attr, but waitable.
        return Ok(Config {
            events: ofi::fi_cntr_events_FI_CNTR_EVENTS_COMP,
            wait_obj: ofi::fi_wait_obj_FI_WAIT_UNSPEC,
            strategy: WaitStrategy::Block,
        });
    };
    if attr.flags & FI_XPU != 0 {
        fi_warn!(Cntr, "FI_XPU counters are not supported");
        return Err(err::ENOSYS);
    }
    if attr.flags & ofi::FI_PEER != 0 {
        fi_warn!(Cntr, "FI_PEER counters are not supported");
        return Err(err::ENOSYS);
    }
    if attr.flags != 0 {
        fi_warn!(Cntr, "unknown counter flags {:#x}", attr.flags);
        return Err(err::EINVAL);
    }
    match attr.events {
        ofi::fi_cntr_events_FI_CNTR_EVENTS_COMP | ofi::fi_cntr_events_FI_CNTR_EVENTS_BYTES => {}
        other => {
            fi_warn!(Cntr, "unknown counter events {other}");
            return Err(err::EINVAL);
        }
    }
    let strategy = match attr.wait_obj {
        ofi::fi_wait_obj_FI_WAIT_NONE => WaitStrategy::None,
        ofi::fi_wait_obj_FI_WAIT_UNSPEC => WaitStrategy::Block,
        ofi::fi_wait_obj_FI_WAIT_YIELD => WaitStrategy::Yield,
        ofi::fi_wait_obj_FI_WAIT_FD => WaitStrategy::Fd,
        ofi::fi_wait_obj_FI_WAIT_SET if attr.wait_set.is_null() => {
            fi_warn!(Cntr, "FI_WAIT_SET without a wait set");
            return Err(err::EINVAL);
        }
        ofi::fi_wait_obj_FI_WAIT_SET | ofi::fi_wait_obj_FI_WAIT_MUTEX_COND => {
            fi_warn!(
                Cntr,
                "wait object {} is deprecated and not supported; use FI_WAIT_FD, \
                            FI_WAIT_YIELD or FI_WAIT_UNSPEC",
                attr.wait_obj
            );
            return Err(err::ENOSYS);
        }
        ofi::fi_wait_obj_FI_WAIT_POLLFD => {
            fi_warn!(Cntr, "FI_WAIT_POLLFD is not supported; use FI_WAIT_FD");
            return Err(err::ENOSYS);
        }
        other => {
            fi_warn!(Cntr, "unknown wait object {other}");
            return Err(err::EINVAL);
        }
    };
    Ok(Config {
        events: attr.events,
        wait_obj: attr.wait_obj,
        strategy,
    })
}
