//! Which flash kernel serves a head dim: [`SmallHeadKernel`] (the hd 64 / 128 choice, made from
//! the device's capability) and [`FlashVariant`] (entry points, tile sizes, launch shape).

use std::sync::Arc;

use cudarc::driver::{CudaStream, LaunchConfig};

use super::{
    HEAD_DIMS, LARGE_HD_BLOCK_K, LARGE_HD_CHUNK, LARGE_HD_WARPS, OP, QREG_BLOCK_K,
    QREG_ROWS_PER_WARP, QREG_SOFTMAX_K, QREG_WARPS, ROWS_PER_WARP, ROW_PAD, WGMMA_ALIGN,
    WGMMA_BLOCK_K, WGMMA_STAGES, WGMMA_WARPGROUPS,
};
use crate::launch::{shape, LaunchError};
use crate::ops::joint_attention::AttnDims;

/// Which kernel serves hd 64 / 128 (hd 384 / 512 have one kernel each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmallHeadKernel {
    /// joint_attention_hd128_wgmma: 2 warpgroups x 64 query rows on wgmma (sm_90a) running half
    /// a tile apart, 128-key tiles and softmax steps, one CTA per SM. hd 128 only.
    Wgmma,
    /// joint_attention_hd{64,128}_q_regs: 4 warps x 32 query rows, Q's fragments in registers,
    /// the online softmax per 32 keys at hd 128, two CTAs per SM. Every device, both head dims.
    QRegs,
}

impl SmallHeadKernel {
    /// The kernel the launchers run at `head_dim` on a device with (`wgmma`: compute capability
    /// 9.0) or without warpgroup MMA: wgmma at hd 128 where the device has it, else Q-in-registers.
    pub fn for_device(head_dim: usize, wgmma: bool) -> Self {
        if wgmma && head_dim == WGMMA_HEAD_DIM {
            Self::Wgmma
        } else {
            Self::QRegs
        }
    }

    /// Every kernel that can run `head_dim` on a device with (`wgmma`) or without warpgroup
    /// MMA, the launchers' choice first: what verify checks and bench times.
    pub fn available(head_dim: usize, wgmma: bool) -> Vec<Self> {
        if wgmma && head_dim == WGMMA_HEAD_DIM {
            vec![Self::Wgmma, Self::QRegs]
        } else {
            vec![Self::QRegs]
        }
    }
}

/// The head dim the wgmma kernel is written for.
pub const WGMMA_HEAD_DIM: usize = 128;

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
    /// The wgmma kernel (its own shared layout: [`WGMMA_STAGES`] swizzled K and V tiles).
    pub wgmma: bool,
}

impl FlashVariant {
    /// The kernel for `head_dim` on the device of `stream` ([`SmallHeadKernel::for_device`]
    /// picks among the hd 64 / 128 ones), or a shape error naming the supported head dims.
    pub fn for_device(stream: &Arc<CudaStream>, head_dim: usize) -> Result<Self, LaunchError> {
        let wgmma = crate::launch::matmul::device_has_wgmma(stream)?;
        Self::select(head_dim, SmallHeadKernel::for_device(head_dim, wgmma))
    }

    /// The kernel for `head_dim`, `small` choosing among the hd 64 / 128 ones (hd 384 / 512
    /// ignore it: one kernel each); wgmma at hd 64 is an error.
    pub fn select(head_dim: usize, small: SmallHeadKernel) -> Result<Self, LaunchError> {
        let wgmma = small == SmallHeadKernel::Wgmma && head_dim <= WGMMA_HEAD_DIM;
        let (entry, warps, rows_per_warp, block_k, out_chunk) = match head_dim {
            128 if wgmma => ("joint_attention_hd128_wgmma", 4 * WGMMA_WARPGROUPS, 16, WGMMA_BLOCK_K, 128),
            64 if wgmma => {
                return Err(shape(OP, format!("the wgmma kernel is for head_dim {WGMMA_HEAD_DIM}, not 64")))
            }
            64 => ("joint_attention_hd64_q_regs", QREG_WARPS, QREG_ROWS_PER_WARP, QREG_BLOCK_K, 64),
            128 => {
                ("joint_attention_hd128_q_regs", QREG_WARPS, QREG_ROWS_PER_WARP, QREG_BLOCK_K, 128)
            }
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
        let softmax_keys = if !wgmma && head_dim == 128 { QREG_SOFTMAX_K } else { block_k };
        let f32_q_entry = match head_dim {
            128 if wgmma => Some("joint_attention_hd128_wgmma_f32q"),
            64 => Some("joint_attention_hd64_q_regs_f32q"),
            128 => Some("joint_attention_hd128_q_regs_f32q"),
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
            wgmma,
        })
    }

    pub fn block_q(&self) -> usize {
        self.warps * self.rows_per_warp
    }

    /// Dynamic shared memory: q [block_q][hd + pad], k [2][block_k][hd + pad],
    /// v [2][block_k][out_chunk + pad], all bf16; the wgmma kernel's ring of K and V tiles (two
    /// 64-dim halves of 128-byte rows each) plus the alignment slack.
    pub fn shared_bytes(&self) -> usize {
        if self.wgmma {
            return WGMMA_STAGES * 2 * self.block_k * self.head_dim * 2 + WGMMA_ALIGN;
        }
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
