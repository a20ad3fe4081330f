//! Fault injection for the hardening tests. **Testing only.** Compiled in always, so the tests
//! exercise the shipped DSO, and inert unless one of these environment variables is set (read
//! once, at the first hook reached; never through `fi_param`, so they are not parameters users
//! see in `fi_info -e`):
//!
//! - `FI_RSCNTR_TEST_FAIL=<op>[+<op>…]`: each named call rscntr makes into a core provider on
//!   the layered path fails with `-FI_EIO` instead of reaching the core, as if the core had
//!   failed it (a warning names the op). Ops: `getinfo` (the core's fi_getinfo when rscntr
//!   answers one), `fabric` (fi_fabric of the core fabric), `domain` (the core's domain open),
//!   `endpoint` (the core's endpoint/endpoint2/scalable_ep), `pep` (passive endpoint),
//!   `cq_open`, `cntr_open` (the core counter that feeds an rscntr counter, opened at the first
//!   bind), `bind` (binding that core counter to the core endpoint or MR), `mr_reg`
//!   (reg/regv/regattr).
//! - `FI_RSCNTR_TEST_PANIC=<op>[+<op>…]`: the named op panics, to show that the panic stays
//!   inside rscntr (`ffi_boundary!`: the caller gets `-FI_EOTHER`, the process lives). Ops:
//!   `cntr_open` (after the domain's counter slot is claimed, so a leak would show),
//!   `control` (only the private fi_control command [`PANIC_CMD`] on a counter, so the other
//!   commands stay usable), `domain` (opening a domain, rscntr's own or layered), `bind`
//!   (binding an rscntr counter to a core endpoint or MR).
//!
//! - `FI_RSCNTR_TEST_STUCK_FD=1`: where rscntr's waiters would sleep on a core wait fd (tcp's
//!   progress fd, a core wait set's fd) they poll an eventfd signalled once and never drained
//!   instead: a core whose fd stays readable whatever its progress does.
//! - `FI_RSCNTR_TEST_SLOT_UNBOUNDED=1`: a waiter asleep on its own slot of shm's doorbell
//!   (`layer/doorbell/bell.rs`, `SlotBlocker`) sleeps until rung or its own deadline, without the
//!   slot's 1 s bound: a ring the slot protocol loses leaves it asleep until its timeout, which
//!   `prov_test/room_stress.c` counts as a lost wake (the bound would hide it).
//!
//! An unknown op name is reported with a warning and ignored. Nothing on a counter's data path
//! (read, add, wait) consults these hooks.

use crate::{fi_warn, ofi};
use std::ffi::c_int;
use std::sync::OnceLock;

/// The fi_control command on a counter that panics when `FI_RSCNTR_TEST_PANIC` names `control`
/// (and is an unknown command, -FI_ENOSYS, otherwise). Chosen far from libfabric's commands.
pub const PANIC_CMD: c_int = 0x5253_7e57;

/// The interposed calls [`fail`] can fail, and the ops [`panic`] can panic in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Getinfo,
    Fabric,
    Domain,
    Endpoint,
    Pep,
    CqOpen,
    CntrOpen,
    Bind,
    MrReg,
    Control,
    /// Posting a triggered or deferred operation to the core (`layer/trigger/op.rs`).
    Post,
}

const FAIL_OPS: &[(&str, Op)] = &[
    ("getinfo", Op::Getinfo),
    ("fabric", Op::Fabric),
    ("domain", Op::Domain),
    ("endpoint", Op::Endpoint),
    ("pep", Op::Pep),
    ("cq_open", Op::CqOpen),
    ("cntr_open", Op::CntrOpen),
    ("bind", Op::Bind),
    ("mr_reg", Op::MrReg),
    ("post", Op::Post),
];

const PANIC_OPS: &[(&str, Op)] = &[
    ("cntr_open", Op::CntrOpen),
    ("control", Op::Control),
    ("domain", Op::Domain),
    ("bind", Op::Bind),
];

/// Sets of ops as bits (`1 << op as u32`): no heap, so nothing to give back before unload.
#[derive(Default)]
struct Hooks {
    fail: u32,
    panic: u32,
}

fn bit(op: Op) -> u32 {
    1 << op as u32
}

fn parse(var: &str, known: &[(&str, Op)]) -> u32 {
    let Ok(text) = std::env::var(var) else {
        return 0;
    };
    let mut ops = 0;
    for name in text.split('+').map(str::trim).filter(|s| !s.is_empty()) {
        match known.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
            Some((_, op)) => ops |= bit(*op),
            None => {
                let names: Vec<&str> = known.iter().map(|(n, _)| *n).collect();
                fi_warn!(
                    Core,
                    "{var}: unknown op {name:?} ignored (known: {})",
                    names.join(", ")
                );
            }
        }
    }
    ops
}

fn hooks() -> &'static Hooks {
    static HOOKS: OnceLock<Hooks> = OnceLock::new();
    HOOKS.get_or_init(|| Hooks {
        fail: parse("FI_RSCNTR_TEST_FAIL", FAIL_OPS),
        panic: parse("FI_RSCNTR_TEST_PANIC", PANIC_OPS),
    })
}

/// `Some(-FI_EIO)` when `FI_RSCNTR_TEST_FAIL` names `op`: the caller returns it instead of
/// calling the core.
pub fn fail(op: Op) -> Option<c_int> {
    if hooks().fail & bit(op) == 0 {
        return None;
    }
    fi_warn!(Core, "FI_RSCNTR_TEST_FAIL: failing the core's {op:?} call");
    Some(-(ofi::FI_EIO as c_int))
}

/// `Some(-FI_EAGAIN)` for the first N posts of triggered and deferred operations when
/// `FI_RSCNTR_TEST_EAGAIN=N`: a core whose queues are full, to show that such work is tried
/// again and neither lost nor reordered.
pub fn post_again() -> Option<c_int> {
    static LEFT: OnceLock<std::sync::atomic::AtomicU64> = OnceLock::new();
    let left = LEFT.get_or_init(|| {
        let n = std::env::var("FI_RSCNTR_TEST_EAGAIN")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        std::sync::atomic::AtomicU64::new(n)
    });
    use std::sync::atomic::Ordering::AcqRel;
    left.fetch_update(AcqRel, std::sync::atomic::Ordering::Acquire, |n| {
        n.checked_sub(1)
    })
    .ok()
    .map(|_| -(ofi::FI_EAGAIN as c_int))
}

/// True when `FI_RSCNTR_TEST_STUCK_FD=1`: core wait fds are made to stay readable (see the
/// module's list).
pub fn stuck_fd() -> bool {
    static STUCK: OnceLock<bool> = OnceLock::new();
    *STUCK.get_or_init(|| std::env::var("FI_RSCNTR_TEST_STUCK_FD").is_ok_and(|v| v.trim() == "1"))
}

/// True when `FI_RSCNTR_TEST_SLOT_UNBOUNDED=1` (see the module's list); says so once in the log.
pub fn slot_unbounded() -> bool {
    static UNBOUNDED: OnceLock<bool> = OnceLock::new();
    *UNBOUNDED.get_or_init(|| {
        let on = std::env::var("FI_RSCNTR_TEST_SLOT_UNBOUNDED").is_ok_and(|v| v.trim() == "1");
        if on {
            crate::fi_info!(
                Core,
                "FI_RSCNTR_TEST_SLOT_UNBOUNDED: waiters sleep on their own doorbell slot without a bound"
            );
        }
        on
    })
}

/// Panics when `FI_RSCNTR_TEST_PANIC` names `op`.
pub fn panic(op: Op) {
    if hooks().panic & bit(op) != 0 {
        panic!("FI_RSCNTR_TEST_PANIC: forced panic in {op:?}");
    }
}
