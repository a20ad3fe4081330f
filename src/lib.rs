//! rscntr: a libfabric provider whose counters are its reason to exist.
//!
//! Layout, as in libfabric's own providers: one module per fid class (`fabric`, `domain`, `eq`,
//! `cntr`), the provider record and `getinfo` (`prov`, `info`), the C boundary (`ffi`, `log`,
//! `params`), rscntr's extension API (`ext`), and the counter engine (`engine`), which knows
//! nothing about libfabric.

pub use ofi_libfabric_sys::bindgen as ofi;

pub mod engine;
pub mod ext;
pub mod ffi;
pub mod log;
pub mod verbs;

mod cntr;
mod domain;
mod eq;
mod fabric;
mod hw;
mod info;
mod layer;
mod params;
mod peer_sys;
mod prov;
mod statics;
mod testhook;

pub use prov::fi_prov_ini;
