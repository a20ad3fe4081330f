//! include/rdma/fi_ext_rscntr.h must be what cbindgen makes of src/ext.rs today.

use std::path::Path;

#[test]
fn extension_header_is_fresh() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_config(config)
        .with_src(root.join("src/ext.rs"))
        .generate()
        .expect("cbindgen")
        .write(&mut generated);
    let path = root.join("include/rdma/fi_ext_rscntr.h");
    if std::env::var_os("RSCNTR_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &generated).unwrap();
    }
    let name = rscntr::ext::FI_RSCNTR_DOMAIN_OPS_V1.to_str().unwrap();
    let define = format!("#define FI_RSCNTR_DOMAIN_OPS_V1 \"{name}\"");
    assert!(
        String::from_utf8_lossy(&generated).contains(&define),
        "cbindgen.toml's #define must match src/ext.rs: {define}"
    );
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} is stale; regenerate with RSCNTR_BLESS=1 cargo test --test header",
        path.display()
    );
}
