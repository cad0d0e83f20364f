//! Which flash kernel serves a head dim: [`SmallHeadKernel`] (the hd 64 / 128 choice, made from
//! the device's capability) and [`FlashVariant`] (entry points, tile sizes, launch shape).

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaStream, LaunchConfig};

use super::{
    COMPACT_BLOCK_K, COMPACT_WARPS, HEAD_DIMS, LARGE_HD_BLOCK_K, LARGE_HD_CHUNK, LARGE_HD_WARPS, OP,
    QREG_BLOCK_K, QREG_ROWS_PER_WARP, QREG_SOFTMAX_K, QREG_WARPS, ROWS_PER_WARP, ROW_PAD,
    WGMMA_ALIGN, WGMMA_BLOCK_K, WGMMA_STAGES, WGMMA_WARPGROUPS,
};
use crate::launch::{device_attribute, shape, LaunchError};
use crate::ops::joint_attention::AttnDims;

/// Which kernel serves hd 64 / 128 (hd 384 / 512 have their own: the default tiles and, where
/// those do not fit, the compact ones, [`FlashVariant::compact`]).
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
    /// A Q-in-registers kernel: Q's tile is staged in the second K/V buffer (no region of its own).
    pub q_in_registers: bool,
}

impl FlashVariant {
    /// The kernel for `head_dim` on the device of `stream` ([`SmallHeadKernel::for_device`]
    /// picks among the hd 64 / 128 ones; at hd 384 / 512 the compact kernel where the default's
    /// tiles exceed the opt-in shared memory: sm_86/89/120), or a shape error naming the
    /// supported head dims.
    pub fn for_device(stream: &Arc<CudaStream>, head_dim: usize) -> Result<Self, LaunchError> {
        let wgmma = crate::launch::matmul::device_has_wgmma(stream)?;
        let chosen = Self::select(head_dim, SmallHeadKernel::for_device(head_dim, wgmma))?;
        if head_dim > WGMMA_HEAD_DIM && chosen.shared_bytes() > opt_in_limit(stream)? {
            return Self::compact(head_dim);
        }
        Ok(chosen)
    }

    /// Every kernel for `head_dim` this device runs, the launchers' choice ([`Self::for_device`])
    /// first: what verify checks and bench times. hd 64 / 128: [`SmallHeadKernel::available`];
    /// hd 384 / 512: the default tiles where they fit and the compact ones (which fit anywhere).
    pub fn available(stream: &Arc<CudaStream>, head_dim: usize) -> Result<Vec<Self>, LaunchError> {
        let chosen = Self::for_device(stream, head_dim)?;
        let mut all = vec![chosen];
        if head_dim <= WGMMA_HEAD_DIM {
            let wgmma = crate::launch::matmul::device_has_wgmma(stream)?;
            for kind in SmallHeadKernel::available(head_dim, wgmma) {
                all.push(Self::select(head_dim, kind)?);
            }
        } else {
            let default = Self::select(head_dim, SmallHeadKernel::QRegs)?;
            if default.shared_bytes() <= opt_in_limit(stream)? {
                all.push(default);
            }
            all.push(Self::compact(head_dim)?);
        }
        let mut distinct: Vec<Self> = Vec::new();
        for v in all {
            if !distinct.contains(&v) {
                distinct.push(v);
            }
        }
        Ok(distinct)
    }

    /// The compact kernel for hd 384 / 512 (`joint_attention_hd{384,512}_compact`: 2 warps,
    /// 16-key tiles), whose CTA fits 99 KB of shared memory; an error at other head dims.
    pub fn compact(head_dim: usize) -> Result<Self, LaunchError> {
        let entry = match head_dim {
            384 => "joint_attention_hd384_compact",
            512 => "joint_attention_hd512_compact",
            _ => return Err(shape(OP, format!("no compact kernel for head_dim {head_dim} (384 or 512)"))),
        };
        Ok(Self {
            entry,
            head_dim,
            warps: COMPACT_WARPS,
            rows_per_warp: ROWS_PER_WARP,
            block_k: COMPACT_BLOCK_K,
            softmax_keys: COMPACT_BLOCK_K,
            out_chunk: LARGE_HD_CHUNK,
            f32_q_entry: None,
            wgmma: false,
            q_in_registers: false,
        })
    }

    /// The kernel for `head_dim`, `small` choosing among the hd 64 / 128 ones (hd 384 / 512
    /// ignore it: their default tiles, [`Self::compact`] the others); wgmma at hd 64 is an error.
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
            q_in_registers: !wgmma && head_dim <= WGMMA_HEAD_DIM,
        })
    }

    pub fn block_q(&self) -> usize {
        self.warps * self.rows_per_warp
    }

    /// Dynamic shared memory: q [block_q][hd + pad], k [2][block_k][hd + pad],
    /// v [2][block_k][out_chunk + pad], all bf16, except that the Q-in-registers kernels stage q
    /// in the second K/V buffer; the wgmma kernel's ring of K and V tiles (two 64-dim halves of
    /// 128-byte rows each) plus the alignment slack.
    pub fn shared_bytes(&self) -> usize {
        if self.wgmma {
            return WGMMA_STAGES * 2 * self.block_k * self.head_dim * 2 + WGMMA_ALIGN;
        }
        let qk_row = self.head_dim + ROW_PAD;
        let v_row = self.out_chunk + ROW_PAD;
        let q = if self.q_in_registers { 0 } else { self.block_q() * qk_row };
        let elems = q + 2 * self.block_k * qk_row + 2 * self.block_k * v_row;
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

/// The device's opt-in shared memory per CTA.
fn opt_in_limit(stream: &Arc<CudaStream>) -> Result<usize, LaunchError> {
    device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
}

/// Largest gridDim.y (and z) CUDA allows.
const MAX_GRID_Y: u32 = 65_535;
