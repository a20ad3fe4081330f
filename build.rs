//! Two jobs:
//! - bindings for libfabric's peer-provider header (`rdma/providers/fi_peer.h`), which
//!   `ofi-libfabric-sys` does not cover: rscntr hands its counters to core providers through it;
//! - a run path to the built libfabric for test and example binaries (never the provider DSO):
//!   cargo overrides LD_LIBRARY_PATH for test runs, ignoring .cargo/config.toml's [env].

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");
    let lib = pkg_config::Config::new()
        .cargo_metadata(false)
        .probe("libfabric")
        .expect("libfabric not found by pkg-config (run scripts/setup.sh)");

    let mut builder = bindgen::Builder::default()
        .header_contents("peer.h", "#include <rdma/providers/fi_peer.h>\n")
        .allowlist_type("fid_peer_cntr|fi_ops_cntr_owner|fi_peer_cntr_context")
        .blocklist_type("fid|fi_ops|fid_t")
        .raw_line("use ofi_libfabric_sys::bindgen::fid;")
        .derive_debug(false)
        .layout_tests(true);
    for dir in &lib.include_paths {
        builder = builder.clang_arg(format!("-I{}", dir.display()));
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("peer.rs");
    builder
        .generate()
        .expect("bindgen fi_peer.h")
        .write_to_file(out)
        .unwrap();

    if let Some(libdir) = lib.link_paths.first() {
        let libdir = Path::new(libdir)
            .canonicalize()
            .unwrap_or_else(|_| libdir.clone());
        for kind in ["tests", "examples"] {
            println!(
                "cargo:rustc-link-arg-{kind}=-Wl,-rpath,{}",
                libdir.display()
            );
        }
    }
}
