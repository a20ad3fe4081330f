//! rscntr: a libfabric provider whose counters are its reason to exist.
//!
//! Layout (docs/design.md's): floors, lowest first; a file imports only its own floor and those
//! below, rooms of one floor do not import each other, no files import each other in a circle
//! (`tests/layout.rs` keeps it so). This file only declares them.
//! - `engine`: the counter engine; no libfabric or rdma-core types;
//! - `boundary`: the C boundary: panic containment (`ffi_boundary!`), fid checks, error codes,
//!   `fi_log`, `fi_param`, process-wide state, test hooks, what `fi_prov_ini` registers;
//! - `verbs`: rdma-core completion counters, loaded at run time;
//! - `cntr`: the counter fid over either backing (with the `FI_RSCNTR_HW` policy), which knows
//!   its domain only through `CntrHome` and the core of a bound counter only as a `Feed`;
//! - the capabilities of rscntr over a core, each in a folder of `layer` and below the files of
//!   `layer` itself: what binding a counter asks of them (`layer::hooks`); how a bound counter
//!   sleeps (`layer::wait`) beside counter-driven work (`layer::trigger`); remote-access
//!   counters (`layer::rma_event`) beside automatic progress (`layer::progress`);
//! - `standalone` and `layer`: the two homes of counters, rscntr's own fabric, domain and EQ
//!   (`FI_RSCNTR_CORE=none`), and rscntr over a core provider (the interposition on the core);
//! - on top: the provider record (`prov`), `getinfo` (`info`), the extension API (`ext`).

pub use ofi_libfabric_sys::bindgen as ofi;

pub mod engine;

pub mod boundary;

pub mod verbs;

mod cntr;

mod layer;
mod standalone;

pub mod ext;
mod info;
mod prov;

pub use prov::fi_prov_ini;
