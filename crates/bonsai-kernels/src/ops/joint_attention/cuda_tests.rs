//! Unit tests of the joint-attention launcher's kernel choice (no device needed).

use super::*;

/// Largest opt-in dynamic shared memory per block: A100 (sm_80) and H100/H200 (sm_90).
const SM80_SHARED_OPTIN: usize = 166_912;
const SM90_SHARED_OPTIN: usize = 232_448;

/// The default kernel for `head_dim` on a device without (false) or with wgmma.
fn default_variant(head_dim: usize, wgmma: bool) -> Result<FlashVariant, LaunchError> {
    FlashVariant::select(head_dim, SmallHeadKernel::resolve(None, head_dim, wgmma)?)
}

#[test]
fn every_head_dim_has_a_variant_that_fits_ampere_and_hopper() {
    for hd in HEAD_DIMS {
        let v = default_variant(hd, false).expect("supported");
        assert_eq!(v.head_dim % v.out_chunk, 0, "hd {hd}: chunks must tile the head");
        assert_eq!(v.out_chunk % 16, 0, "hd {hd}: mma column blocks");
        assert_eq!(v.block_k % 16, 0, "hd {hd}: mma k-steps over keys");
        assert!(v.shared_bytes() <= SM80_SHARED_OPTIN.min(SM90_SHARED_OPTIN), "hd {hd}");
    }
    // The doc's figures (mod.rs): 104,448 bytes at hd 128, 150,528 at hd 512.
    assert_eq!(default_variant(128, false).map(|v| v.shared_bytes()).ok(), Some(104_448));
    assert_eq!(default_variant(512, false).map(|v| v.shared_bytes()).ok(), Some(150_528));
    // On Hopper hd 128 runs the wgmma kernel: 2 stages x (K + V) x 128 keys x 256 bytes + the
    // 1024-byte alignment slack, one CTA per SM.
    let wgmma = default_variant(128, true).expect("supported");
    assert_eq!((wgmma.entry, wgmma.shared_bytes()), ("joint_attention_hd128_wgmma", 132_096));
    assert!(wgmma.shared_bytes() <= SM90_SHARED_OPTIN);
    assert_eq!((wgmma.block_q(), wgmma.softmax_keys), (128, 128));
    assert_eq!(wgmma.f32_q_entry, Some("joint_attention_hd128_wgmma_f32q"));
    for hd in [64, 384, 512] {
        assert!(!default_variant(hd, true).expect("supported").wgmma, "hd {hd}: no wgmma kernel");
    }
}

#[test]
fn wgmma_is_the_hopper_default_at_hd_128_and_an_error_where_it_cannot_run() {
    use SmallHeadKernel as K;
    assert_eq!(K::resolve(None, 128, true).ok(), Some(K::Wgmma));
    assert_eq!(K::resolve(None, 128, false).ok(), Some(K::QRegs));
    assert_eq!(K::resolve(None, 64, true).ok(), Some(K::QRegs));
    assert!(K::resolve(Some(K::Wgmma), 128, false).is_err());
    assert!(K::resolve(Some(K::Wgmma), 64, true).is_err());
    assert_eq!(K::resolve(Some(K::QRegs), 128, true).ok(), Some(K::QRegs));
    assert_eq!(K::available(128, true), vec![K::Wgmma, K::QRegs, K::WideWarp, K::SixteenRowWarp]);
    assert_eq!(K::available(64, true), Vec::from(K::MMA_SYNC));
    assert_eq!(K::available(128, false), Vec::from(K::MMA_SYNC));
}

#[test]
fn every_small_head_kernel_fits_two_ctas_per_hopper_sm() {
    /// Shared memory per SM on sm_90 and what the driver reserves per CTA.
    const SM90_SHARED_PER_SM: usize = 233_472;
    const RESERVED_PER_CTA: usize = 1_024;
    for hd in [64, 128] {
        let variants =
            SmallHeadKernel::MMA_SYNC.map(|kind| FlashVariant::select(hd, kind).expect("supported"));
        let [q_regs, wide, old] = variants;
        assert!(q_regs.entry != wide.entry && wide.entry != old.entry && q_regs.entry != old.entry);
        // All cover 128 queries per CTA with the same K/V tiles: the same shared layout.
        for v in variants {
            assert_eq!(v.block_q(), 128, "hd {hd} {}", v.entry);
            assert_eq!(v.shared_bytes(), wide.shared_bytes(), "hd {hd} {}", v.entry);
            assert!(2 * (v.shared_bytes() + RESERVED_PER_CTA) <= SM90_SHARED_PER_SM, "hd {hd}");
        }
        // The softmax step the accuracy bound counts rescales by.
        let q_regs_step = if hd == 128 { QREG_SOFTMAX_K } else { QREG_BLOCK_K };
        assert_eq!((q_regs.softmax_keys, wide.softmax_keys, old.softmax_keys), (q_regs_step, 64, 64));
        // Only the Q-in-registers kernel reads f32 q itself (the f32 call then converts k, v).
        assert!(q_regs.f32_q_entry.is_some_and(|e| e.starts_with(q_regs.entry)), "hd {hd}");
        assert_eq!((wide.f32_q_entry, old.f32_q_entry), (None, None), "hd {hd}");
    }
    assert_eq!(SmallHeadKernel::parse(None).ok(), Some(None));
    assert_eq!(SmallHeadKernel::parse(Some("wgmma")).ok(), Some(Some(SmallHeadKernel::Wgmma)));
    assert_eq!(SmallHeadKernel::parse(Some("qregs")).ok(), Some(Some(SmallHeadKernel::QRegs)));
    assert_eq!(SmallHeadKernel::parse(Some("wide")).ok(), Some(Some(SmallHeadKernel::WideWarp)));
    assert_eq!(SmallHeadKernel::parse(Some("old")).ok(), Some(Some(SmallHeadKernel::SixteenRowWarp)));
    assert!(SmallHeadKernel::parse(Some("OLD")).is_err());
    for hd in [384, 512] {
        let variants = [
            SmallHeadKernel::Wgmma,
            SmallHeadKernel::QRegs,
            SmallHeadKernel::WideWarp,
        ]
        .map(|kind| FlashVariant::select(hd, kind).ok());
        assert!(variants.iter().all(|v| *v == variants[0]), "hd {hd}: one kernel");
        assert_eq!(variants[0].map(|v| v.softmax_keys), Some(LARGE_HD_BLOCK_K));
    }
}

#[test]
fn unsupported_head_dims_and_empty_shapes_are_errors() {
    for hd in [0, 8, 96, 256, 1024] {
        assert!(default_variant(hd, false).is_err(), "hd {hd}");
        assert!(default_variant(hd, true).is_err(), "hd {hd}");
    }
    assert!(tensor_len(AttnDims { heads: 0, seq: 4, head_dim: 64 }).is_err());
    assert!(tensor_len(AttnDims { heads: 1, seq: 0, head_dim: 64 }).is_err());
    assert!(tensor_len(AttnDims { heads: 1, seq: 1 << 31, head_dim: 64 }).is_err());
    assert_eq!(scratch_len(AttnDims { heads: 2, seq: 3, head_dim: 64 }), 3 * 2 * 3 * 64);
}
