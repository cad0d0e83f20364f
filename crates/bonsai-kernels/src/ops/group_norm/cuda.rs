//! Launcher of GroupNorm (group_norm.cu), two kernels: `group_norm_partial_stats` over (splits,
//! groups) sums each piece of a group in f64, then `group_norm_normalize` over (plane chunks,
//! channels) combines a group's pieces in a fixed order and writes y; any shape.
//! [`group_norm_silu`] applies SiLU in the normalise pass.
//!
//! [`group_norm`] and [`group_norm_silu`] take a caller-owned f64 scratch of [`scratch_len`]
//! values (the partial sums, from its first value on), so a call can be captured in a CUDA graph
//! (no allocation per call). Its contents need no initialisation: the statistics pass writes
//! every value the normalise pass reads.
//!
//! Speed of light on the H200 (copy 4.24 TB/s, read + write): [`TRAFFIC_BYTES_PER_ELEMENT`] = 12
//! bytes per element (the statistics pass reads x, the normalise pass reads it again and writes
//! y), so 384 ch x 512² (100.7M elements, 1.21 GB) takes at least 285 µs. Inputs up to ~60 MB
//! (384 ch x 128²) stay in L2 between the passes, and the normalise pass visits channels
//! last-first so part of a larger input does too.


use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig};

use crate::launch_ex::Launch;
use crate::launch::{Gpu, as_i32, expect_at_least, read_ptr, shape, write_ptr, LaunchError};

const OP: &str = "group_norm";
const THREADS: u32 = 256;
/// Bytes each element costs this implementation: read twice, written once.
pub const TRAFFIC_BYTES_PER_ELEMENT: usize = 12;
/// Statistics CTAs to aim for over all groups: a fixed grid target, 4 per SM of the H200's 132
/// (1024 threads per SM, each with 4 float4 loads in flight), one wave there at up to 64
/// registers per thread. Correct on any GPU: one with fewer SMs runs the grid in more waves, one
/// with more holds fewer CTAs per SM. It is not sized from the device's SM count because
/// [`scratch_len`] derives the scratch from the same split without a device, and a fixed split
/// keeps the order in which a group's pieces are summed the same on every GPU.
const TARGET_STATS_CTAS: usize = 132 * 4;
/// A statistics chunk is never cut below this many floats (per-CTA overheads stay small).
const MIN_STATS_CHUNK: usize = 4096;
/// Floats of one channel plane each normalise CTA writes (16 float4 per thread at 256 threads:
/// the per-CTA preamble, combining the group's partial sums, stays a few percent of its time).
pub const PLANE_CHUNK: usize = 16384;

/// GroupNorm geometry: `x, y: [channels, plane]`, `groups` groups of `channels / groups` channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GroupNormDims {
    pub channels: usize,
    pub groups: usize,
    /// H·W.
    pub plane: usize,
}

impl GroupNormDims {
    fn validate(&self) -> Result<usize, LaunchError> {
        let GroupNormDims { channels, groups, plane } = *self;
        if channels == 0 || groups == 0 || plane == 0 || channels % groups != 0 {
            return Err(shape(OP, format!("{channels} channels x {plane} pixels do not split into {groups} non-empty groups")));
        }
        channels
            .checked_mul(plane)
            .filter(|&n| i64::try_from(n).is_ok())
            .ok_or_else(|| shape(OP, format!("{channels} x {plane} overflows")))
    }
    fn group_len(&self) -> usize {
        self.channels / self.groups * self.plane
    }
    /// (floats per statistics chunk, a multiple of 4; chunks per group).
    fn stats_split(&self) -> (usize, usize) {
        let n = self.group_len();
        let wanted = TARGET_STATS_CTAS.div_ceil(self.groups).max(1);
        let splits = n.div_ceil(MIN_STATS_CHUNK).clamp(1, wanted);
        let chunk = n.div_ceil(splits).next_multiple_of(4);
        (chunk, n.div_ceil(chunk))
    }
}

/// f64 values of scratch one call at `dims` needs: 2 per group and statistics chunk.
pub fn scratch_len(dims: GroupNormDims) -> usize {
    2 * dims.groups * dims.stats_split().1
}

/// Launch geometry of one call, from [`plan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GroupNormPlan {
    /// Floats per statistics chunk (a multiple of 4) and chunks per group.
    pub chunk: usize,
    pub splits: usize,
    /// Normalise CTAs per channel plane.
    pub plane_chunks: usize,
}

/// Checks every length and limit of a call (no device needed) and returns its geometry.
pub(crate) fn plan(
    dims: GroupNormDims,
    lens: [usize; 5], // x, gamma, beta, scratch (f64), y
    eps: f32,
) -> Result<GroupNormPlan, LaunchError> {
    let len = dims.validate()?;
    let [x_len, gamma_len, beta_len, scratch_len_got, y_len] = lens;
    expect_at_least(OP, "x", x_len, len)?;
    expect_at_least(OP, "gamma", gamma_len, dims.channels)?;
    expect_at_least(OP, "beta", beta_len, dims.channels)?;
    expect_at_least(OP, "scratch", scratch_len_got, scratch_len(dims))?;
    expect_at_least(OP, "y", y_len, len)?;
    if !(eps > 0.0 && eps.is_finite()) {
        return Err(shape(OP, format!("eps = {eps} must be positive and finite")));
    }
    if dims.channels > MAX_GRID_Y as usize {
        return Err(shape(OP, format!("{} channels exceed the grid's {MAX_GRID_Y}", dims.channels)));
    }
    as_i32(OP, "C / G", dims.channels / dims.groups)?;
    let (chunk, splits) = dims.stats_split();
    let plane_chunks = dims.plane.div_ceil(PLANE_CHUNK);
    if plane_chunks > MAX_GRID_X as usize {
        return Err(shape(OP, format!("a {}-pixel plane exceeds the grid", dims.plane)));
    }
    Ok(GroupNormPlan { chunk, splits, plane_chunks })
}

/// `y = (x − μ_g)/sqrt(σ²_g + eps)·gamma[c] + beta[c]` per group g (PyTorch GroupNorm): the
/// statistics launch, then the normalise launch. With `fused_silu`, `silu(group_norm(x))` in the
/// same pass (the VAE's GroupNorm -> SiLU pairs): the SiLU costs no memory traffic, saving the 8
/// bytes per element a separate `silu` call would move.
#[allow(clippy::too_many_arguments)]
pub fn group_norm(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    gamma: &impl DevicePtr<f32>,
    beta: &impl DevicePtr<f32>,
    dims: GroupNormDims,
    eps: f32,
    scratch: &mut impl DevicePtrMut<f64>,
    y: &mut impl DevicePtrMut<f32>,
    fused_silu: bool,
) -> Result<(), LaunchError> {
    let p = plan(dims, [x.len(), gamma.len(), beta.len(), scratch.len(), y.len()], eps)?;
    let (x_p, _a) = read_ptr(x, gpu.stream);
    let (g_p, _b) = read_ptr(gamma, gpu.stream);
    let (b_p, _c) = read_ptr(beta, gpu.stream);
    let (partial, _d) = write_ptr(scratch, gpu.stream);
    let (y_p, _e) = write_ptr(y, gpu.stream);
    // Every value below fits its type: plan() bounded C by the grid (so G and C/G too), splits
    // by TARGET_STATS_CTAS, the plane chunks by the grid, and C·plane by i64.
    let (n_group, chunk_i, plane_i, plane_chunk_i) =
        (dims.group_len() as i64, p.chunk as i64, dims.plane as i64, PLANE_CHUNK as i64);
    let (channels_i, cpg_i, splits_i) = (dims.channels as i32, (dims.channels / dims.groups) as i32, p.splits as i32);
    let silu_i = i32::from(fused_silu);

    let stats = gpu.function("group_norm_partial_stats")?;
    let mut l = Launch::new(gpu, stats);
    l.arg(&x_p).arg(&n_group).arg(&chunk_i).arg(&partial);
    let grid = (p.splits as u32, dims.groups as u32, 1);
    let cfg = LaunchConfig { grid_dim: grid, block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: matches group_norm_partial_stats(x, n_group, chunk, partial); x holds groups·n_group
    // floats, the scratch 2·groups·splits doubles, and splits·chunk >= n_group (plan() checked
    // all).
    unsafe { l.launch(cfg) }?;

    let normalize = gpu.function("group_norm_normalize")?;
    // With PDL the normalise CTAs start while the statistics launch drains (group_norm.cu: they
    // read x before griddep_wait and the partial sums after it).
    let mut l = Launch::new(gpu, normalize);
    l.arg(&x_p).arg(&g_p).arg(&b_p).arg(&partial).arg(&eps).arg(&channels_i).arg(&cpg_i).arg(&plane_i).arg(&splits_i);
    l.arg(&plane_chunk_i).arg(&silu_i).arg(&y_p);
    let grid = (p.plane_chunks as u32, dims.channels as u32, 1);
    let cfg = LaunchConfig { grid_dim: grid, block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: matches group_norm_normalize(x, gamma, beta, partial, eps, C, C/G, plane, splits,
    // plane_chunk, fused_silu, y); every buffer's length was checked by plan() and the partial
    // sums are written by the statistics launch just queued on the same gpu.stream.
    unsafe { l.launch(cfg) }
}

/// CUDA's limits on gridDim.y and gridDim.x.
const MAX_GRID_Y: u32 = 65_535;
const MAX_GRID_X: u32 = i32::MAX as u32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_cover_every_group_exactly_once() {
        for (channels, groups, plane) in [(384, 32, 512 * 512), (384, 32, 64 * 64), (96, 32, 1), (5, 5, 9), (6, 3, 25), (64, 32, 63)] {
            let dims = GroupNormDims { channels, groups, plane };
            let len = channels * plane;
            let scratch = scratch_len(dims);
            let p = plan(dims, [len, channels, channels, scratch, len], 1e-6).expect("valid");
            let n = dims.group_len();
            assert_eq!(p.chunk % 4, 0, "{dims:?}");
            assert!(p.splits * p.chunk >= n && (p.splits - 1) * p.chunk < n, "{dims:?}: {p:?} leaves a chunk empty or a gap");
            assert!(p.splits <= TARGET_STATS_CTAS.div_ceil(groups).max(1), "{dims:?}: {p:?}");
            assert_eq!(scratch, 2 * groups * p.splits, "{dims:?}");
            assert!(p.plane_chunks * PLANE_CHUNK >= plane);
        }
        // The largest VAE group (12 channels x 512²) is split so all groups fill the GPU once.
        let big = plan(GroupNormDims { channels: 384, groups: 32, plane: 1 << 18 }, [1 << 30; 5], 1e-6).expect("valid");
        assert_eq!(big.splits, TARGET_STATS_CTAS.div_ceil(32), "{big:?}");
    }

    #[test]
    fn bad_calls_are_errors_before_any_launch() {
        let dims = GroupNormDims { channels: 64, groups: 32, plane: 9 };
        let ok = [576, 64, 64, scratch_len(dims), 576];
        assert!(plan(dims, ok, 1e-6).is_ok());
        for (i, what) in ["x", "gamma", "beta", "scratch", "y"].iter().enumerate() {
            let mut lens = ok;
            lens[i] -= 1;
            let err = plan(dims, lens, 1e-6).expect_err("short buffer");
            assert!(err.to_string().contains(&format!("group_norm: {what} holds")), "{err}");
        }
        assert!(plan(GroupNormDims { channels: 63, ..dims }, ok, 1e-6).is_err(), "C % G");
        assert!(plan(GroupNormDims { groups: 0, ..dims }, ok, 1e-6).is_err());
        assert!(plan(GroupNormDims { plane: 0, ..dims }, ok, 1e-6).is_err());
        assert!(plan(dims, ok, 0.0).is_err() && plan(dims, ok, f32::NAN).is_err(), "eps");
        let wide = GroupNormDims { channels: 70_000, groups: 70_000, plane: 1 };
        assert!(plan(wide, [1 << 20; 5], 1e-6).is_err(), "channels beyond gridDim.y");
    }
}
