//! Launcher of `sample_rows` (sample_rows.cu): every row's pick in one launch of (CTAs per row,
//! rows) CTAs, each row split as the one-row sampler splits its logits.

use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig};

use crate::launch::sample_top_k::{BLOCKS, RNG_WORDS, SLICE_MAX};
use crate::launch::{as_i32, expect_at_least, read_ptr, shape, write_ptr, Gpu, LaunchError};
use crate::launch_ex::Launch;
use crate::ops::sample_rows::SETTING_WORDS;
use crate::ops::sample_top_k::MAX_DEVICE_TOP_K;

/// Threads per CTA (SAMPLE_THREADS).
const THREADS: u32 = 1024;

/// u64 elements of the candidate scratch for `rows` rows.
pub const fn candidate_scratch_len(rows: usize) -> usize {
    rows * BLOCKS * MAX_DEVICE_TOP_K
}

/// The per-sequence state the kernel reads and advances: `settings` ([`SETTING_WORDS`] u32 per
/// sequence, `SeqPick::device_words`) and `rng` ([`RNG_WORDS`] u64 per sequence).
pub struct SeqSettings<'a, S: DevicePtr<u32>, R: DevicePtrMut<u64>> {
    pub settings: &'a S,
    pub rng: &'a mut R,
    /// Sequences both hold.
    pub seqs: usize,
}

/// Scratch of [`sample_rows`]: candidates ([`candidate_scratch_len`]) and one counter per row
/// (zero before the launch, left zero).
pub struct RowScratch<'a, C: DevicePtrMut<u64>, D: DevicePtrMut<u32>> {
    pub candidates: &'a mut C,
    pub done: &'a mut D,
}

/// `out[r]` = the pick of row r of `logits` (`rows` rows of `n`) with the setting and generator
/// of sequence `row_seqs[r]` (`ops::sample_rows`; a row whose sequence is out of range, or has
/// no candidate, gets `NO_PICK`). Each sequence must appear at most once in `row_seqs`.
#[allow(clippy::too_many_arguments)]
pub fn sample_rows<S: DevicePtr<u32>, R: DevicePtrMut<u64>, C: DevicePtrMut<u64>, D: DevicePtrMut<u32>>(
    gpu: Gpu<'_>,
    logits: &impl DevicePtr<f32>,
    rows: usize,
    n: usize,
    row_seqs: &impl DevicePtr<u32>,
    seqs: SeqSettings<'_, S, R>,
    scratch: RowScratch<'_, C, D>,
    out: &mut impl DevicePtrMut<u32>,
) -> Result<(), LaunchError> {
    const OP: &str = "sample_rows";
    if rows == 0 || rows > 65_535 {
        return Err(shape(OP, format!("{rows} rows: the launch takes 1..=65535")));
    }
    if n == 0 || n > BLOCKS * SLICE_MAX {
        return Err(shape(OP, format!("{n} logits per row: the GPU sampler takes 1..={}", BLOCKS * SLICE_MAX)));
    }
    expect_at_least(OP, "logits", logits.len(), rows * n)?;
    expect_at_least(OP, "row_seqs", row_seqs.len(), rows)?;
    expect_at_least(OP, "settings", seqs.settings.len(), seqs.seqs * SETTING_WORDS)?;
    expect_at_least(OP, "rng", seqs.rng.len(), seqs.seqs * RNG_WORDS)?;
    expect_at_least(OP, "candidates", scratch.candidates.len(), candidate_scratch_len(rows))?;
    expect_at_least(OP, "done", scratch.done.len(), rows)?;
    expect_at_least(OP, "out", out.len(), rows)?;
    let slice = n.div_ceil(BLOCKS);
    let blocks = n.div_ceil(slice) as u32;
    let (n_u, slice_u) = (as_i32(OP, "n", n)? as u32, slice as u32);
    let seqs_u = as_i32(OP, "sequences", seqs.seqs)? as u32;
    let (l_p, _a) = read_ptr(logits, gpu.stream);
    let (r_p, _b) = read_ptr(row_seqs, gpu.stream);
    let (s_p, _c) = read_ptr(seqs.settings, gpu.stream);
    let (g_p, _d) = write_ptr(seqs.rng, gpu.stream);
    let (c_p, _e) = write_ptr(scratch.candidates, gpu.stream);
    let (d_p, _f) = write_ptr(scratch.done, gpu.stream);
    let (o_p, _g) = write_ptr(out, gpu.stream);
    let mut l = Launch::new(gpu, gpu.function("sample_rows")?);
    l.arg(&l_p).arg(&n_u).arg(&slice_u).arg(&r_p).arg(&seqs_u).arg(&s_p).arg(&g_p).arg(&c_p).arg(&d_p).arg(&o_p);
    let cfg = LaunchConfig { grid_dim: (blocks, rows as u32, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: matches sample_rows(logits, n, slice, row_seqs, n_seqs, settings, rng, candidates,
    // done, out): rows x n logits, slice <= SLICE_MAX, one row_seqs entry, counter and output per
    // row, candidates of BLOCKS x MAX_DEVICE_TOP_K per row, settings and generators for n_seqs
    // sequences (the kernel checks each row's sequence against n_seqs).
    unsafe { l.launch(cfg) }?;
    Ok(())
}
