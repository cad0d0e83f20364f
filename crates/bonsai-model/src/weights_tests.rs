use super::*;
use crate::sampler::Rng;

fn fresh_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
}

const N: usize = 3;
const K: usize = 256;

/// Random blocks with plausible scales; returns the bytes and the scale of every block.
fn random_blocks(rng: &mut Rng, block_bytes: usize, scale_first: bool) -> (Vec<u8>, Vec<f32>) {
    let n_blocks = N * K / GROUP;
    let mut bytes = Vec::new();
    let mut scales = Vec::new();
    for _ in 0..n_blocks {
        let d = f16::from_f32((rng.next_f64() * 0.1 + 0.001) as f32);
        scales.push(d.to_f32());
        let payload: Vec<u8> = (0..block_bytes - 2).map(|_| rng.next_u64() as u8).collect();
        if scale_first {
            bytes.extend_from_slice(&d.to_le_bytes());
            bytes.extend_from_slice(&payload);
        } else {
            bytes.extend_from_slice(&payload);
            bytes.extend_from_slice(&d.to_le_bytes());
        }
    }
    (bytes, scales)
}

#[test]
fn q1_0_blocks_match_the_spec_bit_order() {
    let seed = fresh_seed();
    let mut rng = Rng::new(seed);
    let (bytes, scales) = random_blocks(&mut rng, Q1_0_BLOCK_BYTES, true);
    let m = q1_from_q1_0_blocks("t", N, K, &bytes).unwrap();
    for row in 0..N {
        for col in 0..K {
            let b = row * (K / GROUP) + col / GROUP;
            let j = col % GROUP;
            // SPEC §1: bit j of qs is byte j/8, bit j%8; 1 -> +d, 0 -> -d.
            let bit = (bytes[b * Q1_0_BLOCK_BYTES + 2 + j / 8] >> (j % 8)) & 1;
            let want = if bit == 1 { scales[b] } else { -scales[b] };
            assert_eq!(m.weight(row, col), want, "seed {seed}: ({row}, {col})");
        }
    }
}

#[test]
fn hand_built_q1_block() {
    let mut block = vec![0u8; Q1_0_BLOCK_BYTES];
    block[..2].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
    block[2] = 0b0000_0101; // weights 0 and 2 positive
    block[17] = 0b1000_0000; // weight 127 positive
    let m = q1_from_q1_0_blocks("t", 1, GROUP, &block).unwrap();
    let w: Vec<f32> = (0..GROUP).map(|c| m.weight(0, c)).collect();
    assert_eq!(&w[..4], &[0.5, -0.5, 0.5, -0.5]);
    assert_eq!(w[127], 0.5);
    assert_eq!(w[126], -0.5);
}

fn two_bit_value(layout: TwoBitBlocks, code: u8, d: f32) -> f32 {
    match layout {
        // SPEC §1: 00 -> -d, 01 -> 0, 10 -> +d, 11 -> 0.
        TwoBitBlocks::TernaryScaleLast => [-d, 0.0, d, 0.0][code as usize],
        // SPEC §1: c -> (c - 1)·d.
        TwoBitBlocks::PrismScaleFirst | TwoBitBlocks::PairedG64 => (code as f32 - 1.0) * d,
    }
}

#[test]
fn two_bit_blocks_match_the_spec_for_both_layouts() {
    let seed = fresh_seed();
    let mut rng = Rng::new(seed);
    for (layout, scale_first) in [(TwoBitBlocks::TernaryScaleLast, false), (TwoBitBlocks::PrismScaleFirst, true)] {
        let (bytes, scales) = random_blocks(&mut rng, Q2_G128_BLOCK_BYTES, scale_first);
        let m = q2_from_two_bit_blocks("t", layout, N, K, &bytes).unwrap();
        let payload_start = if scale_first { 2 } else { 0 };
        for row in 0..N {
            for col in 0..K {
                let b = row * (K / GROUP) + col / GROUP;
                let j = col % GROUP;
                let code = (bytes[b * Q2_G128_BLOCK_BYTES + payload_start + j / 4] >> (2 * (j % 4))) & 3;
                let want = two_bit_value(layout, code, scales[b]);
                assert_eq!(m.weight(row, col), want, "seed {seed}: {layout:?} ({row}, {col}) code {code}");
            }
        }
    }
}

/// Upstream Q2_0 g64 blocks whose pairs share a scale read as the g128 block they split: weight
/// j of 128-group b is code j % 64 of g64 block 2b + j / 64.
#[test]
fn paired_g64_blocks_read_exactly_and_unpaired_ones_are_errors() {
    const G64_BYTES: usize = 18;
    let seed = fresh_seed();
    let mut rng = Rng::new(seed);
    let (g128, scales) = random_blocks(&mut rng, Q2_G128_BLOCK_BYTES, true);
    let mut bytes = Vec::new();
    for block in g128.chunks_exact(Q2_G128_BLOCK_BYTES) {
        for half in block[2..].chunks_exact(16) {
            bytes.extend_from_slice(&block[..2]);
            bytes.extend_from_slice(half);
        }
    }
    let m = q2_from_two_bit_blocks("t", TwoBitBlocks::PairedG64, N, K, &bytes).unwrap();
    for row in 0..N {
        for col in 0..K {
            let g64 = (row * K + col) / 64;
            let j = col % 64;
            let code = (bytes[g64 * G64_BYTES + 2 + j / 4] >> (2 * (j % 4))) & 3;
            let want = two_bit_value(TwoBitBlocks::PairedG64, code, scales[(row * K + col) / GROUP]);
            assert_eq!(m.weight(row, col), want, "seed {seed}: ({row}, {col}) code {code}");
        }
    }
    // The second block of group 1 with another scale.
    bytes[3 * G64_BYTES] ^= 1;
    let err = q2_from_two_bit_blocks("blk.0.ffn_up.weight", TwoBitBlocks::PairedG64, N, K, &bytes).unwrap_err();
    assert!(matches!(err, ConvertError::UnpairedG64 { ref name, group: 1 } if name == "blk.0.ffn_up.weight"), "{err}");
}

#[test]
fn ternary_code_fix_only_touches_code_11() {
    // Lanes from low to high: 00, 01, 10, 11 -> 00, 01, 10, 01.
    assert_eq!(normalise_ternary_codes(0b11_10_01_00), 0b01_10_01_00);
    assert_eq!(normalise_ternary_codes(u32::MAX), 0x5555_5555);
    assert_eq!(normalise_ternary_codes(0xAAAA_AAAA), 0xAAAA_AAAA);
}

#[test]
fn wrong_lengths_and_shapes_are_errors_naming_the_tensor() {
    let e = q1_from_q1_0_blocks("blk.0.attn_q.weight", 2, GROUP, &[0u8; 10]).unwrap_err();
    assert!(e.to_string().contains("blk.0.attn_q.weight"), "{e}");
    let e = q2_from_two_bit_blocks("x", TwoBitBlocks::PrismScaleFirst, 1, 100, &[]).unwrap_err();
    assert!(matches!(e, ConvertError::Shape { .. }), "{e}");
}

#[test]
fn ternary_blocks_become_q2_weights_equal_to_their_decoding() {
    // Random bytes are valid blocks of every ternary type (any byte is five trits, any 2-bit code a
    // level); many rows exercise the parallel split. Each weight must equal the format's own
    // decoding, and TQ's 256-groups give two 128-groups with the one scale.
    let seed = fresh_seed();
    let mut rng = Rng::new(seed);
    let (n, k) = (37, 512);
    for ty in [TensorType::Ptq1_0, TensorType::Tq1_0, TensorType::Tq2_0] {
        let n_blocks = n * k / ty.block_elems();
        let mut bytes: Vec<u8> = (0..n_blocks * ty.block_bytes()).map(|_| rng.next_u64() as u8).collect();
        for block in bytes.chunks_exact_mut(ty.block_bytes()) {
            let d = f16::from_f32((rng.next_f64() * 0.1 + 0.001) as f32).to_le_bytes();
            let len = block.len();
            block[len - 2..].copy_from_slice(&d);
        }
        let m = q2_from_level_blocks("t", ty, n, k, &bytes).unwrap();
        let mut want = vec![0f32; n * k];
        bonsai_gguf::dequantize(ty, &bytes, &mut want).unwrap();
        for row in 0..n {
            for col in 0..k {
                assert_eq!(m.weight(row, col), want[row * k + col], "{} seed {seed}: ({row}, {col})", ty.name());
            }
        }
    }
    let e = q2_from_level_blocks("blk.0.ffn_up.weight", TensorType::Tq2_0, 1, 128, &[0u8; 33]).unwrap_err();
    assert!(e.to_string().contains("blk.0.ffn_up.weight") && e.to_string().contains("256"), "{e}");
}
