//! Test and example binaries link libfabric (through the log calls of the hardware layer) and
//! must find the libfabric that scripts/setup.sh built when cargo runs them. Cargo overrides
//! LD_LIBRARY_PATH for test runs (ignoring .cargo/config.toml's [env]), so give those binaries
//! — never the provider DSO — a run path to it.
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");
    let paths = std::env::var("PKG_CONFIG_PATH").unwrap_or_default();
    for dir in paths.split(':').filter(|d| !d.is_empty()) {
        let pc = Path::new(dir).join("libfabric.pc");
        if let Some(libdir) = pc.exists().then(|| Path::new(dir).parent()).flatten() {
            let libdir = libdir
                .canonicalize()
                .unwrap_or_else(|_| libdir.to_path_buf());
            for kind in ["tests", "examples"] {
                println!(
                    "cargo:rustc-link-arg-{kind}=-Wl,-rpath,{}",
                    libdir.display()
                );
            }
            return;
        }
    }
}
