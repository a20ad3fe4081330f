//! rscntr over a core provider: every object but the counter is the core's own, handed to the
//! application unchanged except for the few ops rscntr interposes on (opening domains,
//! endpoints and MRs, binding counters, closing, fi_trywait). Data operations go straight to
//! the core: no call on the data path passes through rscntr, except on endpoints opened with
//! FI_TRIGGER, whose `*msg` calls test one flag and whose CQs are read through a filter
//! (`trigger/`).
//!
//! Counters are rscntr's. When one is bound to a core endpoint or MR, rscntr opens a core
//! counter with FI_PEER whose `fid_peer_cntr` is the rscntr counter, so every completion the
//! core would count increments the rscntr counter directly (libfabric's peer API).
//!
//! The files here are the interposition on the core, on top: opening, binding and closing
//! through the core. Each capability rscntr adds over a core has a folder of its own below
//! them, which imports nothing of the files here (`tests/layout.rs` keeps it so; the
//! interposition lends them what they need through small interfaces: `CoreWaits`,
//! `WorkHome`, `DrivenDomain`):
//!
//! - `hooks.rs`: what binding a counter asks of the capabilities (`BindHook`), asked by
//!   `bind.rs` once each, in one pass; a floor below them all;
//! - `doorbell/`: how a waiter over shm sleeps in the kernel: a waiting domain's bell, rung by
//!   every rscntr endpoint over shm after its operations toward that domain, and by a target's
//!   progress for what only it answers; a floor below `wait/`;
//! - `wait/`: how a bound counter sleeps: what a waiter sleeps on for each core (over shm, the
//!   doorbell), a bound counter's core counter (its feed), taking in its counts, arming it;
//! - `trigger/`: counter-driven work: triggered operations on FI_TRIGGER endpoints, the
//!   operations as rscntr holds them, aliases, the deferred work queue, and the CQ filter that
//!   keeps deferred completions from the application;
//! - `rma_event/`: remote-access counters where the core has none that count (tcp,
//!   `ofi_rxm`): notifications in remote CQ data, counted at the target as its CQ filter takes
//!   them out, sent by the initiator's rma and atomic tables (on `wait/` and `trigger/`);
//! - `progress/`: automatic progress where the core has only manual progress (shm, rxd), on
//!   `wait/` and `trigger/`.
//!
//! The interposition:
//! - `getinfo.rs`: which core, the core's infos mirrored, the core's copy of an info;
//! - `home.rs`: the counters' home in a layered domain, with the core domain;
//! - `cq.rs`: CQ wait objects a core lacks;
//! - `bind.rs`: rscntr's bind on core endpoints and MRs;
//! - `interpose.rs`: what the interposed opens and closes share (the core's info, patching the
//!   new object, freeing rscntr's record only once the core closed the object);
//! - `domain.rs`, `fabric.rs`: the interposed domain and fabric ops.

mod bind;
mod cq;
mod domain;
mod fabric;
mod getinfo;
mod home;
mod interpose;

mod hooks;

mod doorbell;
mod progress;
mod rma_event;
mod shm_endpoints;
mod trigger;
mod wait;

pub use domain::is_layered as is_layered_domain;
pub use fabric::fabric_open;
pub use getinfo::{
    CoreSetting, OFI_CORE_PROV_ONLY, candidates, core_known, core_setting, getinfo_over, release,
};
