//! rdma-core's completion counter ABI (`infiniband/verbs.h`, rdma-core ≥ 65), written out by
//! hand: bookworm's headers predate these types, and rscntr must build without any rdma-core
//! headers. `tests/verbs_layout.rs` compiles these sizes, offsets and values as `_Static_assert`s
//! against the real `verbs.h` of rdma-core 65.

use std::ffi::c_int;

/// `struct ibv_device`: only ever handled by pointer.
#[repr(C)]
pub struct IbvDevice {
    _opaque: [u8; 0],
}

/// `struct ibv_context`: only ever handled by pointer.
#[repr(C)]
pub struct IbvContext {
    _opaque: [u8; 0],
}

/// `struct ibv_qp`: only ever handled by pointer (rscntr does not own QPs yet).
#[repr(C)]
pub struct IbvQp {
    _opaque: [u8; 0],
}

/// `struct ibv_comp_cntr`.
#[repr(C)]
#[derive(Debug)]
pub struct IbvCompCntr {
    pub context: *mut IbvContext,
    /// Kernel object handle.
    pub handle: u32,
}

/// `enum ibv_comp_cntr_type` (an `int`-sized C enum).
pub type IbvCompCntrType = c_int;
/// Counts completed work requests (the default).
pub const IBV_COMP_CNTR_TYPE_WRS: IbvCompCntrType = 0;
/// Counts completed bytes.
pub const IBV_COMP_CNTR_TYPE_BYTES: IbvCompCntrType = 1;

/// `struct ibv_comp_cntr_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct IbvCompCntrInitAttr {
    /// Must be 0.
    pub comp_mask: u32,
    pub cntr_type: IbvCompCntrType,
    /// Reserved, must be 0.
    pub flags: u32,
}

/// `struct ibv_comp_cntr_caps`, filled by `_ibv_query_comp_cntr_caps(ctx, caps, 16)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IbvCompCntrCaps {
    /// The largest value a counter holds; an increment past it wraps to zero.
    pub max_value: u64,
    /// Counters the device can have (0: none).
    pub max_counters: u32,
    /// Bitmask of `IBV_QP_ATTACH_COMP_CNTR_OP_*`.
    pub supported_qp_attach_ops: u32,
}

/// `struct ibv_qp_attach_comp_cntr_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct IbvQpAttachCompCntrAttr {
    /// Must be 0.
    pub comp_mask: u32,
    /// Bitmask of `IBV_QP_ATTACH_COMP_CNTR_OP_*`; must not be empty.
    pub op_mask: u32,
}

// enum ibv_qp_attach_comp_cntr_op
pub const IBV_QP_ATTACH_COMP_CNTR_OP_SEND: u32 = 1 << 0;
pub const IBV_QP_ATTACH_COMP_CNTR_OP_RECV: u32 = 1 << 1;
pub const IBV_QP_ATTACH_COMP_CNTR_OP_RDMA_READ: u32 = 1 << 2;
pub const IBV_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_READ: u32 = 1 << 3;
pub const IBV_QP_ATTACH_COMP_CNTR_OP_RDMA_WRITE: u32 = 1 << 4;
pub const IBV_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_WRITE: u32 = 1 << 5;
/// Every op bit rdma-core 65 defines.
pub const IBV_QP_ATTACH_COMP_CNTR_OP_ALL: u32 = (1 << 6) - 1;

// The sizes the notes measured on x86_64; tests/verbs_layout.rs checks them against verbs.h.
const _: () = assert!(std::mem::size_of::<IbvCompCntr>() == 16);
const _: () = assert!(std::mem::size_of::<IbvCompCntrInitAttr>() == 12);
const _: () = assert!(std::mem::size_of::<IbvCompCntrCaps>() == 16);
const _: () = assert!(std::mem::size_of::<IbvQpAttachCompCntrAttr>() == 8);

/// One struct's layout, for the layout test: C name, size, alignment, and per field its C
/// name, offset and size.
pub type Layout = (
    &'static str,
    usize,
    usize,
    Vec<(&'static str, usize, usize)>,
);

/// The size of a field, given a projection to it.
fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    std::mem::size_of::<F>()
}

macro_rules! layout {
    ($cname:literal, $t:ty, [$($cfield:literal => $field:ident),* $(,)?]) => {
        (
            $cname,
            std::mem::size_of::<$t>(),
            std::mem::align_of::<$t>(),
            vec![$((
                $cfield,
                std::mem::offset_of!($t, $field),
                field_size(|s: &$t| &s.$field),
            )),*],
        )
    };
}

/// Every struct rscntr mirrors, with the C names of its fields.
pub fn layouts() -> Vec<Layout> {
    vec![
        layout!("struct ibv_comp_cntr", IbvCompCntr, ["context" => context, "handle" => handle]),
        layout!("struct ibv_comp_cntr_init_attr", IbvCompCntrInitAttr,
            ["comp_mask" => comp_mask, "type" => cntr_type, "flags" => flags]),
        layout!("struct ibv_comp_cntr_caps", IbvCompCntrCaps,
            ["max_value" => max_value, "max_counters" => max_counters,
             "supported_qp_attach_ops" => supported_qp_attach_ops]),
        layout!("struct ibv_qp_attach_comp_cntr_attr", IbvQpAttachCompCntrAttr,
            ["comp_mask" => comp_mask, "op_mask" => op_mask]),
    ]
}

/// Every constant rscntr mirrors, with its C name.
pub const CONSTANTS: [(&str, i64); 9] = [
    ("IBV_COMP_CNTR_TYPE_WRS", IBV_COMP_CNTR_TYPE_WRS as i64),
    ("IBV_COMP_CNTR_TYPE_BYTES", IBV_COMP_CNTR_TYPE_BYTES as i64),
    (
        "IBV_QP_ATTACH_COMP_CNTR_OP_SEND",
        IBV_QP_ATTACH_COMP_CNTR_OP_SEND as i64,
    ),
    (
        "IBV_QP_ATTACH_COMP_CNTR_OP_RECV",
        IBV_QP_ATTACH_COMP_CNTR_OP_RECV as i64,
    ),
    (
        "IBV_QP_ATTACH_COMP_CNTR_OP_RDMA_READ",
        IBV_QP_ATTACH_COMP_CNTR_OP_RDMA_READ as i64,
    ),
    (
        "IBV_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_READ",
        IBV_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_READ as i64,
    ),
    (
        "IBV_QP_ATTACH_COMP_CNTR_OP_RDMA_WRITE",
        IBV_QP_ATTACH_COMP_CNTR_OP_RDMA_WRITE as i64,
    ),
    (
        "IBV_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_WRITE",
        IBV_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_WRITE as i64,
    ),
    (
        "sizeof(enum ibv_comp_cntr_type)",
        std::mem::size_of::<IbvCompCntrType>() as i64,
    ),
];
