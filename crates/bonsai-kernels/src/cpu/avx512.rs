//! AVX-512 kernels (level [`SimdLevel::Avx512`](super::SimdLevel::Avx512)): the one-token Q2 GEMV,
//! the panel GEMM's packing of both formats and its register tile. (Q1 decodes by table lookup at
//! this level too, [`super::q1_lut`]: the lane-mask Q1 GEMV that ran here is in the kernel notes.)
//!
//! The Q2 decode reads the weight bits themselves as lane masks: Q2 codes c ∈ {0, 1, 2, 3} are
//! `lo + 2·hi` of their two bits; `pext` gathers the 16 low and 16 high bits of a code word into
//! two `__mmask16` that select x lanes, so per block the row keeps `Σ_lo x + 2·Σ_hi x` in 16 lanes
//! (masked adds, alternating between `vaddps` and `vfmadd(x, 1, acc)` so that both the add and
//! the FMA pipes take them; the `2·x` product is exact) and adds `d·(that − X)` to its total,
//! where `X = Σ x` over the block is computed once per tile of rows. Error per block lane <=
//! (3γ_8 + u)·Σ|x| (8 chunks), then one FMA by d: inside the ops' γ_{K+128}·A bound.
//!
//! All functions need AVX-512F/BW, FMA, F16C and BMI2 (what run-time detection checked before it
//! produced the level).

use std::arch::x86_64::*;

use crate::weights::{Q2Matrix, GROUP, Q1_WORDS, Q2_WORDS};

/// f32 lanes of a zmm register.
const ZMM: usize = 16;
/// 16-lane chunks per 128-weight block.
const CHUNKS: usize = GROUP / ZMM;

/// f16 bits -> f32 broadcast to 16 lanes.
#[inline]
#[target_feature(enable = "avx512f,f16c")]
fn scale16(bits: u16) -> __m512 {
    _mm512_set1_ps(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32))))
}

/// The 8 chunks of one x block and their lane sum `X`.
///
/// # Safety
/// 128 floats must be readable at `x`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load_block(x: *const f32) -> ([__m512; CHUNKS], __m512) {
    let mut xv = [_mm512_setzero_ps(); CHUNKS];
    for (c, v) in xv.iter_mut().enumerate() {
        // SAFETY: the caller guarantees 128 readable floats at x.
        *v = unsafe { _mm512_loadu_ps(x.add(c * ZMM)) };
    }
    let s01 = _mm512_add_ps(xv[0], xv[1]);
    let s23 = _mm512_add_ps(xv[2], xv[3]);
    let s45 = _mm512_add_ps(xv[4], xv[5]);
    let s67 = _mm512_add_ps(xv[6], xv[7]);
    let sum = _mm512_add_ps(_mm512_add_ps(s01, s23), _mm512_add_ps(s45, s67));
    (xv, sum)
}

/// `out[r] = Σ_k W[rows[r], k] · x[k]` for a Q2 matrix (codes {0, 1, 2, 3} -> {−1, 0, 1, 2}·d).
///
/// # Safety
/// The CPU must support the features in the module doc; `x.len() == w.k`; every `rows[r] < w.n`.
#[target_feature(enable = "avx512f,avx512bw,avx2,fma,f16c,bmi2")]
pub(super) unsafe fn q2_dot_rows<const R: usize>(w: &Q2Matrix, rows: &[usize; R], x: &[f32]) -> [f32; R] {
    const LOW_BITS: u32 = 0x5555_5555;
    const HIGH_BITS: u32 = 0xAAAA_AAAA;
    let nb = w.blocks_per_row();
    assert!(x.len() == w.k && rows.iter().all(|&r| r < w.n), "q2_dot_rows: shapes");
    let two = _mm512_set1_ps(2.0);
    let mut total = [_mm512_setzero_ps(); R];
    let scales = w.scales.as_ptr().cast::<u16>();
    for kb in 0..nb {
        // SAFETY: kb < nb, so x[kb·128 .. kb·128 + 128] is inside x (x.len() == K).
        let (xv, x_sum) = unsafe { load_block(x.as_ptr().add(kb * GROUP)) };
        for r in 0..R {
            let b = rows[r] * nb + kb;
            let words = &w.codes[b * Q2_WORDS..(b + 1) * Q2_WORDS];
            // SAFETY: b < n·nb (the slice above is bounds-checked too).
            let d = scale16(unsafe { scales.add(b).read() });
            // Word c holds the codes of chunk c (16 codes, 2 bits each).
            let mut lo_acc = _mm512_setzero_ps();
            let mut hi_acc = _mm512_setzero_ps();
            for (c, &word) in words.iter().enumerate() {
                let lo = _pext_u32(word, LOW_BITS) as __mmask16;
                let hi = _pext_u32(word, HIGH_BITS) as __mmask16;
                lo_acc = _mm512_mask_add_ps(lo_acc, lo, lo_acc, xv[c]);
                hi_acc = _mm512_mask3_fmadd_ps(xv[c], two, hi_acc, hi);
            }
            let block = _mm512_sub_ps(_mm512_add_ps(lo_acc, hi_acc), x_sum);
            total[r] = _mm512_fmadd_ps(block, d, total[r]);
        }
    }
    std::array::from_fn(|r| _mm512_reduce_add_ps(total[r]))
}

/// The panel GEMM's micro-panel rows of a Q1 matrix in either layout, `block(row, kb)` being the
/// scale and the 4 sign words of the row's block: per k one zmm of 16 rows' weights, ±d chosen by
/// a mask of the 16 rows' bits at k (a test of the 16 rows' words against bit i).
///
/// # Safety
/// The CPU must support the features in the module doc; the shapes are those
/// [`super::qgemm::QuantRows::pack_panel`] checks: `k0`, `kc` whole groups inside K,
/// `stride >= 16`, `out.len() >= (kc − 1)·stride + 16`, every row < N.
#[target_feature(enable = "avx512f,avx512bw,avx2,fma,f16c,bmi2")]
pub(super) unsafe fn q1_pack_panel(
    block: &impl Fn(usize, usize) -> (half::f16, [u32; Q1_WORDS]),
    rows: &[usize; ZMM],
    k0: usize,
    kc: usize,
    stride: usize,
    out: &mut [f32],
) {
    let mut dst = out.as_mut_ptr();
    for kb in k0 / GROUP..(k0 + kc) / GROUP {
        let blocks: [(half::f16, [u32; Q1_WORDS]); ZMM] = std::array::from_fn(|j| block(rows[j], kb));
        let scales: [f32; ZMM] = std::array::from_fn(|j| blocks[j].0.to_f32());
        // SAFETY: 16 floats.
        let d = unsafe { _mm512_loadu_ps(scales.as_ptr()) };
        let neg_d = _mm512_sub_ps(_mm512_setzero_ps(), d);
        for wi in 0..Q1_WORDS {
            let words: [u32; ZMM] = std::array::from_fn(|j| blocks[j].1[wi]);
            // SAFETY: 16 u32.
            let words = unsafe { _mm512_loadu_si512(words.as_ptr().cast()) };
            let mut bit = _mm512_set1_epi32(1);
            for _ in 0..32 {
                let plus = _mm512_test_epi32_mask(words, bit);
                // SAFETY: store number kk < kc writes out[kk·stride .. kk·stride + 16], inside
                // `out` by the caller's contract (the pointer after the last store is not used).
                unsafe { _mm512_storeu_ps(dst, _mm512_mask_blend_ps(plus, neg_d, d)) };
                dst = dst.wrapping_add(stride);
                bit = _mm512_slli_epi32::<1>(bit);
            }
        }
    }
}

/// The panel GEMM's micro-panel rows of a Q2 matrix: per k the 16 rows' codes c, as `c·d − d`
/// (exact: (c − 1)·d with c − 1 ∈ {−1, 0, 1, 2}).
///
/// # Safety
/// As [`q1_pack_panel`].
#[target_feature(enable = "avx512f,avx512bw,avx2,fma,f16c,bmi2")]
pub(super) unsafe fn q2_pack_panel(
    w: &Q2Matrix,
    rows: &[usize; ZMM],
    k0: usize,
    kc: usize,
    stride: usize,
    out: &mut [f32],
) {
    let nb = w.blocks_per_row();
    let three = _mm512_set1_epi32(3);
    let mut dst = out.as_mut_ptr();
    for kb in k0 / GROUP..(k0 + kc) / GROUP {
        let blocks: [usize; ZMM] = std::array::from_fn(|j| rows[j] * nb + kb);
        let scales: [f32; ZMM] = std::array::from_fn(|j| w.scales[blocks[j]].to_f32());
        // SAFETY: 16 floats.
        let d = unsafe { _mm512_loadu_ps(scales.as_ptr()) };
        for wi in 0..Q2_WORDS {
            let words: [u32; ZMM] = std::array::from_fn(|j| w.codes[blocks[j] * Q2_WORDS + wi]);
            // SAFETY: 16 u32.
            let mut words = unsafe { _mm512_loadu_si512(words.as_ptr().cast()) };
            for _ in 0..16 {
                let code = _mm512_cvtepi32_ps(_mm512_and_si512(words, three));
                // SAFETY: as in q1_pack_panel.
                unsafe { _mm512_storeu_ps(dst, _mm512_fmsub_ps(code, d, d)) };
                dst = dst.wrapping_add(stride);
                words = _mm512_srli_epi32::<2>(words);
            }
        }
    }
}

/// Most tokens in the panel GEMM's register tile: 12 x 2 accumulators + 2 weight vectors of the
/// 32 zmm registers.
pub(super) const PANEL_MR: usize = 12;
/// Weight rows (output columns) of the panel GEMM's micro-panel: two zmm.
pub(super) const PANEL_NR: usize = 2 * ZMM;

/// `acc[t·acc_stride + j] (=|+=) Σ_{kk < kc} xp[t·X_STRIDE + kk] · panel[kk·32 + j]` for
/// `t < MR`, `j < 32`: one register tile of the panel GEMM, `=` when `accumulate` is false. Per
/// kk two weight loads and `MR` broadcasts feed `2·MR` FMAs; every output is a sequential f32 FMA
/// chain over kk in order. A constant `X_STRIDE` makes each token row's broadcast a fixed
/// displacement from one pointer.
///
/// # Safety
/// The CPU must support AVX-512F and FMA (the shapes are asserted).
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn panel_micro_tile<const MR: usize, const X_STRIDE: usize>(
    kc: usize,
    panel: &[f32],
    xp: &[f32],
    acc: &mut [f32],
    acc_stride: usize,
    accumulate: bool,
) {
    assert!(
        (1..=PANEL_MR).contains(&MR)
            && panel.len() >= kc * PANEL_NR
            && kc <= X_STRIDE
            && xp.len() >= (MR - 1) * X_STRIDE + kc
            && acc_stride >= PANEL_NR
            && acc.len() >= (MR - 1) * acc_stride + PANEL_NR,
        "panel_micro_tile shapes"
    );
    let mut c = [[_mm512_setzero_ps(); 2]; MR];
    if accumulate {
        for (t, c_t) in c.iter_mut().enumerate() {
            // SAFETY: row t's 32 floats end at t·acc_stride + 32 <= acc.len() (asserted).
            unsafe {
                c_t[0] = _mm512_loadu_ps(acc.as_ptr().add(t * acc_stride));
                c_t[1] = _mm512_loadu_ps(acc.as_ptr().add(t * acc_stride + ZMM));
            }
        }
    }
    let (mut w, mut x) = (panel.as_ptr(), xp.as_ptr());
    for _ in 0..kc {
        // SAFETY: iteration kk reads panel[kk·32 .. kk·32 + 32] and xp[t·X_STRIDE + kk] for
        // t < MR, inside the slices for kk < kc (asserted).
        unsafe {
            let w0 = _mm512_loadu_ps(w);
            let w1 = _mm512_loadu_ps(w.add(ZMM));
            for (t, c_t) in c.iter_mut().enumerate() {
                let xb = _mm512_set1_ps(*x.add(t * X_STRIDE));
                c_t[0] = _mm512_fmadd_ps(xb, w0, c_t[0]);
                c_t[1] = _mm512_fmadd_ps(xb, w1, c_t[1]);
            }
            w = w.add(PANEL_NR);
            x = x.add(1);
        }
    }
    for (t, c_t) in c.iter().enumerate() {
        // SAFETY: as for the loads.
        unsafe {
            _mm512_storeu_ps(acc.as_mut_ptr().add(t * acc_stride), c_t[0]);
            _mm512_storeu_ps(acc.as_mut_ptr().add(t * acc_stride + ZMM), c_t[1]);
        }
    }
}
