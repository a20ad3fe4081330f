//! rscntr over a core provider: every object but the counter is the core's own, handed to the
//! application unchanged except for the few ops rscntr interposes on (opening domains,
//! endpoints and MRs, binding counters, closing, fi_trywait). Data operations go straight to
//! the core: no call on the data path passes through rscntr, except on endpoints opened with
//! FI_TRIGGER, whose `*msg` calls test one flag and whose CQs are read through a filter
//! (`trigger.rs`, `deferred.rs`).
//!
//! Counters are rscntr's. When one is bound to a core endpoint or MR, rscntr opens a core
//! counter with FI_PEER whose `fid_peer_cntr` is the rscntr counter, so every completion the
//! core would count increments the rscntr counter directly (libfabric's peer API).
//!
//! - `getinfo.rs`: which core, the core's infos mirrored, the core's copy of an info;
//! - `wait.rs`: what a waiter sleeps on for each core;
//! - `home.rs`: the counters' home in a layered domain, with the core domain;
//! - `feed.rs`: a bound counter's core counter, taking in its counts, arming it;
//! - `cq.rs`: CQ wait objects a core lacks;
//! - `trigger.rs`, `op.rs`, `alias.rs`: triggered operations on FI_TRIGGER endpoints, the
//!   operations as rscntr holds them, aliases;
//! - `work.rs`, `deferred.rs`: the deferred work queue, and the CQ filter that keeps deferred
//!   completions from the application;
//! - `rma_event.rs`, `rma_ep.rs`: remote-access counters where the core has none that count
//!   (tcp, `ofi_rxm`): notifications in remote CQ data, counted at the target as its CQ
//!   filter takes them out, sent by the initiator's rma and atomic tables;
//! - `progress.rs`: automatic progress where the core has only manual progress (shm, rxd);
//! - `bind.rs`: rscntr's bind on core endpoints and MRs;
//! - `interpose.rs`: what the interposed opens and closes share (the core's info, patching the
//!   new object, freeing rscntr's record only once the core closed the object);
//! - `domain.rs`, `fabric.rs`: the interposed domain and fabric ops.

mod alias;
mod bind;
mod cq;
mod deferred;
mod domain;
mod fabric;
mod feed;
mod getinfo;
mod home;
mod interpose;
mod op;
mod progress;
mod rma_ep;
mod rma_event;
mod trigger;
mod wait;
mod work;

pub use domain::is_layered as is_layered_domain;
pub use fabric::fabric_open;
pub use getinfo::{
    CoreSetting, OFI_CORE_PROV_ONLY, candidates, core_setting, getinfo_over, release,
};
