//! rscntr's hand-written rdma-core definitions (src/verbs/abi.rs) against the real `verbs.h` of
//! rdma-core 65: sizes, alignments, field offsets and constant values become `_Static_assert`s
//! that gcc checks. scripts/setup.sh builds the header into .deps/rdma65/include; the test
//! skips (saying so) only when it is missing and RSCNTR_REQUIRE_RDMA65 is unset — test.sh
//! sets it.

use rscntr::verbs::abi::{CONSTANTS, layouts};
use std::fmt::Write;
use std::path::PathBuf;
use std::process::Command;

fn include_dir() -> PathBuf {
    std::env::var_os("RSCNTR_RDMA65_INCLUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".deps/rdma65/include"))
}

fn assertions() -> String {
    let mut c = String::from("#include <stddef.h>\n#include <infiniband/verbs.h>\n");
    for (name, size, align, fields) in layouts() {
        writeln!(
            c,
            "_Static_assert(sizeof({name}) == {size}, \"sizeof({name}) != {size}\");"
        )
        .unwrap();
        writeln!(
            c,
            "_Static_assert(_Alignof({name}) == {align}, \"_Alignof({name}) != {align}\");"
        )
        .unwrap();
        for (field, off, fsize) in fields {
            writeln!(
                c,
                "_Static_assert(offsetof({name}, {field}) == {off}, \"offsetof({name}, {field}) != {off}\");"
            )
            .unwrap();
            writeln!(
                c,
                "_Static_assert(sizeof((({name} *) 0)->{field}) == {fsize}, \"sizeof {name}.{field} != {fsize}\");"
            )
            .unwrap();
        }
    }
    for (name, value) in CONSTANTS {
        writeln!(
            c,
            "_Static_assert(({name}) == {value}, \"{name} != {value}\");"
        )
        .unwrap();
    }
    // The function prototypes rscntr's table assumes (a mismatch is a compile error).
    c.push_str(
        "static int (*q)(struct ibv_context *, struct ibv_comp_cntr_caps *, size_t) = _ibv_query_comp_cntr_caps;\n\
         static struct ibv_comp_cntr *(*cr)(struct ibv_context *, struct ibv_comp_cntr_init_attr *) = ibv_create_comp_cntr;\n\
         static int (*de)(struct ibv_comp_cntr *) = ibv_destroy_comp_cntr;\n\
         static int (*se)(struct ibv_comp_cntr *, uint64_t) = ibv_set_comp_cntr;\n\
         static int (*see)(struct ibv_comp_cntr *, uint64_t) = ibv_set_err_comp_cntr;\n\
         static int (*in)(struct ibv_comp_cntr *, uint64_t) = ibv_inc_comp_cntr;\n\
         static int (*ine)(struct ibv_comp_cntr *, uint64_t) = ibv_inc_err_comp_cntr;\n\
         static int (*rd)(struct ibv_comp_cntr *, uint64_t *) = ibv_read_comp_cntr;\n\
         static int (*rde)(struct ibv_comp_cntr *, uint64_t *) = ibv_read_err_comp_cntr;\n\
         static int (*at)(struct ibv_qp *, struct ibv_comp_cntr *, struct ibv_qp_attach_comp_cntr_attr *) = ibv_qp_attach_comp_cntr;\n\
         void *rscntr_protos[] = { &q, &cr, &de, &se, &see, &in, &ine, &rd, &rde, &at };\n",
    );
    c
}

#[test]
fn rust_definitions_match_rdma_core_65_verbs_h() {
    let inc = include_dir();
    if !inc.join("infiniband/verbs.h").exists() {
        assert!(
            std::env::var_os("RSCNTR_REQUIRE_RDMA65").is_none(),
            "{}/infiniband/verbs.h is missing (scripts/setup.sh builds it)",
            inc.display()
        );
        eprintln!(
            "SKIP: {}/infiniband/verbs.h is missing; run scripts/setup.sh to build rdma-core 65",
            inc.display()
        );
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("verbs_layout.c");
    std::fs::write(&src, assertions()).unwrap();
    let out = Command::new("timeout")
        .args([
            "120",
            "gcc",
            "-std=gnu11",
            "-fsyntax-only",
            "-Wall",
            "-Werror",
            "-Wno-unused-variable",
        ])
        .arg(format!("-I{}", inc.display()))
        .arg(&src)
        .output()
        .expect("run gcc");
    assert!(
        out.status.success(),
        "layout mismatch against {}:\n{}",
        inc.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_wrong_definition_is_caught() {
    // The check itself must be able to fail: a deliberately wrong offset.
    let inc = include_dir();
    if !inc.join("infiniband/verbs.h").exists() {
        eprintln!("SKIP: no rdma-core 65 header");
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("verbs_layout_wrong.c");
    let c = assertions()
        + "_Static_assert(offsetof(struct ibv_comp_cntr_caps, max_counters) == 12, \"wrong\");\n";
    std::fs::write(&src, c).unwrap();
    let out = Command::new("timeout")
        .args(["120", "gcc", "-std=gnu11", "-fsyntax-only"])
        .arg(format!("-I{}", inc.display()))
        .arg(&src)
        .output()
        .expect("run gcc");
    assert!(!out.status.success(), "gcc accepted a wrong offset");
}
