//! The memory read bandwidth a streaming kernel sees: what bounds the CPU decode GEMVs.
//!
//! The buffer is cut into one contiguous slice per rayon thread, read in parallel (as GEMV tasks
//! stream their rows) with independent 8-lane sums and nothing written back; its pages are first
//! written in parallel by the same split. The buffer
//! ([`READ_BUFFER_BYTES`]) is larger than the last-level cache of any current server CPU, so each
//! pass comes from DRAM. The figure is the buffer's bytes over a whole parallel pass (so the
//! slowest thread sets it), the median of [`READ_PASSES`] passes after one warm-up.

use rayon::prelude::*;

use super::{simd_level, simd_variants};

/// Bytes read per pass: beyond every CPU's last-level cache (up to 1 GiB on the largest).
pub const READ_BUFFER_BYTES: usize = 1 << 30;
/// Timed passes (the median is reported).
pub const READ_PASSES: usize = 5;

/// A measured read bandwidth and how it was measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadBandwidth {
    /// Bytes read per second, all threads together.
    pub bytes_per_s: f64,
    pub threads: usize,
    pub buffer_bytes: usize,
}

impl ReadBandwidth {
    /// One line saying what was measured.
    pub fn describe(&self) -> String {
        describe_read(self.threads, self.buffer_bytes)
    }
}

/// What [`read_bandwidth`] measures with `threads` threads over `buffer_bytes`.
pub fn describe_read(threads: usize, buffer_bytes: usize) -> String {
    format!("read bandwidth ({threads} threads, each streaming its own slice of a {} MiB buffer)", buffer_bytes >> 20)
}

simd_variants! {
    /// Sum of `words` in 8 independent lanes (the loads are the work; the sum keeps them live).
    fn sum_words(words: &[u64]) -> u64 {
        let mut lanes = [0u64; 8];
        for chunk in words.chunks_exact(8) {
            for l in 0..8 {
                lanes[l] = lanes[l].wrapping_add(chunk[l]);
            }
        }
        lanes.iter().fold(0u64, |a, &b| a.wrapping_add(b))
    }
}

/// Measures [`ReadBandwidth`] with `buffer_bytes` (rounded down to whole 64-byte lines per
/// thread) on rayon's global pool.
pub fn read_bandwidth(buffer_bytes: usize) -> ReadBandwidth {
    let threads = rayon::current_num_threads().max(1);
    let words_per_thread = (buffer_bytes / 8 / threads) / 8 * 8;
    let mut buffer = vec![0u64; words_per_thread * threads];
    let level = simd_level();
    buffer.par_chunks_mut(words_per_thread.max(1)).enumerate().for_each(|(t, slice)| {
        for (i, w) in slice.iter_mut().enumerate() {
            *w = (t as u64) << 32 | i as u64;
        }
    });
    let mut rates = Vec::with_capacity(READ_PASSES);
    for pass in 0..=READ_PASSES {
        let start = std::time::Instant::now();
        let total: u64 = buffer.par_chunks(words_per_thread.max(1)).map(|slice| sum_words(level, slice)).sum();
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        std::hint::black_box(total);
        if pass > 0 {
            rates.push((buffer.len() * 8) as f64 / secs);
        }
    }
    rates.sort_by(f64::total_cmp);
    ReadBandwidth { bytes_per_s: rates[rates.len() / 2], threads, buffer_bytes: buffer.len() * 8 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::available_levels;

    #[test]
    fn sum_words_is_the_wrapping_sum_at_every_level() {
        let words: Vec<u64> = (0..1000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let want = words.iter().fold(0u64, |a, &b| a.wrapping_add(b));
        // 1000 is a multiple of 8: every word is summed.
        for level in available_levels() {
            assert_eq!(sum_words(level, &words), want, "{level:?}");
        }
    }

    #[test]
    fn a_small_measurement_is_positive_and_says_how() {
        let bw = read_bandwidth(4 << 20);
        assert!(bw.bytes_per_s > 0.0 && bw.threads >= 1, "{bw:?}");
        assert!(bw.describe().contains("threads"), "{}", bw.describe());
    }
}
