//! The last wave's key split (flash-decoding style) for the default hd 128 kernel.
//!
//! Non-causal joint attention gives every (head, 128-query block) item the same work, so a grid
//! of `items` CTAs on `slots` = SMs x CTAs per SM runs `items / slots` full waves and one partial
//! wave of `tail = items % slots` items that still takes a whole CTA's time (h24 seq4608: 864
//! items on 264 slots, a 4th wave of 72: ~18% of the kernel). The split keeps the first
//! `full = items - tail` items as they are and runs each tail item as `splits` CTAs over
//! 64-key-aligned key ranges; the last of them to finish merges the partials in split order
//! (joint_attention_qreg.cu, `JaSplit`). Expected time (3 + 1/S) / 4 of the unsplit kernel at
//! seq 4608 (S = 3: 0.83x). Measured on the H200 (2026-11-30, docs/PERFORMANCE.md): slower,
//! flash-only 855.9 against 829.0 us at seq 4608 and 157.1 against 139.4 us at seq 1536: the
//! lone last-wave CTAs already ran faster than a full wave's, and the partials' traffic, the
//! merge and the per-call scratch cost more than the tail. So it is off unless
//! `BONSAI_JOINT_ATTENTION_SPLIT=1`.

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig};

use super::{FlashVariant, OP};
use crate::launch::{as_i32, device_attribute, shape, write_ptr, LaunchError};
use crate::launch_ex::Launch;
use crate::ops::joint_attention::AttnDims;

/// Environment variable: `1` splits when [`SplitPlan::new`] finds it worth it; unset or `0`
/// runs the plain grid (measured faster). Any other value is an error.
pub const SPLIT_ENV: &str = "BONSAI_JOINT_ATTENTION_SPLIT";
/// Most key ranges per tail item (more would make the merge and partial traffic grow for a
/// wave that is already nearly full).
pub const MAX_SPLITS: usize = 4;
/// Fewest 64-key tiles per range: each range then starts on a tile holding a valid key and does
/// enough work to pay for its partial write.
pub const MIN_TILES_PER_SPLIT: usize = 2;

/// Whether (and how) a launch splits its last wave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitMode {
    /// The plain (q_blocks, heads) grid.
    Off,
    /// Split with slots = SM count x the kernel's CTAs per SM (occupancy query).
    Auto,
    /// Split as if the device had this many slots (verify rows use it to get a tail at small
    /// shapes on a device, or the emulator, with many SMs).
    Slots(usize),
}

impl SplitMode {
    /// The mode [`SPLIT_ENV`] asks for (default [`SplitMode::Auto`]).
    pub fn from_env() -> Result<Self, LaunchError> {
        match std::env::var(SPLIT_ENV) {
            Err(std::env::VarError::NotPresent) => Self::parse(None),
            Ok(v) => Self::parse(Some(&v)),
            Err(e) => Err(shape(OP, format!("{SPLIT_ENV}: {e}"))),
        }
    }

    /// The mode a [`SPLIT_ENV`] value (None: unset) names.
    pub fn parse(value: Option<&str>) -> Result<Self, LaunchError> {
        match value.map(str::trim) {
            Some("1") => Ok(Self::Auto),
            None | Some("0") => Ok(Self::Off),
            Some(v) => Err(shape(OP, format!("{SPLIT_ENV}={v:?}: expected `0` or `1`"))),
        }
    }
}

/// The split grid of one launch: `full` whole-item CTAs, then `tail` items x `splits` ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitPlan {
    pub q_blocks: usize,
    pub full: usize,
    pub tail: usize,
    pub splits: usize,
}

impl SplitPlan {
    /// The plan for `heads` x `q_blocks` items on `slots` concurrent CTAs with `key_tiles` 64-key
    /// tiles per head, or None when it would not split: no partial wave, or fewer than 2 ranges
    /// fit (S = clamp(slots / tail, 1, MAX_SPLITS), each range >= MIN_TILES_PER_SPLIT tiles).
    pub fn new(heads: usize, q_blocks: usize, slots: usize, key_tiles: usize) -> Option<Self> {
        let items = heads.checked_mul(q_blocks)?;
        if slots == 0 {
            return None;
        }
        let full = items / slots * slots;
        let tail = items - full;
        if tail == 0 {
            return None;
        }
        let splits = (slots / tail).clamp(1, MAX_SPLITS).min(key_tiles / MIN_TILES_PER_SPLIT);
        (splits >= 2).then_some(Self { q_blocks, full, tail, splits })
    }

    /// CTAs of the split grid.
    pub fn ctas(&self) -> usize {
        self.full + self.tail * self.splits
    }

    /// The plan `variant` would run for `dims` under `mode` on `stream`'s device (None: the
    /// unsplit grid), given the split entry point `func`.
    pub fn for_launch(
        stream: &Arc<CudaStream>,
        variant: &FlashVariant,
        func: &CudaFunction,
        dims: AttnDims,
        mode: SplitMode,
    ) -> Result<Option<Self>, LaunchError> {
        let slots = match mode {
            SplitMode::Off => return Ok(None),
            SplitMode::Slots(n) => n,
            SplitMode::Auto => {
                let sms = device_attribute(
                    stream,
                    CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                )?;
                stream.context().bind_to_thread()?;
                let per_sm = func.occupancy_max_active_blocks_per_multiprocessor(
                    (variant.warps * 32) as u32,
                    variant.shared_bytes(),
                    None,
                )?;
                sms.saturating_mul(per_sm as usize)
            }
        };
        let q_blocks = dims.seq.div_ceil(variant.block_q());
        Ok(Self::new(dims.heads, q_blocks, slots, dims.seq.div_ceil(variant.block_k)))
    }
}

/// Launches split entry `func` (shared memory already opted in) with `plan` on device addresses
/// q, k, v (as the unsplit entry takes them) into `out`, allocating the partials and the
/// zeroed per-item counters on `stream` (freed, stream-ordered, after the launch).
#[allow(clippy::too_many_arguments)]
pub(super) fn launch_split(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    variant: &FlashVariant,
    plan: SplitPlan,
    [q_p, k_p, v_p, o_p]: [u64; 4],
    heads: i32,
    seq: i32,
    scale_log2: f32,
) -> Result<(), LaunchError> {
    let parts = plan.tail * plan.splits * variant.block_q();
    let q_blocks = as_i32(OP, "q_blocks", plan.q_blocks)?;
    let full = as_i32(OP, "full", plan.full)?;
    let splits = as_i32(OP, "splits", plan.splits)?;
    let ctas = u32::try_from(plan.ctas())
        .map_err(|_| shape(OP, format!("{} split CTAs exceed the grid", plan.ctas())))?;
    // SAFETY: uninitialised f32s; every tail item's `splits` CTAs write all BLOCK_Q rows of
    // their O part (hd values) and (m, l) pair before counting themselves done, and only the
    // last of them reads the item's parts, after all have arrived.
    let mut part_o = unsafe { stream.alloc::<f32>(parts * variant.head_dim) }?;
    // SAFETY: as part_o, 2 values per row.
    let mut part_ml = unsafe { stream.alloc::<f32>(parts * 2) }?;
    let mut counters = stream.alloc_zeros::<u32>(plan.tail)?;
    let (po_p, _a) = write_ptr(&mut part_o, stream);
    let (pml_p, _b) = write_ptr(&mut part_ml, stream);
    let (c_p, _c) = write_ptr(&mut counters, stream);
    let cfg = LaunchConfig {
        grid_dim: (ctas, 1, 1),
        block_dim: ((variant.warps * 32) as u32, 1, 1),
        shared_mem_bytes: variant.shared_bytes() as u32,
    };
    let mut l = Launch::new(stream, func);
    l.arg(&q_p).arg(&k_p).arg(&v_p).arg(&o_p).arg(&heads).arg(&seq).arg(&scale_log2);
    l.arg(&q_blocks).arg(&full).arg(&splits).arg(&po_p).arg(&pml_p).arg(&c_p);
    // SAFETY: matches joint_attention_hd128_q_regs[_f32q]_split(q, k, v, out, int heads, int seq,
    // float scale_log2, int q_blocks, int full, int splits, float* part_o, float* part_ml,
    // u32* counters); q, k, v, out as the unsplit launch (checked by the callers); the grid is
    // full + tail * splits CTAs with full + tail = heads * q_blocks items; part_o holds
    // tail * splits * BLOCK_Q * hd f32, part_ml twice tail * splits * BLOCK_Q, counters tail
    // zeroed u32.
    unsafe { l.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_splits_only_the_partial_wave() {
        // h24 seq4608 on 132 SMs x 2: 864 items, 3 full waves, 72 left -> 3 ranges each.
        let plan = SplitPlan::new(24, 36, 264, 72).expect("a tail");
        assert_eq!(plan, SplitPlan { q_blocks: 36, full: 792, tail: 72, splits: 3 });
        assert_eq!(plan.ctas(), 792 + 216);
        // seq 1536: 288 items, tail 24 -> 4 ranges (the cap).
        assert_eq!(SplitPlan::new(24, 12, 264, 24).map(|p| p.splits), Some(4));
        // No partial wave, no split.
        assert_eq!(SplitPlan::new(2, 132, 264, 72), None);
        // Too few tiles for 2 ranges of >= 2.
        assert_eq!(SplitPlan::new(1, 2, 8, 3), None);
        // Ranges capped by the tile count: 5 tiles -> 2 ranges.
        assert_eq!(SplitPlan::new(2, 3, 5, 5).map(|p| p.splits), Some(2));
        // Tail larger than half the slots: S = 1, no split.
        assert_eq!(SplitPlan::new(1, 7, 4, 40), None);
        assert_eq!(SplitPlan::new(1, 1, 0, 40), None);
    }

    #[test]
    fn env_values() {
        assert_eq!(SplitMode::parse(None).ok(), Some(SplitMode::Off));
        assert_eq!(SplitMode::parse(Some("1")).ok(), Some(SplitMode::Auto));
        assert_eq!(SplitMode::parse(Some("0")).ok(), Some(SplitMode::Off));
        assert!(SplitMode::parse(Some("yes")).is_err());
    }
}
