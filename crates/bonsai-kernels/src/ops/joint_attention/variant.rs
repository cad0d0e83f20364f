//! Which flash kernel serves a head dim: [`SmallHeadKernel`] (the hd 64 / 128 choice,
//! [`KERNEL_ENV`]) and [`FlashVariant`] (entry points, tile sizes, launch shape).

use std::sync::Arc;

use cudarc::driver::{CudaStream, LaunchConfig};

use super::{
    HEAD_DIMS, LARGE_HD_BLOCK_K, LARGE_HD_CHUNK, LARGE_HD_WARPS, OP, QREG_BLOCK_K,
    QREG_ROWS_PER_WARP, QREG_SOFTMAX_K, QREG_WARPS, ROWS_PER_WARP, ROW_PAD, SMALL_HD_BLOCK_K,
    SMALL_HD_WARPS, WGMMA_ALIGN, WGMMA_BLOCK_K, WGMMA_STAGES, WGMMA_WARPGROUPS, WIDE_BLOCK_K,
    WIDE_ROWS_PER_WARP, WIDE_WARPS,
};
use crate::launch::{shape, LaunchError};
use crate::ops::joint_attention::AttnDims;

/// Environment variable choosing the hd 64 / 128 kernel: unset picks the best for the device
/// (`wgmma` at hd 128 on compute capability 9.0, else `qregs`), `wgmma` the warpgroup-MMA
/// kernel (hd 128 on sm_90 only: elsewhere an error), `qregs` the Q-in-registers mma.sync
/// kernels, `wide` (32 rows per warp, Q re-read from shared memory every tile) and `old` (16-row
/// warps) the earlier ones (kept so one GPU run can time them all; `verify --bench` also times
/// them side by side). Any other value is an error.
pub const KERNEL_ENV: &str = "BONSAI_JOINT_ATTENTION";

/// Which kernel serves hd 64 / 128 (hd 384 / 512 have one kernel each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmallHeadKernel {
    /// joint_attention_hd128_wgmma: 2 warpgroups x 64 query rows on wgmma (sm_90a) running half
    /// a tile apart, 128-key tiles and softmax steps, one CTA per SM. hd 128 only.
    Wgmma,
    /// joint_attention_hd{64,128}_q_regs: 4 warps x 32 query rows, Q's fragments in registers,
    /// the online softmax per 32 keys, two CTAs per SM.
    QRegs,
    /// joint_attention_hd{64,128}_wide_warp: 4 warps x 32 query rows, two CTAs per SM.
    WideWarp,
    /// joint_attention_hd{64,128}: 8 warps x 16 query rows, one CTA per SM.
    SixteenRowWarp,
}

impl SmallHeadKernel {
    /// The mma.sync kernels, which every device and both small head dims have.
    pub const MMA_SYNC: [Self; 3] = [Self::QRegs, Self::WideWarp, Self::SixteenRowWarp];

    /// Every kernel that can run `head_dim` on a device with (`wgmma`) or without warpgroup
    /// MMA: what verify checks and bench times.
    pub fn available(head_dim: usize, wgmma: bool) -> Vec<Self> {
        let mut kinds = Vec::from(Self::MMA_SYNC);
        if wgmma && head_dim == WGMMA_HEAD_DIM {
            kinds.insert(0, Self::Wgmma);
        }
        kinds
    }

    /// The choice [`KERNEL_ENV`] asks for at `head_dim` on a device with or without wgmma.
    pub fn from_env(head_dim: usize, wgmma: bool) -> Result<Self, LaunchError> {
        let choice = match std::env::var(KERNEL_ENV) {
            Err(std::env::VarError::NotPresent) => Self::parse(None),
            Ok(v) => Self::parse(Some(&v)),
            Err(e) => Err(shape(OP, format!("{KERNEL_ENV}: {e}"))),
        }?;
        Self::resolve(choice, head_dim, wgmma)
    }

    /// The choice a [`KERNEL_ENV`] value (None: unset, i.e. the best for the device) names.
    pub fn parse(value: Option<&str>) -> Result<Option<Self>, LaunchError> {
        match value {
            None => Ok(None),
            Some("wgmma") => Ok(Some(Self::Wgmma)),
            Some("qregs") => Ok(Some(Self::QRegs)),
            Some("wide") => Ok(Some(Self::WideWarp)),
            Some("old") => Ok(Some(Self::SixteenRowWarp)),
            Some(v) => Err(shape(
                OP,
                format!("{KERNEL_ENV}={v:?}: expected `wgmma`, `qregs`, `wide` or `old`"),
            )),
        }
    }

    /// A parsed choice made concrete: the default is wgmma where it runs (hd 128, sm_90), else
    /// the Q-in-registers kernel; an explicit wgmma where it cannot run is an error (hd 384 / 512
    /// ignore the choice: one kernel each).
    pub fn resolve(choice: Option<Self>, head_dim: usize, wgmma: bool) -> Result<Self, LaunchError> {
        let runs_wgmma = wgmma && head_dim == WGMMA_HEAD_DIM;
        match choice {
            None if runs_wgmma => Ok(Self::Wgmma),
            None => Ok(Self::QRegs),
            Some(Self::Wgmma) if !runs_wgmma && head_dim <= WGMMA_HEAD_DIM => Err(shape(
                OP,
                format!(
                    "{KERNEL_ENV}=wgmma needs head_dim {WGMMA_HEAD_DIM} on compute capability 9.0 \
                     (head_dim {head_dim}, wgmma device: {wgmma})"
                ),
            )),
            Some(kind) => Ok(kind),
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
    /// The kernel for `head_dim` on the device of `stream` ([`KERNEL_ENV`] picks among the
    /// hd 64 / 128 ones), or a shape error naming the supported head dims.
    pub fn for_device(stream: &Arc<CudaStream>, head_dim: usize) -> Result<Self, LaunchError> {
        let wgmma = crate::launch::matmul::device_has_wgmma(stream)?;
        Self::select(head_dim, SmallHeadKernel::from_env(head_dim, wgmma)?)
    }

    /// The kernel for `head_dim`, `small` choosing among the hd 64 / 128 ones.
    pub fn select(head_dim: usize, small: SmallHeadKernel) -> Result<Self, LaunchError> {
        let wide = small == SmallHeadKernel::WideWarp;
        let q_regs = small == SmallHeadKernel::QRegs;
        let wgmma = small == SmallHeadKernel::Wgmma && head_dim <= WGMMA_HEAD_DIM;
        let (entry, warps, rows_per_warp, block_k, out_chunk) = match head_dim {
            128 if wgmma => ("joint_attention_hd128_wgmma", 4 * WGMMA_WARPGROUPS, 16, WGMMA_BLOCK_K, 128),
            64 if wgmma => {
                return Err(shape(OP, format!("the wgmma kernel is for head_dim {WGMMA_HEAD_DIM}, not 64")))
            }
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
            128 if wgmma => Some("joint_attention_hd128_wgmma_f32q"),
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
