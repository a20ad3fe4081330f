//! rscntr: a libfabric provider whose counters are its reason to exist.
//!
//! Layout: floors that import only downward (`tests/layout.rs` keeps it so):
//! - `engine`: the counter engine (stores, sources, the wait protocol, the fd watcher); no
//!   libfabric or rdma-core types;
//! - `boundary`: the C boundary: panic containment (`ffi_boundary!`), fid checks, error codes,
//!   `fi_log`, `fi_param`, process-wide state, test hooks, what `fi_prov_ini` registers;
//! - `verbs`: rdma-core completion counters, loaded at run time;
//! - `cntr`: the counter fid over either backing (`FI_RSCNTR_HW` policy included), which
//!   knows its domain only through `CntrHome` and a core only as a `Feed`;
//! - the two homes of counters, which do not import each other: `standalone`, the fabric,
//!   domain and EQ of `FI_RSCNTR_CORE=none`, and `layer`, rscntr over a core provider;
//! - on top: the provider record (`prov`), `getinfo` (`info`) and the extension API (`ext`).

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
