//! Launcher of GroupNorm. Two implementations behind one API:
//! - resident (cuda_resident.rs, group_norm_resident.cu): one cooperative launch that keeps each
//!   CTA's slice of x in shared memory between the statistics and the output, 8 bytes per
//!   element; for inputs that fit the GPU's shared memory (384 ch up to 128² on the H200).
//! - two-pass (group_norm.cu): `group_norm_partial_stats` over (splits, groups), then
//!   `group_norm_normalize` over (plane chunks, channels), 12 bytes per element; any shape.
//!
//! [`group_norm`] / [`group_norm_silu`] run two-pass unless `BONSAI_GROUP_NORM` says
//! `resident` or `auto` ([`GroupNormPath::Auto`]: resident when it can run, else two-pass), the
//! resident path having measured no faster on the H200 ([`PATH_ENV`]); a forced resident call
//! that cannot run is an error naming why. Both use the one
//! caller-owned f64 scratch of [`scratch_len`] values, so a call can be captured in a CUDA graph
//! (no allocation per call). Its first value holds the resident path's barrier counter: it must
//! be ZERO before the first call (allocate it with `alloc_zeros`); every call leaves it zero.
//!
//! Speed of light on the H200 (copy 4.24 TB/s, read + write): two-pass moves
//! [`TRAFFIC_BYTES_PER_ELEMENT`] = 12 bytes per element (the statistics pass reads x, the
//! normalise pass reads it again and writes y), so 384 ch x 512² (100.7M elements, 1.21 GB) takes
//! at least 285 µs; 8 bytes per element (one read, one write, the resident path) is the floor for
//! any unfused GroupNorm, 190 µs there. Inputs up to ~60 MB (384 ch x 128²) stay in L2 between the
//! passes, and the normalise pass visits channels last-first so part of a larger input does too.

#[path = "cuda_resident.rs"]
pub mod resident;

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, LaunchConfig};

use crate::cuda::KernelLibrary;
use crate::launch_ex::Launch;
use crate::launch::{as_i32, expect_at_least, read_ptr, shape, write_ptr, LaunchError};

const OP: &str = "group_norm";
const THREADS: u32 = 256;
/// Bytes each element costs this implementation: read twice, written once.
pub const TRAFFIC_BYTES_PER_ELEMENT: usize = 12;
/// Statistics CTAs to aim for over all groups: 4 per SM of the H200's 132 (1024 threads, each
/// with 4 float4 loads in flight) fit in one wave at up to 64 registers per thread.
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

/// Scratch values before the partial sums: the resident path's barrier counter (a u32 in the
/// first f64, zero between calls).
const COUNTER_VALUES: usize = 1;

/// f64 values of scratch one call at `dims` needs, either path: the counter, then 2 per group
/// and statistics chunk (two-pass) or 2 per CTA and group (resident, at most
/// MAX_RESIDENT_CTAS CTAs). Value 0 must be zero before the first call.
pub fn scratch_len(dims: GroupNormDims) -> usize {
    let two_pass = 2 * dims.groups * dims.stats_split().1;
    let resident_path = 2 * (resident::MAX_RESIDENT_CTAS + dims.groups);
    COUNTER_VALUES + two_pass.max(resident_path)
}

/// Which implementation runs a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupNormPath {
    /// Resident when it can run (fits, aligned, cooperative), else two-pass.
    Auto,
    TwoPass,
    Resident,
}

impl GroupNormPath {
    /// Bytes per element the path moves (for bandwidth figures); Auto has no single answer.
    pub fn traffic_bytes_per_element(self) -> Option<usize> {
        match self {
            GroupNormPath::Auto => None,
            GroupNormPath::TwoPass => Some(TRAFFIC_BYTES_PER_ELEMENT),
            GroupNormPath::Resident => Some(resident::RESIDENT_TRAFFIC_BYTES_PER_ELEMENT),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            GroupNormPath::Auto => "auto",
            GroupNormPath::TwoPass => "two_pass",
            GroupNormPath::Resident => "resident",
        }
    }
}

/// `two_pass`, `resident` or `auto` picks the path of [`group_norm`] and [`group_norm_silu`]. The
/// default is two-pass: on the H200 (2026-11-30, commit 958b42c) the resident path measured
/// slower at 384 ch x 64² (13.39 vs 11.78 µs) and level at 128² (25.22 vs 26.06 µs).
pub const PATH_ENV: &str = "BONSAI_GROUP_NORM";

/// The path [`PATH_ENV`] asks for (read once); anything else than the two names is reported once
/// and ignored.
pub fn path_from_env() -> GroupNormPath {
    static PATH: std::sync::OnceLock<GroupNormPath> = std::sync::OnceLock::new();
    *PATH.get_or_init(|| parse_path(std::env::var(PATH_ENV).ok().as_deref()))
}

fn parse_path(value: Option<&str>) -> GroupNormPath {
    match value.map(str::trim) {
        None | Some("") => GroupNormPath::TwoPass,
        Some("auto") => GroupNormPath::Auto,
        Some("two_pass") => GroupNormPath::TwoPass,
        Some("resident") => GroupNormPath::Resident,
        Some(other) => {
            tracing::warn!("{PATH_ENV}={other:?} is none of two_pass, resident, auto; ignored");
            GroupNormPath::TwoPass
        }
    }
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

/// `y = (x − μ_g)/sqrt(σ²_g + eps)·gamma[c] + beta[c]` per group g (PyTorch GroupNorm), on the
/// path [`PATH_ENV`] asks for (default: two-pass).
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
    group_norm_with(lib, stream, x, gamma, beta, dims, eps, scratch, y, false, path_from_env()).map(drop)
}

/// `silu(group_norm(x))` in the same pass (the VAE's GroupNorm -> SiLU pairs): the SiLU costs
/// no memory traffic, saving the 8 bytes per element a separate `silu` call would move.
#[allow(clippy::too_many_arguments)]
pub fn group_norm_silu(
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
    group_norm_with(lib, stream, x, gamma, beta, dims, eps, scratch, y, true, path_from_env()).map(drop)
}

/// GroupNorm (then SiLU when `apply_silu`) on the given path; returns the path that ran (Auto
/// resolves to one of the two). A forced Resident call that cannot run is an error saying why.
#[allow(clippy::too_many_arguments)]
pub fn group_norm_with(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    x: &impl DevicePtr<f32>,
    gamma: &impl DevicePtr<f32>,
    beta: &impl DevicePtr<f32>,
    dims: GroupNormDims,
    eps: f32,
    scratch: &mut impl DevicePtrMut<f64>,
    y: &mut impl DevicePtrMut<f32>,
    apply_silu: bool,
    path: GroupNormPath,
) -> Result<GroupNormPath, LaunchError> {
    let p = plan(dims, [x.len(), gamma.len(), beta.len(), scratch.len(), y.len()], eps)?;
    let (x_p, _a) = read_ptr(x, stream);
    let (g_p, _b) = read_ptr(gamma, stream);
    let (b_p, _c) = read_ptr(beta, stream);
    let (s_p, _d) = write_ptr(scratch, stream);
    let (y_p, _e) = write_ptr(y, stream);
    // The partial sums of either path start after the counter.
    let partial = s_p + (COUNTER_VALUES * std::mem::size_of::<f64>()) as u64;
    let resident_geo = match path {
        GroupNormPath::TwoPass => None,
        GroupNormPath::Auto | GroupNormPath::Resident => {
            let geo = if (x_p | y_p) % 16 != 0 {
                Err("x and y must start on 16-byte boundaries".to_string())
            } else {
                resident::device_geometry(lib, stream, dims)?
            };
            match (geo, path) {
                (Ok(geo), _) => Some(geo),
                (Err(why), GroupNormPath::Resident) => return Err(shape(OP, format!("the resident path cannot run: {why}"))),
                (Err(_), _) => None,
            }
        }
    };
    if let Some(geo) = resident_geo {
        let args = resident::ResidentArgs { x: x_p, gamma: g_p, beta: b_p, partial, counter: s_p, y: y_p };
        resident::launch_resident(lib, stream, &args, dims, geo, eps, apply_silu)?;
        return Ok(GroupNormPath::Resident);
    }
    // Every value below fits its type: plan() bounded C by the grid (so G and C/G too), splits
    // by TARGET_STATS_CTAS, the plane chunks by the grid, and C·plane by i64.
    let (n_group, chunk_i, plane_i, plane_chunk_i) =
        (dims.group_len() as i64, p.chunk as i64, dims.plane as i64, PLANE_CHUNK as i64);
    let (channels_i, cpg_i, splits_i) = (dims.channels as i32, (dims.channels / dims.groups) as i32, p.splits as i32);
    let silu_i = i32::from(apply_silu);

    let stats = lib.function("group_norm_partial_stats")?;
    let mut l = Launch::new(lib, stream, stats);
    l.arg(&x_p).arg(&n_group).arg(&chunk_i).arg(&partial);
    let grid = (p.splits as u32, dims.groups as u32, 1);
    let cfg = LaunchConfig { grid_dim: grid, block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: matches group_norm_partial_stats(x, n_group, chunk, partial); x holds groups·n_group
    // floats, the scratch 2·groups·splits doubles after its counter, and splits·chunk >= n_group
    // (plan() checked all).
    unsafe { l.launch(cfg) }?;

    let normalize = lib.function("group_norm_normalize")?;
    // With PDL the normalise CTAs start while the statistics launch drains (group_norm.cu: they
    // read x before griddep_wait and the partial sums after it).
    let mut l = Launch::new(lib, stream, normalize);
    l.arg(&x_p).arg(&g_p).arg(&b_p).arg(&partial).arg(&eps).arg(&channels_i).arg(&cpg_i).arg(&plane_i).arg(&splits_i);
    l.arg(&plane_chunk_i).arg(&silu_i).arg(&y_p);
    let grid = (p.plane_chunks as u32, dims.channels as u32, 1);
    let cfg = LaunchConfig { grid_dim: grid, block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: matches group_norm_normalize(x, gamma, beta, partial, eps, C, C/G, plane, splits,
    // plane_chunk, apply_silu, y); every buffer's length was checked by plan() and the partial
    // sums are written by the statistics launch just queued on the same stream.
    unsafe { l.launch(cfg) }?;
    Ok(GroupNormPath::TwoPass)
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
            assert!(scratch > 2 * groups * p.splits && scratch > 2 * (resident::MAX_RESIDENT_CTAS + groups), "{dims:?}");
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
        assert_eq!(parse_path(None), GroupNormPath::TwoPass);
        assert_eq!(parse_path(Some("auto")), GroupNormPath::Auto);
        assert_eq!(parse_path(Some(" two_pass ")), GroupNormPath::TwoPass);
        assert_eq!(parse_path(Some("resident")), GroupNormPath::Resident);
        assert_eq!(parse_path(Some("fast")), GroupNormPath::TwoPass);
        assert!(plan(dims, ok, 0.0).is_err() && plan(dims, ok, f32::NAN).is_err(), "eps");
        let wide = GroupNormDims { channels: 70_000, groups: 70_000, plane: 1 };
        assert!(plan(wide, [1 << 20; 5], 1e-6).is_err(), "channels beyond gridDim.y");
    }
}
