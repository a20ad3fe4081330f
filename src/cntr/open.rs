//! Opening a counter in its home: attributes checked, backing chosen (`hw.rs`), a `cntr_cnt`
//! slot claimed, the fid made.

use super::attr::{Config, parse_attr};
use super::fid::Cntr;
use super::home::CntrHome;
use super::hw::{self, Choice};
use super::ops::Tables;
use crate::boundary::ffi::{self, err};
use crate::boundary::params;
use crate::boundary::testhook::{self, Op};
use crate::engine::{Counter, Tuning};
use crate::{fi_info, fi_warn, ofi};
use std::ffi::{c_int, c_void};

/// Opens a counter in `home` (a standalone or a layered domain).
///
/// # Safety
/// `attr` NULL or an application's attr; `cntr` NULL or an out pointer; `home` outlives the
/// counter (the domain refuses to close while it has children).
pub unsafe fn open_in(
    home: &dyn CntrHome,
    attr: *mut ofi::fi_cntr_attr,
    cntr: *mut *mut ofi::fid_cntr,
    context: *mut c_void,
) -> c_int {
    if cntr.is_null() {
        fi_warn!(Cntr, "NULL counter out pointer");
        return err::EINVAL;
    }
    // SAFETY: NULL or the application's attr, of at least the 2.1 size (see parse_attr).
    let config = match parse_attr(unsafe { attr.as_ref() }) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let choice = match hw::choose(config.events) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let slot = match home.slots().claim_slot() {
        Ok(slot) => slot,
        Err(e) => return e,
    };
    // The test hook panics with the slot claimed: the guard must give it back.
    testhook::panic(Op::CntrOpen);
    let fid = match choice {
        Choice::Software => Counter::with_spin_limit(config.strategy, params::spin_limit())
            .and_then(|engine| new_fid(home, &config, context, engine)),
        Choice::Hardware(store) => {
            let tuning = Tuning {
                spin_limit: params::spin_limit(),
                poll_max: params::hw().poll_max,
            };
            let device = store.device().name().to_owned();
            Counter::with_store(store, config.strategy, tuning).and_then(|engine| {
                fi_info!(Cntr, "hardware counter on {device}");
                new_fid(home, &config, context, engine)
            })
        }
    };
    match fid {
        Ok(fid) => {
            slot.keep();
            // SAFETY: non-NULL out pointer checked above.
            unsafe { *cntr = fid.cast() };
            0
        }
        Err(e) => {
            drop(slot);
            fi_warn!(Cntr, "cannot create the counter's eventfd or watcher: {e}");
            -e.raw_os_error().unwrap_or(ofi::FI_ENOMEM as i32)
        }
    }
}

fn new_fid<B: Tables>(
    home: &dyn CntrHome,
    config: &Config,
    context: *mut c_void,
    engine: B,
) -> std::io::Result<*mut ofi::fid> {
    let wait_fd = match engine.counter().fd() {
        Some(fd) => home.wait_fd(fd)?,
        None => None,
    };
    let fid = ofi::fid_cntr {
        fid: ffi::fid_header(ofi::FI_CLASS_CNTR, context, B::fi_ops()),
        ops: B::ops() as *const _ as *mut _,
    };
    let obj = Cntr::boxed(fid, home, config, wait_fd, B::owner_ops(), engine);
    fi_info!(
        Cntr,
        "opened a {:?} counter (events {}, wait object {}{})",
        B::BACKEND,
        config.events,
        config.wait_obj,
        if home.over_core() { ", layered" } else { "" }
    );
    Ok(ffi::into_fid(obj))
}
