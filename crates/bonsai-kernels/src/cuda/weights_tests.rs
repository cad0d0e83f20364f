use half::f16;

use super::*;
use crate::cuda::registry::SOURCES;
use crate::verify::rng::SplitMix64;

/// (n, k): groups per row 1, 2, 3 (one-group blocks) and 4, 8, 12 (four-group blocks).
const SHAPES: [(usize, usize); 6] = [(3, 128), (2, 256), (5, 384), (4, 512), (2, 1024), (3, 1536)];

fn random_q1(rng: &mut SplitMix64, n: usize, k: usize) -> Q1Matrix {
    let groups = n * k / GROUP;
    let scales = (0..groups).map(|_| f16::from_f32(rng.range(0.01, 0.03))).collect();
    let bits = (0..groups * Q1_WORDS).map(|_| rng.next_u32()).collect();
    Q1Matrix::new(n, k, scales, bits).expect("valid random Q1 matrix")
}

fn random_q2(rng: &mut SplitMix64, n: usize, k: usize) -> Q2Matrix {
    let groups = n * k / GROUP;
    let scales = (0..groups).map(|_| f16::from_f32(rng.range(0.01, 0.03))).collect();
    let codes = (0..groups * Q2_WORDS).map(|_| rng.next_u32()).collect();
    Q2Matrix::new(n, k, scales, codes).expect("valid random Q2 matrix")
}

fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

#[test]
fn permute_then_unpermute_is_the_identity() {
    let s = seed();
    let mut rng = SplitMix64::new(s);
    for (n, k) in SHAPES {
        let q1 = random_q1(&mut rng, n, k);
        let dev = device_q1_bits(&q1);
        assert_eq!(host_q1_bits(k, &dev), q1.bits, "Q1 {n}x{k}, seed {s}");
        let ones: u32 = q1.bits.iter().map(|w| w.count_ones()).sum();
        assert_eq!(
            dev.iter().map(|w| w.count_ones()).sum::<u32>(),
            ones,
            "Q1 {n}x{k} loses bits, seed {s}"
        );
        let q2 = random_q2(&mut rng, n, k);
        assert_eq!(host_q2_codes(k, &device_q2_codes(&q2)), q2.codes, "Q2 {n}x{k}, seed {s}");
    }
    // Every device bit is the image of exactly one weight: all-ones stays all-ones.
    let full = Q1Matrix { bits: vec![u32::MAX; 2 * 512 / 32], ..random_q1(&mut rng, 2, 512) };
    assert!(device_q1_bits(&full).iter().all(|&w| w == u32::MAX));
}

#[test]
fn lane_bit_and_weight_are_inverse_and_follow_the_fragment_table() {
    for j in 0..GROUP {
        let (t, bit) = layout_lane_bit(j);
        assert_eq!(layout_weight(t, bit), j);
        // ptx.cuh, m16n8k16 A: register a[2h] / a[2h+1] of step s holds k = 16s + 8h + 2t + e,
        // e = 0 in the low half. The layout puts pair q = 2s + h at bits 15 - q and 31 - q.
        let q = 15 - (bit as usize % 16);
        let e = bit as usize / 16;
        assert_eq!(16 * (q / 2) + 8 * (q % 2) + 2 * t + e, j, "weight {j}");
    }
}

/// bf16 bits -> f32.
fn bf16(bits: u32) -> f32 {
    f32::from_bits((bits & 0xFFFF) << 16)
}

#[test]
fn shifted_lane_words_are_the_a_fragments_the_tensor_core_gemv_builds() {
    // gemv_tc (matmul_gemv_tc.cu) builds the A register of pair q (k16 step q / 2) from v = w << r:
    //   q = r <= 7:  (v & 0x80008000) ^ 0xBF80BF80 = s (+-1); Q2's bit-0 plane ^ 0xBF00BF00: 0.5 s
    //   q = r + 8:   (v & 0x00800080) | 0x3F003F00 = 0.75 + 0.25 s; Q2's bit-0 plane from
    //                w << (q - 9) (w >> 1 for q = 8): (. & 0x00400040) | 0x3F003F00 = 0.625 + 0.125 s,
    //                with B = 4 x there and offsets -3 x (Q1) / -5.5 x (Q2)
    // and Q2's value is lo + hi + 0.5 (the kernel adds 0.5 sum x per group).
    const SIGN_PAIR: u32 = 0x8000_8000;
    const EXP_PAIR: u32 = 0x0080_0080;
    const MANT_PAIR: u32 = 0x0040_0040;
    let a_reg = |w: u32, q: u32, half: bool| -> [f32; 2] {
        let reg = if q < 8 {
            ((w << q) & SIGN_PAIR) ^ if half { 0xBF00_BF00 } else { 0xBF80_BF80 }
        } else if half {
            (if q == 8 { w >> 1 } else { w << (q - 9) } & MANT_PAIR) | 0x3F00_3F00
        } else {
            ((w << (q - 8)) & EXP_PAIR) | 0x3F00_3F00
        };
        // The kernel's B scale and offset for the second half, applied per weight.
        let (scale, offset) =
            if q < 8 { (1.0, 0.0) } else { (4.0, if half { -2.5 } else { -3.0 }) };
        [bf16(reg) * scale + offset, bf16(reg >> 16) * scale + offset]
    };
    let s = seed();
    let mut rng = SplitMix64::new(s);
    for (n, k) in SHAPES {
        let gpr = k / GROUP;
        let q1 = random_q1(&mut rng, n, k);
        let q2 = random_q2(&mut rng, n, k);
        let (d1, d2) = (device_q1_bits(&q1), device_q2_codes(&q2));
        for row in 0..n {
            let (r1, r2) = (&d1[row * gpr * 4..], &d2[row * gpr * 8..]);
            for group in 0..gpr {
                for t in 0..LAYOUT_LANES {
                    for q in 0..16u32 {
                        let k0 = group * GROUP + layout_weight(t, 15 - q);
                        let a = a_reg(r1[layout_word(1, gpr, group, t, 0)], q, false);
                        let lo = a_reg(r2[layout_word(2, gpr, group, t, 0)], q, true);
                        let hi = a_reg(r2[layout_word(2, gpr, group, t, 1)], q, false);
                        for e in 0..2 {
                            let want = q1.weight(row, k0 + e).signum();
                            assert_eq!(a[e], want, "Q1 {n}x{k} row {row} k {} seed {s}", k0 + e);
                            let d = q2.scales[row * gpr + group].to_f32();
                            let want = q2.weight(row, k0 + e) / d;
                            assert_eq!(
                                lo[e] + hi[e] + 0.5,
                                want,
                                "Q2 {n}x{k} row {row} k {} seed {s}",
                                k0 + e
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn a_lane_reads_its_block_words_with_one_aligned_16_byte_load_per_plane() {
    for planes in [1, 2] {
        for gpr in [4, 8, 32, 96] {
            for b0 in (0..gpr).step_by(LAYOUT_BLOCK_GROUPS) {
                for t in 0..LAYOUT_LANES {
                    let base = layout_word(planes, gpr, b0, t, 0);
                    assert_eq!(base % 4, 0, "16-byte aligned lane words");
                    assert_eq!(base, (b0 * LAYOUT_LANES + t * LAYOUT_BLOCK_GROUPS) * planes);
                    for gi in 0..LAYOUT_BLOCK_GROUPS {
                        for p in 0..planes {
                            assert_eq!(
                                layout_word(planes, gpr, b0 + gi, t, p),
                                base + gi * planes + p
                            );
                        }
                    }
                }
            }
        }
        // Without blocks each group's words stay within the group, lane-major.
        for gpr in [1, 2, 3, 5] {
            for g in 0..gpr {
                for t in 0..LAYOUT_LANES {
                    assert_eq!(
                        layout_word(planes, gpr, g, t, planes - 1),
                        (g * LAYOUT_LANES + t) * planes + planes - 1
                    );
                }
            }
        }
    }
}

#[test]
fn layout_constants_match_weight_layout_cu() {
    let src =
        SOURCES.iter().find(|s| s.path == "ops/matmul_q1/weight_layout.cu").expect("registered");
    for (name, value) in
        [("LAYOUT_BLOCK_GROUPS", LAYOUT_BLOCK_GROUPS), ("LAYOUT_LANES", LAYOUT_LANES)]
    {
        let line = format!("#define {name} {value}");
        assert!(src.text.lines().any(|l| l.trim() == line), "weight_layout.cu lacks `{line}`");
    }
}
