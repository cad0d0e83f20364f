//! Unit tests of the joint-attention launcher's kernel choice (no device needed).

use super::*;

/// Largest opt-in dynamic shared memory per block: A100 (sm_80), H100/H200 (sm_90) and the
/// consumer parts (sm_86, sm_89, sm_120).
const SM80_SHARED_OPTIN: usize = 166_912;
const SM90_SHARED_OPTIN: usize = 232_448;
const SM86_SHARED_OPTIN: usize = 101_376;

/// The default kernel for `head_dim` on a device without (false) or with wgmma.
fn default_variant(head_dim: usize, wgmma: bool) -> Result<FlashVariant, LaunchError> {
    FlashVariant::select(head_dim, SmallHeadKernel::for_device(head_dim, wgmma))
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
    // The doc's figures (mod.rs): 69,632 bytes at hd 128 (Q staged in the second K/V buffer),
    // 150,528 at hd 512.
    assert_eq!(default_variant(128, false).map(|v| v.shared_bytes()).ok(), Some(69_632));
    assert_eq!(default_variant(512, false).map(|v| v.shared_bytes()).ok(), Some(150_528));
    // On Hopper hd 128 runs the wgmma kernel: 3 stages x (K + V) x 128 keys x 256 bytes + the
    // 1024-byte alignment slack, one CTA per SM.
    let wgmma = default_variant(128, true).expect("supported");
    assert_eq!((wgmma.entry, wgmma.shared_bytes()), ("joint_attention_hd128_wgmma", 197_632));
    assert!(wgmma.shared_bytes() <= SM90_SHARED_OPTIN);
    assert_eq!((wgmma.block_q(), wgmma.softmax_keys), (128, 128));
    assert_eq!(wgmma.f32_q_entry, Some("joint_attention_hd128_wgmma_f32q"));
    for hd in [64, 384, 512] {
        assert!(!default_variant(hd, true).expect("supported").wgmma, "hd {hd}: no wgmma kernel");
    }
}

/// On the 99 KB devices (sm_86, sm_89, sm_120) hd 64 / 128 run their default kernels and
/// hd 384 / 512 the compact ones (FlashVariant::for_device picks them there).
#[test]
fn every_head_dim_has_a_variant_that_fits_the_consumer_parts() {
    for hd in [64, 128] {
        assert!(default_variant(hd, false).expect("supported").shared_bytes() <= SM86_SHARED_OPTIN, "hd {hd}");
    }
    for hd in [384, 512] {
        assert!(default_variant(hd, false).expect("supported").shared_bytes() > SM86_SHARED_OPTIN, "hd {hd}");
        let compact = FlashVariant::compact(hd).expect("compact kernel");
        assert!(compact.shared_bytes() <= SM86_SHARED_OPTIN, "hd {hd}");
        assert_eq!((compact.block_q(), compact.softmax_keys), (32, COMPACT_BLOCK_K), "hd {hd}");
        assert_eq!(compact.head_dim % compact.out_chunk, 0, "hd {hd}");
    }
    // The figures of joint_attention.cu's header.
    assert_eq!(FlashVariant::compact(384).map(|v| v.shared_bytes()).ok(), Some(58_880));
    assert_eq!(FlashVariant::compact(512).map(|v| v.shared_bytes()).ok(), Some(75_264));
    assert!(FlashVariant::compact(128).is_err());
}

#[test]
fn wgmma_is_the_hopper_choice_at_hd_128_and_an_error_at_hd_64() {
    use SmallHeadKernel as K;
    assert_eq!(K::for_device(128, true), K::Wgmma);
    assert_eq!(K::for_device(128, false), K::QRegs);
    assert_eq!(K::for_device(64, true), K::QRegs);
    assert_eq!(K::for_device(512, true), K::QRegs);
    assert!(FlashVariant::select(64, K::Wgmma).is_err());
    assert_eq!(K::available(128, true), vec![K::Wgmma, K::QRegs]);
    assert_eq!(K::available(64, true), vec![K::QRegs]);
    assert_eq!(K::available(128, false), vec![K::QRegs]);
    // The launchers' choice comes first.
    for (hd, wgmma) in [(64, false), (64, true), (128, false), (128, true)] {
        assert_eq!(K::available(hd, wgmma)[0], K::for_device(hd, wgmma), "hd {hd} wgmma {wgmma}");
    }
}

#[test]
fn the_q_regs_kernels_fit_two_ctas_per_hopper_sm() {
    /// Shared memory per SM on sm_90 and what the driver reserves per CTA.
    const SM90_SHARED_PER_SM: usize = 233_472;
    const RESERVED_PER_CTA: usize = 1_024;
    for hd in [64, 128] {
        let q_regs = FlashVariant::select(hd, SmallHeadKernel::QRegs).expect("supported");
        assert_eq!(q_regs.block_q(), 128, "hd {hd}");
        assert!(2 * (q_regs.shared_bytes() + RESERVED_PER_CTA) <= SM90_SHARED_PER_SM, "hd {hd}");
        // The softmax step the accuracy bound counts rescales by.
        let step = if hd == 128 { QREG_SOFTMAX_K } else { QREG_BLOCK_K };
        assert_eq!(q_regs.softmax_keys, step, "hd {hd}");
        // The f32 call converts only k and v: the kernel reads f32 q itself.
        assert!(q_regs.f32_q_entry.is_some_and(|e| e.starts_with(q_regs.entry)), "hd {hd}");
    }
    for hd in [384, 512] {
        let variants = [SmallHeadKernel::Wgmma, SmallHeadKernel::QRegs]
            .map(|kind| FlashVariant::select(hd, kind).ok());
        assert!(variants.iter().all(|v| *v == variants[0]), "hd {hd}: one kernel");
        assert_eq!(variants[0].map(|v| v.softmax_keys), Some(LARGE_HD_BLOCK_K));
        assert_eq!(variants[0].map(|v| v.f32_q_entry), Some(None), "hd {hd}");
    }
}

#[test]
fn every_selected_entry_point_is_registered() {
    let names: Vec<&str> = crate::cuda::library::entry_points().collect();
    for hd in HEAD_DIMS {
        for kind in [SmallHeadKernel::Wgmma, SmallHeadKernel::QRegs] {
            let Ok(v) = FlashVariant::select(hd, kind) else { continue };
            for entry in std::iter::once(v.entry).chain(v.f32_q_entry) {
                assert!(names.contains(&entry), "{entry} is not a registered entry point");
            }
        }
        if let Ok(v) = FlashVariant::compact(hd) {
            assert!(names.contains(&v.entry), "{} is not a registered entry point", v.entry);
        }
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
