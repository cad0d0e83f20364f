//! Check `ptx_wrappers`: the `bonsai_ptx_probe` kernel (cuda/selftest.cu) runs every ptx.cuh
//! wrapper once on seeded data; each result is compared with the Rust model in ptx_model.rs.
//! Conversions, ldmatrix and cp.async must match bit for bit; mma within a derived f32 bound.
//! Run on the H200 this proves the documented fragment layouts; under the CPU emulator it
//! proves the emulator implements the same ones.

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::gpu::{download, upload};
use super::ptx_model::{self, MmaKind, WARP};
use super::{Comparison, Ctx, VerifyError, F32_UNIT_ROUNDOFF as U};

// Buffer layouts shared with bonsai_ptx_probe (the PROBE_* macros of cuda/selftest.cu).
const CONVERSIONS: usize = 256;
const OUT_F16: usize = 0;
const OUT_BF16: usize = 256;
const OUT_TF32: usize = 512;
const OUT_F16_TO_F32: usize = 768;
const OUT_LDMATRIX_X4: usize = 1024;
const OUT_LDMATRIX_X4_TRANS: usize = 1152;
const OUT_LDMATRIX_X2: usize = 1280;
const OUT_LDMATRIX_X2_TRANS: usize = 1344;
const OUT_MMA: [usize; 3] = [1408, 1536, 1664];
const OUT_CP_ZFILL: usize = 1792;
const OUT_CP4: usize = 1920;
const OUT_MMA_B1: usize = 1952;
const OUT_WORDS: usize = 2080;
const FRAG_WORDS_PER_MMA: usize = 192;
const B_FRAGS: usize = 128;
/// f16 elements of the ldmatrix / cp.async tile: 4 matrices of 8x8.
const TILE_HALVES: usize = 256;
/// Written before the launch; an element the kernel fails to write keeps it and fails.
const POISON: u32 = 0xdead_beef;

pub(crate) fn run(ctx: &mut Ctx) -> Result<(), VerifyError> {
    let floats: Vec<f32> = conversion_inputs(ctx).into_iter().chain(mma_accumulators(ctx)).collect();
    let halves: Vec<u16> = (0..TILE_HALVES).map(|_| finite_f16_bits(ctx)).collect();
    let mut frags: Vec<u32> = MmaKind::ALL.iter().flat_map(|&kind| mma_fragments(ctx, kind)).collect();
    // The binary mma's A and B: any bit patterns.
    let b1_frags: Vec<u32> = (0..FRAG_WORDS_PER_MMA).map(|_| ctx.rng.next_u32()).collect();
    frags.extend_from_slice(&b1_frags);

    let (floats_d, halves_d, frags_d) =
        (upload(&ctx.stream, &floats)?, upload(&ctx.stream, &halves)?, upload(&ctx.stream, &frags)?);
    let mut out_d = upload(&ctx.stream, &vec![POISON; OUT_WORDS])?;
    let function = ctx.lib.function("bonsai_ptx_probe")?;
    let config = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (WARP as u32, 1, 1), shared_mem_bytes: 0 };
    let mut launch = ctx.stream.launch_builder(function);
    launch.arg(&floats_d).arg(&halves_d).arg(&frags_d).arg(&mut out_d);
    // SAFETY: matches bonsai_ptx_probe(const float*, const u16*, const u32*, u32*); the buffers
    // hold CONVERSIONS + 128 floats, TILE_HALVES halves, 4 * FRAG_WORDS_PER_MMA and OUT_WORDS words,
    // exactly what the kernel reads and writes.
    unsafe { launch.launch(config) }?;
    let out = download(&ctx.stream, &out_d)?;
    let slice = |at: usize, len: usize| &out[at..at + len];

    let conv = &floats[..CONVERSIONS];
    let model = |f: fn(f32) -> u32| conv.iter().map(|&x| f(x)).collect::<Vec<u32>>();
    exact(ctx, "f32_to_f16", slice(OUT_F16, CONVERSIONS), &model(ptx_model::f32_to_f16));
    exact(ctx, "f32_to_bf16_rn", slice(OUT_BF16, CONVERSIONS), &model(ptx_model::f32_to_bf16));
    exact(ctx, "f32_to_tf32", slice(OUT_TF32, CONVERSIONS), &model(ptx_model::f32_to_tf32));
    let widened: Vec<u32> = halves.iter().map(|&h| ptx_model::f16_to_f32(h)).collect();
    exact(ctx, "f16_to_f32", slice(OUT_F16_TO_F32, CONVERSIONS), &widened);

    for (name, at, matrices, transposed) in [
        ("ldmatrix_x4", OUT_LDMATRIX_X4, 4, false),
        ("ldmatrix_x4_trans", OUT_LDMATRIX_X4_TRANS, 4, true),
        ("ldmatrix_x2", OUT_LDMATRIX_X2, 2, false),
        ("ldmatrix_x2_trans", OUT_LDMATRIX_X2_TRANS, 2, true),
    ] {
        exact(ctx, name, slice(at, WARP * matrices), &ptx_model::ldmatrix(&halves, matrices, transposed));
    }

    let accumulators = &floats[CONVERSIONS..];
    for (i, kind) in MmaKind::ALL.into_iter().enumerate() {
        let f = &frags[i * FRAG_WORDS_PER_MMA..(i + 1) * FRAG_WORDS_PER_MMA];
        let reference = ptx_model::mma(kind, &f[..B_FRAGS], &f[B_FRAGS..], accumulators);
        let got: Vec<f32> = slice(OUT_MMA[i], WARP * 4).iter().map(|&w| f32::from_bits(w)).collect();
        let want: Vec<f32> = reference.d.iter().map(|&d| d as f32).collect();
        // Every product is exact in f32 (at most 11x11 significand bits); the K products and C
        // are accumulated in f32 with at most K + 1 roundings, truncations allowed (each <= 2u
        // of the running sum, itself <= the sum of magnitudes): |err| <= 2(K + 1)u·(|C| + Σ|ab|).
        // Comparing against the f32-rounded exact value adds u·|D| <= u·(|C| + Σ|ab|).
        let k = kind.k() as f64;
        let cmp = Comparison::of(&got, &want, |e| (2.0 * (k + 1.0) + 1.0) * U * reference.magnitude[e]);
        ctx.record("ptx_wrappers", &format!("{} (1 warp, seeded fragments)", kind.name()), cmp);
    }

    // The binary mma is exact integer arithmetic: the probe starts from C = lane*4 + i - 64.
    let c_b1: Vec<i32> = (0..WARP as i32 * 4).map(|e| e - 64).collect();
    let want_b1: Vec<u32> =
        ptx_model::mma_b1(&b1_frags[..B_FRAGS], &b1_frags[B_FRAGS..], &c_b1).into_iter().map(|v| v as u32).collect();
    exact(ctx, "mma_b1_and_popc_16x8x128", slice(OUT_MMA_B1, WARP * 4), &want_b1);

    let zfilled: Vec<u32> = (0..WARP * 4)
        .map(|w| {
            let lane = w / 4;
            if lane % 2 == 0 {
                u32::from(halves[2 * w]) | (u32::from(halves[2 * w + 1]) << 16)
            } else {
                0
            }
        })
        .collect();
    exact(ctx, "cp_async16 + cp_async16_zfill", slice(OUT_CP_ZFILL, WARP * 4), &zfilled);
    let words: Vec<u32> =
        (0..WARP).map(|l| u32::from(halves[2 * l]) | (u32::from(halves[2 * l + 1]) << 16)).collect();
    exact(ctx, "cp_async4", slice(OUT_CP4, WARP), &words);
    if crate::launch::matmul::device_has_wgmma(&ctx.stream)? {
        super::ptx_wgmma::run(ctx)?;
    }
    Ok(())
}

/// Records a bit-exact comparison of 32-bit words (each compared as its two 16-bit halves, which
/// f32 holds exactly, against a bound of 0).
fn exact(ctx: &mut Ctx, name: &str, got: &[u32], want: &[u32]) {
    let halves = |w: &[u32]| w.iter().flat_map(|&x| [(x >> 16) as f32, (x & 0xffff) as f32]).collect::<Vec<f32>>();
    let cmp = Comparison::of(&halves(got), &halves(want), |_| 0.0);
    ctx.record("ptx_wrappers", &format!("{name} (bit-exact, {} words)", got.len()), cmp);
}

/// Conversion inputs: the rounding edge cases of every target format, then seeded values over
/// the whole finite range (never NaN: NaN encodings are not part of the contract).
fn conversion_inputs(ctx: &mut Ctx) -> Vec<f32> {
    let tie = |bits: u32| f32::from_bits(bits);
    let mut v = vec![
        0.0, -0.0, 1.0, -1.0, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN_POSITIVE,
        f32::from_bits(1),            // smallest f32 subnormal
        65504.0, 65519.996, 65520.0, -65520.0, // f16 max, just below / at its overflow threshold
        6.103_515_6e-5, 5.960_464_5e-8, 2.980_232_2e-8, 2.980_233e-8, // f16 min normal, min subnormal, its half, just above
        tie(0x3f80_8000), tie(0x3f81_8000), tie(0xbf80_8000), // bf16 ties to even (down, up, negative)
        tie(0x3f80_1000), tie(0x3f80_3000), tie(0xbf80_1000), // tf32 ties (away from zero)
        tie(0x3f80_1000 - 1), tie(0x7f7f_f000),               // just below a tf32 tie; tf32 overflow to inf
        1.000_488_3, 1.001_464_8, // f16 ties: 1 + 2^-11 (to even: 1), 1 + 3·2^-11 (to even: up)
    ];
    while v.len() < CONVERSIONS {
        let bits = ctx.rng.next_u32();
        // Any finite pattern, but mostly near the f16/bf16 ranges where rounding is interesting.
        let exponent = if ctx.rng.next_u32() % 4 == 0 { (bits >> 23) & 0xfe } else { 100 + (bits >> 23) % 50 };
        v.push(f32::from_bits((bits & 0x807f_ffff) | (exponent << 23)));
    }
    v
}

/// Random f16 bit patterns, any finite value or infinity (no NaN).
fn finite_f16_bits(ctx: &mut Ctx) -> u16 {
    loop {
        let h = (ctx.rng.next_u32() >> 16) as u16;
        if (h & 0x7c00) != 0x7c00 || (h & 0x03ff) == 0 {
            return h;
        }
    }
}

/// The 4 C values of each lane, moderate and of both signs.
fn mma_accumulators(ctx: &mut Ctx) -> Vec<f32> {
    (0..WARP * 4).map(|_| ctx.rng.range(-4.0, 4.0)).collect()
}

/// A and B fragments of one mma: values in [-2, 2) in the operand format (tf32 operands already
/// rounded by f32_to_tf32, as the kernels pass them).
fn mma_fragments(ctx: &mut Ctx, kind: MmaKind) -> Vec<u32> {
    let element = |ctx: &mut Ctx| ctx.rng.range(-2.0, 2.0);
    (0..FRAG_WORDS_PER_MMA)
        .map(|_| match kind {
            MmaKind::Tf32 => ptx_model::f32_to_tf32(element(ctx)),
            MmaKind::Bf16 => ptx_model::f32_to_bf16(element(ctx)) | (ptx_model::f32_to_bf16(element(ctx)) << 16),
            MmaKind::F16 => ptx_model::f32_to_f16(element(ctx)) | (ptx_model::f32_to_f16(element(ctx)) << 16),
        })
        .collect()
}
