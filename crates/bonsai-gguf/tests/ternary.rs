//! The ternary block types PTQ1_0 (143), TQ1_0 (34) and TQ2_0 (35): the worked example of
//! reference/bonsai2.md §2.9 byte for byte, the base-3 byte code exhaustively, the element orders
//! of §2.5 / §2.6 written out independently of the crate's walk, and exact round trips.

mod common;

use bonsai_gguf::blocks::{trit_byte, trit_digit};
use bonsai_gguf::{
    decode_levels, dequantize, encode_levels, quantize, Levels, LevelsError, TensorType,
    TwoBitLayout,
};
use common::Rng;
use half::f16;

/// §2.9: trits t[e] = ((7e) mod 3) - 1, d = 0.25 (f16 0x3400).
const WORKED_EXAMPLE: [u8; 28] = [
    0x31, 0x94, 0xbb, 0x31, 0x94, 0xbb, 0x31, 0x94, 0xbb, 0x31, 0x94, 0xbb, 0x31, 0x94, 0xbb,
    0x31, // qs[0..16]
    0xcf, 0x45, 0x6c, 0xcf, 0x45, 0x6c, 0xcf, 0x45, // qs[16..24]
    0x43, 0x6c, // qh
    0x00, 0x34, // d, little-endian
];

fn worked_example_values() -> Vec<f32> {
    (0..128).map(|e| (((7 * e) % 3) as f32 - 1.0) * 0.25).collect()
}

#[test]
fn ptq1_0_worked_example_decodes_and_encodes_byte_for_byte() {
    let mut out = vec![f32::NAN; 128];
    dequantize(TensorType::Ptq1_0, &WORKED_EXAMPLE, &mut out).expect("dequantize");
    assert_eq!(out, worked_example_values());
    // The spot checks the reference spells out.
    assert_eq!(&out[..8], &[-0.25, 0.0, 0.25, -0.25, 0.0, 0.25, -0.25, 0.0]);
    assert_eq!(
        [out[0], out[16], out[32], out[48], out[64]],
        [-0.25, 0.0, 0.25, -0.25, 0.0],
        "qs[0]"
    );
    assert_eq!(
        [out[80], out[88], out[96], out[104], out[112]],
        [0.25, 0.0, -0.25, 0.25, 0.0],
        "qs[16]"
    );
    assert_eq!([out[120], out[122], out[124], out[126]], [-0.25, 0.25, 0.0, -0.25], "qh[0]");

    let encoded = quantize(TensorType::Ptq1_0, &worked_example_values()).expect("quantize");
    assert_eq!(encoded, WORKED_EXAMPLE);
    // The same bytes through the exact levels path.
    let levels = decode_levels(TensorType::Ptq1_0, &WORKED_EXAMPLE).expect("levels");
    assert_eq!(levels.scales, vec![f16::from_bits(0x3400)]);
    assert_eq!(encode_levels(TensorType::Ptq1_0, &levels).expect("encode"), WORKED_EXAMPLE);
}

/// Base-3 digits of `q`, most significant first.
fn digits(mut q: u32, count: usize) -> Vec<u8> {
    let mut d = vec![0u8; count];
    for slot in d.iter_mut().rev() {
        *slot = (q % 3) as u8;
        q /= 3;
    }
    d
}

#[test]
fn every_five_and_four_trit_code_round_trips() {
    // All 243 qs bytes: ceil(q·256/243) stores q, and digit n reads back digit n.
    let mut seen = std::collections::HashSet::new();
    for q in 0..243u32 {
        let byte = trit_byte(q as u8);
        assert_eq!(u32::from(byte), (q * 256).div_ceil(243), "ceil code of {q}");
        assert!(seen.insert(byte), "byte {byte} stores two numbers");
        let read: Vec<u8> = (0..5).map(|n| trit_digit(byte, n)).collect();
        assert_eq!(read, digits(q, 5), "q = {q}, byte {byte:#04x}");
    }
    // All 81 qh bytes: four digits followed by a zero fifth.
    for q in 0..81u32 {
        let byte = trit_byte((q * 3) as u8);
        let read: Vec<u8> = (0..4).map(|n| trit_digit(byte, n)).collect();
        assert_eq!(read, digits(q, 4), "qh q = {q}");
        assert_eq!(trit_digit(byte, 4), 0, "qh fifth digit of {q}");
    }
}

fn random_levels(rng: &mut Rng, n: usize, hi: i8) -> Vec<i8> {
    (0..n).map(|_| rng.below((hi + 2) as usize) as i8 - 1).collect()
}

/// A base-3 block built from an explicit (byte, element list) table, the reference's own words.
fn trit_block(levels: &[i8], d: f16, bytes: &[(usize, Vec<usize>)], total: usize) -> Vec<u8> {
    let mut out = vec![0u8; total];
    for (byte, elems) in bytes {
        let mut q = elems.iter().fold(0u32, |q, &e| q * 3 + (levels[e] + 1) as u32);
        if elems.len() == 4 {
            q *= 3;
        }
        out[*byte] = trit_byte(q as u8);
    }
    out[total - 2..].copy_from_slice(&d.to_le_bytes());
    out
}

#[test]
fn element_orders_match_the_reference_tables() {
    let mut rng = Rng::fresh("element_orders");
    let d = f16::from_f32(0.375);
    let check = |ty: TensorType, levels: &[i8], block: &[u8]| {
        let mut out = vec![f32::NAN; levels.len()];
        dequantize(ty, block, &mut out).expect("dequantize");
        let expected: Vec<f32> = levels.iter().map(|&l| f32::from(l) * d.to_f32()).collect();
        assert_eq!(out, expected, "{}", ty.name());
        assert_eq!(
            encode_levels(
                ty,
                &Levels { group: levels.len(), scales: vec![d], levels: levels.to_vec() }
            )
            .expect("encode"),
            block
        );
    };

    // PTQ1_0 (§2.5): 16n + m <- qs[m]; 80 + 8n + m <- qs[16 + m]; 120 + 2n + h <- qh[h].
    let levels = random_levels(&mut rng, 128, 1);
    let mut table: Vec<(usize, Vec<usize>)> =
        (0..16).map(|m| (m, (0..5).map(|n| 16 * n + m).collect())).collect();
    table.extend((0..8).map(|m| (16 + m, (0..5).map(|n| 80 + 8 * n + m).collect())));
    table.extend((0..2).map(|h| (24 + h, (0..4).map(|n| 120 + 2 * n + h).collect())));
    check(TensorType::Ptq1_0, &levels, &trit_block(&levels, d, &table, 28));

    // TQ1_0 (§2.6): 32n + m <- qs[m]; 160 + 16n + m <- qs[32 + m]; 240 + 4n + j <- qh[j].
    let levels = random_levels(&mut rng, 256, 1);
    let mut table: Vec<(usize, Vec<usize>)> =
        (0..32).map(|m| (m, (0..5).map(|n| 32 * n + m).collect())).collect();
    table.extend((0..16).map(|m| (32 + m, (0..5).map(|n| 160 + 16 * n + m).collect())));
    table.extend((0..4).map(|j| (48 + j, (0..4).map(|n| 240 + 4 * n + j).collect())));
    check(TensorType::Tq1_0, &levels, &trit_block(&levels, d, &table, 54));

    // TQ2_0 (§2.6): element 4j + 32l + m <- bits 2l of qs[j + m], j in {0, 32}; code 3 is +2.
    let levels = random_levels(&mut rng, 256, 2);
    let mut block = vec![0u8; 66];
    for j in [0usize, 32] {
        for m in 0..32 {
            for l in 0..4 {
                block[j + m] |= ((levels[4 * j + 32 * l + m] + 1) as u8) << (2 * l);
            }
        }
    }
    block[64..].copy_from_slice(&d.to_le_bytes());
    check(TensorType::Tq2_0, &levels, &block);
}

#[test]
fn random_ternary_data_round_trips_exactly() {
    let mut rng = Rng::fresh("ternary_round_trip");
    for ty in [TensorType::Ptq1_0, TensorType::Tq1_0, TensorType::Tq2_0] {
        let group = ty.block_elems();
        let n_groups = 29;
        // Values in {-d, 0, +d} with a per-group f16 d and at least one ±d, so max |x| = d: the
        // fork's quantizer (d = max |x|, level = round(x / d)) must give them back exactly.
        let mut src = Vec::with_capacity(group * n_groups);
        for _ in 0..n_groups {
            let d = f16::from_f32(rng.sym(2.0).abs() + 0.01).to_f32();
            let mut levels = random_levels(&mut rng, group, 1);
            levels[rng.below(group)] = if rng.below(2) == 0 { 1 } else { -1 };
            src.extend(levels.iter().map(|&l| f32::from(l) * d));
        }
        let bytes = quantize(ty, &src).expect("quantize");
        assert_eq!(bytes.len(), n_groups * ty.block_bytes());
        let mut out = vec![f32::NAN; src.len()];
        dequantize(ty, &bytes, &mut out).expect("dequantize");
        assert_eq!(out, src, "{} is exact on ternary data", ty.name());
        // And bytes -> levels -> bytes is the identity.
        let levels = decode_levels(ty, &bytes).expect("levels");
        assert_eq!(levels.values(), src);
        assert_eq!(encode_levels(ty, &levels).expect("encode"), bytes);
    }
}

#[test]
fn an_all_zero_group_gets_scale_zero() {
    for ty in [TensorType::Ptq1_0, TensorType::Tq1_0, TensorType::Tq2_0] {
        let bytes = quantize(ty, &vec![0.0; ty.block_elems()]).expect("quantize");
        let levels = decode_levels(ty, &bytes).expect("levels");
        assert_eq!(levels.scales, vec![f16::ZERO], "{}", ty.name());
        assert!(levels.levels.iter().all(|&l| l == 0));
    }
}

#[test]
fn transcodes_between_ternary_types_are_exact_and_refuse_what_they_cannot_hold() {
    let mut rng = Rng::fresh("transcode");
    // 4 rows of 256 in TQ2_0 (one scale per 256) -> every other type keeps every weight.
    let src: Vec<f32> = (0..1024).map(|_| [-1.0f32, 0.0, 1.0][rng.below(3)] * 0.5).collect();
    let tq2 = quantize(TensorType::Tq2_0, &src).expect("quantize");
    let levels = decode_levels(TensorType::Tq2_0, &tq2).expect("levels");
    for ty in [
        TensorType::Ptq1_0,
        TensorType::Tq1_0,
        TensorType::TwoBit(TwoBitLayout::Pq2G128ScaleFirst),
        TensorType::TwoBit(TwoBitLayout::Q2G64ScaleFirst),
    ] {
        let bytes = encode_levels(ty, &levels).expect("exact transcode");
        let mut out = vec![f32::NAN; src.len()];
        dequantize(ty, &bytes, &mut out).expect("dequantize");
        assert_eq!(out, src, "TQ2_0 -> {}", ty.name());
    }
    // Q1_0 has no zero.
    let err = encode_levels(TensorType::Q1_0, &levels).expect_err("zeros");
    assert!(matches!(err, LevelsError::Unrepresentable { level: 0, .. }), "{err}");
    // +2 (Q2_0 code 3) has no trit.
    let mut plus_two = levels.clone();
    plus_two.levels[5] = 2;
    let err = encode_levels(TensorType::Ptq1_0, &plus_two).expect_err("+2");
    assert!(err.to_string().contains("weight 5 has level 2"), "{err}");
    // Two g64 halves with different scales cannot share one g128 scale, unless a half is all zero.
    let mut g64 = Levels {
        group: 64,
        scales: vec![f16::from_f32(0.5), f16::from_f32(0.25)],
        levels: vec![1; 128],
    };
    let err = encode_levels(TensorType::Ptq1_0, &g64).expect_err("unequal");
    assert!(matches!(err, LevelsError::UnequalScales { .. }), "{err}");
    g64.levels[64..].fill(0);
    let bytes = encode_levels(TensorType::Ptq1_0, &g64).expect("zero half");
    let mut out = vec![f32::NAN; 128];
    dequantize(TensorType::Ptq1_0, &bytes, &mut out).expect("dequantize");
    assert_eq!(out, g64.values());
}
