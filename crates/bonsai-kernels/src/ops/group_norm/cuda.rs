//! Launcher of GroupNorm (group_norm.cu): `group_norm_partial_stats` over (splits, groups), then
//! `group_norm_normalize` over (plane chunks, channels), with a caller-owned f64 scratch of
//! [`scratch_len`] values so the pair can be captured in a CUDA graph (no allocation per call).
//!
//! Speed of light on the H200 (copy 4.24 TB/s, read + write): this design moves
//! [`TRAFFIC_BYTES_PER_ELEMENT`] = 12 bytes per element (the statistics pass reads x, the
//! normalise pass reads it again and writes y), so 384 ch x 512² (100.7M elements, 1.21 GB) takes
//! at least 285 µs; 8 bytes per element (one read, one write) is the floor for any unfused
//! GroupNorm, 190 µs there. Inputs up to ~60 MB (384 ch x 128²) stay in L2 between the passes,
//! and the normalise pass visits channels last-first so part of a larger input does too.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use crate::cuda::KernelLibrary;
use crate::launch::{as_i32, expect_at_least, read_ptr, shape, write_ptr, LaunchError};

const OP: &str = "group_norm";
const THREADS: u32 = 256;
/// Bytes each element costs this implementation: read twice, written once.
pub const TRAFFIC_BYTES_PER_ELEMENT: usize = 12;
/// Statistics CTAs to aim for over all groups: 8 per SM of the H200's 132 keeps every SM full.
const TARGET_STATS_CTAS: usize = 132 * 8;
/// A statistics chunk is never cut below this many floats (per-CTA overheads stay small).
const MIN_STATS_CHUNK: usize = 4096;
/// Floats of one channel plane each normalise CTA writes (8 float4 per thread at 256 threads).
pub const PLANE_CHUNK: usize = 8192;

/// GroupNorm geometry: `x, y: [channels, plane]`, `groups` groups of `channels / groups` channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// f64 values of scratch one call at `dims` needs (2 per group and statistics chunk).
pub fn scratch_len(dims: GroupNormDims) -> usize {
    2 * dims.groups * dims.stats_split().1
}

/// `y = (x − μ_g)/sqrt(σ²_g + eps)·gamma[c] + beta[c]` per group g (PyTorch GroupNorm).
#[allow(clippy::too_many_arguments)]
pub fn group_norm(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    x: &impl DevicePtr<f32>,
    gamma: &impl DevicePtr<f32>,
    beta: &impl DevicePtr<f32>,
    dims: GroupNormDims,
    eps: f32,
    scratch: &mut impl DevicePtrMut<f64>,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    let len = dims.validate()?;
    expect_at_least(OP, "x", x.len(), len)?;
    expect_at_least(OP, "gamma", gamma.len(), dims.channels)?;
    expect_at_least(OP, "beta", beta.len(), dims.channels)?;
    expect_at_least(OP, "scratch", scratch.len(), scratch_len(dims))?;
    expect_at_least(OP, "y", y.len(), len)?;
    if !(eps > 0.0 && eps.is_finite()) {
        return Err(shape(OP, format!("eps = {eps} must be positive and finite")));
    }
    let (chunk, splits) = dims.stats_split();
    let groups_u = u32::try_from(dims.groups).map_err(|_| shape(OP, format!("{} groups exceed the grid", dims.groups)))?;
    let channels_u = u32::try_from(dims.channels).ok().filter(|&c| c <= MAX_GRID_Y).ok_or_else(|| {
        shape(OP, format!("{} channels exceed the grid's {MAX_GRID_Y}", dims.channels))
    })?;
    let splits_i = as_i32(OP, "statistics splits", splits)?;
    let plane_chunks = u32::try_from(dims.plane.div_ceil(PLANE_CHUNK)).map_err(|_| shape(OP, "plane too large".into()))?;
    let (n_group, chunk_i, plane_i, plane_chunk_i) =
        (dims.group_len() as i64, chunk as i64, dims.plane as i64, PLANE_CHUNK as i64);
    let (channels_i, cpg_i) = (dims.channels as i32, (dims.channels / dims.groups) as i32);
    if groups_u > MAX_GRID_Y {
        return Err(shape(OP, format!("{groups_u} groups exceed the grid's {MAX_GRID_Y}")));
    }

    let (x_p, _a) = read_ptr(x, stream);
    let (g_p, _b) = read_ptr(gamma, stream);
    let (b_p, _c) = read_ptr(beta, stream);
    let (s_p, _d) = write_ptr(scratch, stream);
    let (y_p, _e) = write_ptr(y, stream);

    let stats = lib.function("group_norm_partial_stats")?;
    let mut l = stream.launch_builder(stats);
    l.arg(&x_p).arg(&n_group).arg(&chunk_i).arg(&s_p);
    let cfg = LaunchConfig { grid_dim: (splits as u32, groups_u, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: matches group_norm_partial_stats(x, n_group, chunk, partial); x holds groups·n_group
    // floats, scratch 2·groups·splits doubles, and splits·chunk >= n_group (checked above).
    unsafe { l.launch(cfg) }?;

    let normalize = lib.function("group_norm_normalize")?;
    let mut l = stream.launch_builder(normalize);
    l.arg(&x_p).arg(&g_p).arg(&b_p).arg(&s_p).arg(&eps).arg(&channels_i).arg(&cpg_i).arg(&plane_i).arg(&splits_i);
    l.arg(&plane_chunk_i).arg(&y_p);
    let cfg = LaunchConfig { grid_dim: (plane_chunks, channels_u, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: matches group_norm_normalize(x, gamma, beta, partial, eps, C, C/G, plane, splits,
    // plane_chunk, y); every buffer's length was checked above and the scratch was written by
    // the statistics launch just queued on the same stream.
    unsafe { l.launch(cfg) }?;
    Ok(())
}

/// CUDA's limit on gridDim.y.
const MAX_GRID_Y: u32 = 65_535;
