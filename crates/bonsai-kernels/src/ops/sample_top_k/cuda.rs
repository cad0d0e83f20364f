//! Launcher of the device sampler (sample_top_k.cu): `sample_block_candidates` then
//! `sample_finalize`.


use cudarc::driver::{DevicePtr, DevicePtrMut};

use crate::launch_ex::Launch;
use crate::launch::{Gpu, as_i32, expect_at_least, grid_1d, read_ptr, shape, write_ptr, LaunchError};
use crate::ops::sample_top_k::{SampleParams, MAX_DEVICE_TOP_K};

/// CTAs of the first launch (SAMPLE_BLOCKS in sample_top_k.cu).
pub const BLOCKS: usize = 64;
/// Keys one CTA sorts (SAMPLE_SLICE_MAX): the largest vocabulary is BLOCKS x this.
pub const SLICE_MAX: usize = 4096;
/// Threads of both launches (SAMPLE_THREADS).
const THREADS: u32 = 1024;
/// u64 words of the generator state.
pub const RNG_WORDS: usize = 4;
/// Written to `out[0]` when no logit is > -inf (SAMPLE_NONE).
pub const SAMPLE_NONE: u32 = u32::MAX;

/// u64 elements of the candidate scratch buffer `sample_top_k` needs.
pub const fn candidate_scratch_len() -> usize {
    BLOCKS * MAX_DEVICE_TOP_K
}

/// Draws `out[0]` from `logits[..n]` under `params` (top_k in 1..=MAX_DEVICE_TOP_K), using and
/// advancing the xoshiro256** state in `rng_state[..4]`. `candidates` is scratch of
/// [`candidate_scratch_len`] elements.
#[allow(clippy::too_many_arguments)]
pub fn sample_top_k(
    gpu: Gpu<'_>,
    logits: &impl DevicePtr<f32>,
    n: usize,
    params: &SampleParams,
    rng_state: &mut impl DevicePtrMut<u64>,
    candidates: &mut impl DevicePtrMut<u64>,
    out: &mut impl DevicePtrMut<u32>,
) -> Result<(), LaunchError> {
    const OP: &str = "sample_top_k";
    params.validate().map_err(|e| shape(OP, e.to_string()))?;
    if !params.fits_device() {
        return Err(shape(OP, format!("top_k = {} must be in 1..={MAX_DEVICE_TOP_K} on the GPU", params.top_k)));
    }
    if n == 0 || n > BLOCKS * SLICE_MAX {
        return Err(shape(OP, format!("{n} logits: the GPU sampler takes 1..={}", BLOCKS * SLICE_MAX)));
    }
    expect_at_least(OP, "logits", logits.len(), n)?;
    expect_at_least(OP, "rng state", rng_state.len(), RNG_WORDS)?;
    expect_at_least(OP, "candidates", candidates.len(), candidate_scratch_len())?;
    expect_at_least(OP, "out", out.len(), 1)?;
    let slice = n.div_ceil(BLOCKS);
    let blocks = n.div_ceil(slice) as u32;
    let (n_u, slice_u) = (as_i32(OP, "n", n)? as u32, slice as u32);
    let top_k = params.top_k as u32;

    let (l_p, _a) = read_ptr(logits, gpu.stream);
    let (c_p, _b) = write_ptr(candidates, gpu.stream);
    let mut first = Launch::new(gpu, gpu.function("sample_block_candidates")?);
    first.arg(&l_p).arg(&n_u).arg(&params.inv_temperature).arg(&slice_u).arg(&c_p);
    // SAFETY: matches sample_block_candidates(logits, n, inv_t, slice, candidates): n logits,
    // slice <= SLICE_MAX, candidates hold blocks x MAX_DEVICE_TOP_K keys.
    unsafe { first.launch(grid_1d(blocks, THREADS)) }?;

    let (r_p, _c) = write_ptr(rng_state, gpu.stream);
    let (o_p, _d) = write_ptr(out, gpu.stream);
    let mut second = Launch::new(gpu, gpu.function("sample_finalize")?);
    second.arg(&c_p).arg(&blocks).arg(&top_k).arg(&params.top_p).arg(&params.min_p).arg(&r_p).arg(&o_p);
    // SAFETY: matches sample_finalize(candidates, blocks, top_k, top_p, min_p, rng_state, out);
    // lengths checked above.
    unsafe { second.launch(grid_1d(1, THREADS)) }?;
    Ok(())
}
