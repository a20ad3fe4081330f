//! The C boundary: everything that stands between libfabric's C interface and rscntr's Rust
//! code, and imports nothing of rscntr above it (only the engine's defaults):
//!
//! - [`ffi`]: panic containment (`ffi_boundary!`), fid checks, error codes, the generic
//!   "not supported" ops, the open-children count of a parent fid;
//! - [`log`]: `fi_log` and its macros; [`params`]: the `FI_RSCNTR_*` parameters (`fi_param`);
//! - [`provider`]: the provider's name and version and what `fi_prov_ini` registers (the
//!   provider record, the running API version, the extension ops), which `log` and `params`
//!   need;
//! - [`statics`]: process-wide state given back before libfabric unloads rscntr;
//! - [`testhook`]: fault injection for the hardening tests;
//! - [`peer_sys`]: the bindings of `rdma/providers/fi_peer.h`;
//! - [`versions`]: what differs between the libfabric versions rscntr runs under (entry
//!   points, struct fields, counting paths), decided in one place.

pub mod ffi;
pub mod log;
pub(crate) mod params;
pub(crate) mod peer_sys;
pub(crate) mod provider;
pub(crate) mod statics;
pub(crate) mod testhook;
pub(crate) mod versions;
