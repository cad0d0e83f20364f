//! Which flash kernel serves a head dim: [`SmallHeadKernel`] (the hd 64 / 128 choice,
//! [`KERNEL_ENV`]) and [`FlashVariant`] (entry points, tile sizes, launch shape).

use cudarc::driver::LaunchConfig;

use super::{
    HEAD_DIMS, LARGE_HD_BLOCK_K, LARGE_HD_CHUNK, LARGE_HD_WARPS, OP, QREG_BLOCK_K,
    QREG_ROWS_PER_WARP, QREG_SOFTMAX_K, QREG_WARPS, ROWS_PER_WARP, ROW_PAD, SMALL_HD_BLOCK_K,
    SMALL_HD_WARPS, WIDE_BLOCK_K, WIDE_ROWS_PER_WARP, WIDE_WARPS,
};
use crate::launch::{shape, LaunchError};
use crate::ops::joint_attention::AttnDims;

/// Environment variable choosing the hd 64 / 128 kernel: unset or `qregs` runs the
/// Q-in-registers kernels (the default), `wide` the previous default (32 rows per warp, Q re-read
/// from shared memory every tile), `old` the 16-row ones (kept so one GPU run can time them all;
/// `verify --bench` also times them side by side). Any other value is an error.
pub const KERNEL_ENV: &str = "BONSAI_JOINT_ATTENTION";

/// Which kernel serves hd 64 / 128 (hd 384 / 512 have one kernel each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmallHeadKernel {
    /// joint_attention_hd{64,128}_q_regs: 4 warps x 32 query rows, Q's fragments in registers,
    /// the online softmax per 32 keys, two CTAs per SM.
    QRegs,
    /// joint_attention_hd{64,128}_wide_warp: 4 warps x 32 query rows, two CTAs per SM.
    WideWarp,
    /// joint_attention_hd{64,128}: 8 warps x 16 query rows, one CTA per SM.
    SixteenRowWarp,
}

impl SmallHeadKernel {
    /// Every choice, the default first.
    pub const ALL: [Self; 3] = [Self::QRegs, Self::WideWarp, Self::SixteenRowWarp];

    /// The choice [`KERNEL_ENV`] asks for (default [`SmallHeadKernel::QRegs`]).
    pub fn from_env() -> Result<Self, LaunchError> {
        match std::env::var(KERNEL_ENV) {
            Err(std::env::VarError::NotPresent) => Self::parse(None),
            Ok(v) => Self::parse(Some(&v)),
            Err(e) => Err(shape(OP, format!("{KERNEL_ENV}: {e}"))),
        }
    }

    /// The choice a [`KERNEL_ENV`] value (None: unset) names.
    pub fn parse(value: Option<&str>) -> Result<Self, LaunchError> {
        match value {
            None | Some("qregs") => Ok(Self::QRegs),
            Some("wide") => Ok(Self::WideWarp),
            Some("old") => Ok(Self::SixteenRowWarp),
            Some(v) => {
                Err(shape(OP, format!("{KERNEL_ENV}={v:?}: expected `qregs`, `wide` or `old`")))
            }
        }
    }
}

/// One instantiation of the flash kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashVariant {
    pub entry: &'static str,
    pub head_dim: usize,
    pub warps: usize,
    /// Query rows each warp owns (16 or 32).
    pub rows_per_warp: usize,
    /// Keys per K/V tile in shared memory.
    pub block_k: usize,
    /// Keys per online-softmax step (one running-max update and O rescale at most): what the
    /// accuracy bound ([`crate::ops::joint_attention::bf16_check`]) counts rescales by.
    pub softmax_keys: usize,
    /// Output dims one CTA computes.
    pub out_chunk: usize,
    /// The same kernel taking f32 q (it rounds q to bf16 while loading its fragments, so the
    /// conversion pass only converts k and v), if there is one.
    pub f32_q_entry: Option<&'static str>,
}

impl FlashVariant {
    /// The kernel for `head_dim` ([`KERNEL_ENV`] picks among the hd 64 / 128 ones), or a shape
    /// error naming the supported head dims.
    pub fn for_head_dim(head_dim: usize) -> Result<Self, LaunchError> {
        Self::select(head_dim, SmallHeadKernel::from_env()?)
    }

    /// The kernel for `head_dim`, `small` choosing among the hd 64 / 128 ones.
    pub fn select(head_dim: usize, small: SmallHeadKernel) -> Result<Self, LaunchError> {
        let wide = small == SmallHeadKernel::WideWarp;
        let q_regs = small == SmallHeadKernel::QRegs;
        let (entry, warps, rows_per_warp, block_k, out_chunk) = match head_dim {
            64 if q_regs => {
                ("joint_attention_hd64_q_regs", QREG_WARPS, QREG_ROWS_PER_WARP, QREG_BLOCK_K, 64)
            }
            128 if q_regs => {
                ("joint_attention_hd128_q_regs", QREG_WARPS, QREG_ROWS_PER_WARP, QREG_BLOCK_K, 128)
            }
            64 if wide => {
                ("joint_attention_hd64_wide_warp", WIDE_WARPS, WIDE_ROWS_PER_WARP, WIDE_BLOCK_K, 64)
            }
            128 if wide => (
                "joint_attention_hd128_wide_warp",
                WIDE_WARPS,
                WIDE_ROWS_PER_WARP,
                WIDE_BLOCK_K,
                128,
            ),
            64 => ("joint_attention_hd64", SMALL_HD_WARPS, ROWS_PER_WARP, SMALL_HD_BLOCK_K, 64),
            128 => ("joint_attention_hd128", SMALL_HD_WARPS, ROWS_PER_WARP, SMALL_HD_BLOCK_K, 128),
            384 => (
                "joint_attention_hd384",
                LARGE_HD_WARPS,
                ROWS_PER_WARP,
                LARGE_HD_BLOCK_K,
                LARGE_HD_CHUNK,
            ),
            512 => (
                "joint_attention_hd512",
                LARGE_HD_WARPS,
                ROWS_PER_WARP,
                LARGE_HD_BLOCK_K,
                LARGE_HD_CHUNK,
            ),
            _ => {
                return Err(shape(
                    OP,
                    format!("head_dim {head_dim} has no CUDA kernel (supported: {HEAD_DIMS:?})"),
                ))
            }
        };
        // Every kernel but the Q-in-registers one at hd 128 runs its softmax over whole K/V
        // tiles (at hd 64 the 64-key S block fits next to Q's fragments).
        let softmax_keys = if q_regs && head_dim == 128 { QREG_SOFTMAX_K } else { block_k };
        let f32_q_entry = match head_dim {
            64 if q_regs => Some("joint_attention_hd64_q_regs_f32q"),
            128 if q_regs => Some("joint_attention_hd128_q_regs_f32q"),
            _ => None,
        };
        Ok(Self {
            entry,
            head_dim,
            warps,
            rows_per_warp,
            block_k,
            softmax_keys,
            out_chunk,
            f32_q_entry,
        })
    }

    pub fn block_q(&self) -> usize {
        self.warps * self.rows_per_warp
    }

    /// Dynamic shared memory: q [block_q][hd + pad], k [2][block_k][hd + pad],
    /// v [2][block_k][out_chunk + pad], all bf16.
    pub fn shared_bytes(&self) -> usize {
        let qk_row = self.head_dim + ROW_PAD;
        let v_row = self.out_chunk + ROW_PAD;
        let elems = self.block_q() * qk_row + 2 * self.block_k * qk_row + 2 * self.block_k * v_row;
        elems * std::mem::size_of::<u16>()
    }

    /// Grid (query tiles, heads, output chunks).
    pub(super) fn config(&self, dims: AttnDims) -> Result<LaunchConfig, LaunchError> {
        let tiles = u32::try_from(dims.seq.div_ceil(self.block_q()))
            .map_err(|_| shape(OP, format!("seq {} needs too many query tiles", dims.seq)))?;
        let heads =
            u32::try_from(dims.heads).ok().filter(|&h| h <= MAX_GRID_Y).ok_or_else(|| {
                shape(OP, format!("{} heads exceed the grid's {MAX_GRID_Y}", dims.heads))
            })?;
        Ok(LaunchConfig {
            grid_dim: (tiles, heads, (self.head_dim / self.out_chunk) as u32),
            block_dim: ((self.warps * 32) as u32, 1, 1),
            shared_mem_bytes: self.shared_bytes() as u32,
        })
    }
}

/// Largest gridDim.y (and z) CUDA allows.
const MAX_GRID_Y: u32 = 65_535;
