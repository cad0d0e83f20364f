// The one list of CUDA sources and their entry points.
//
// Every active `.cu` file is listed here once, in the order it is concatenated into the single
// module (after `prelude.cuh`). `build.rs` reads this same file (via `include!`), so the embedded
// precompiled code and the run-time build always see identical source text.
//
// To add a kernel: put `<op>.cu` in its op folder, add a `KernelSource` row here naming every
// `extern "C" __global__` entry point it defines. The library resolves every name at load and
// fails with the missing name otherwise. (`include_str!` paths are relative to this file.)
//
// Plain `//` comments, not `//!`: `include!` rejects inner doc comments. Nothing here may name
// other crate items, since the file must also compile inside `build.rs`.

/// One `.cu` file of the library.
pub struct KernelSource {
    /// Path relative to the crate's `src/`, for messages and for `build.rs`.
    pub path: &'static str,
    /// The file's text.
    pub text: &'static str,
    /// Every `extern "C"` entry point the file defines.
    pub entry_points: &'static [&'static str],
}

/// Architectures `build.rs` embeds SASS for by default (`sm_XX` as the number XX;
/// `CUDAARCHS=90;...` overrides). A cubin runs on devices of the same major version and an
/// equal or higher minor one (the sm_90a one, [`compile_target`], on 9.0 only), so these cover
/// Ampere, Ada and Hopper; any other device (Blackwell: sm_100, sm_120) compiles once at run time
/// for its own plain target and is cached. Each one costs build time and binary size (~1.2 MB).
pub const EMBED_ARCHS: &[u32] = &[80, 86, 89, 90];

/// The compiler target for architecture `arch`: `sm_90a` for Hopper (compute capability 9.0),
/// whose arch-specific instructions (wgmma) the prefill GEMM uses; an sm_90a cubin runs only on
/// 9.0 devices, the only ones that select it. `sm_XX` for every other architecture.
pub fn compile_target(arch: u32) -> String {
    if arch == 90 {
        "sm_90a".to_string()
    } else {
        format!("sm_{arch}")
    }
}

/// nvcc flags for every offline compile (build.rs and the run-time nvcc tier), before
/// `-arch=sm_XX`. No `-lineinfo`: it more than triples the cubin (line tables), which every load
/// and the binary would carry.
pub const NVCC_FLAGS: &[&str] = &["-cubin", "-O3", "-std=c++17", "-Werror", "all-warnings"];

/// NVRTC options for every run-time compile, before `--gpu-architecture=sm_XX`.
/// NVRTC ships no CUDA headers; the prelude supplies everything the kernels use.
pub const NVRTC_OPTIONS: &[&str] = &["-default-device", "-std=c++17"];

/// Every file of the library in concatenation order: prelude, PTX wrappers, machinery, then `SOURCES`.
pub fn all_sources() -> impl Iterator<Item = &'static KernelSource> {
    [&PRELUDE, &PTX].into_iter().chain(MACHINERY_SOURCES.iter()).chain(SOURCES.iter())
}

/// The single source text of the library, each file behind a marker line naming it (compiler
/// messages then point at the right file).
pub fn combined_source() -> String {
    let mut text = String::new();
    for src in all_sources() {
        text.push_str("// ---- ");
        text.push_str(src.path);
        text.push_str(" ----\n");
        text.push_str(src.text);
        text.push('\n');
    }
    text
}

/// Every entry point the registry promises, in registry order.
pub fn entry_points() -> impl Iterator<Item = &'static str> {
    all_sources().flat_map(|s| s.entry_points.iter().copied())
}

/// The shared header every kernel file relies on (types, warp reductions, f16 helpers).
pub const PRELUDE: KernelSource = KernelSource {
    path: "cuda/prelude.cuh",
    text: include_str!("prelude.cuh"),
    entry_points: &[],
};

/// Every inline-PTX wrapper (mma, ldmatrix, cp.async, conversions), with emulated twins in emu/.
pub const PTX: KernelSource = KernelSource {
    path: "cuda/ptx.cuh",
    text: include_str!("ptx.cuh"),
    entry_points: &[],
};

/// The library machinery's own kernels, concatenated right after the PTX wrappers. The selftest
/// kernel proves a loaded module runs (`bonsai kernels info` launches it); the PTX probes run the
/// ptx.cuh wrappers for `bonsai kernels verify`.
pub const MACHINERY_SOURCES: &[KernelSource] = &[
    KernelSource {
        path: "cuda/selftest.cu",
        text: include_str!("selftest.cu"),
        entry_points: &[
            "bonsai_selftest_fill",
            "bonsai_ptx_probe",
            "bonsai_wgmma_probe",
            "bonsai_wgmma_probe_bf16",
            "bonsai_wgmma_tf32_probe",
        ],
    },
];

/// Every kernel file, in concatenation order.
pub const SOURCES: &[KernelSource] = &[
    // Templates only: the device weight layout, the decode GEMV and the prefill GEMMs every
    // quantized matmul instantiates.
    KernelSource {
        path: "ops/matmul_q1/weight_layout.cu",
        text: include_str!("../ops/matmul_q1/weight_layout.cu"),
        entry_points: &[],
    },
    KernelSource {
        path: "ops/matmul_q1/matmul_gemv.cu",
        text: include_str!("../ops/matmul_q1/matmul_gemv.cu"),
        entry_points: &[],
    },
    KernelSource {
        path: "ops/matmul_q1/matmul_gemv_tc.cu",
        text: include_str!("../ops/matmul_q1/matmul_gemv_tc.cu"),
        entry_points: &[],
    },
    KernelSource {
        path: "ops/matmul_q1/matmul_gemv_b1.cu",
        text: include_str!("../ops/matmul_q1/matmul_gemv_b1.cu"),
        entry_points: &["gemv_b1_prepare", "gemv_b1_prepare_embed_q1", "gemv_b1_prepare_embed_q2"],
    },
    KernelSource {
        path: "ops/matmul_q1/matmul_gemv_b1_tiles.cu",
        text: include_str!("../ops/matmul_q1/matmul_gemv_b1_tiles.cu"),
        entry_points: &["matmul_q1_gemv_b1_tiles", "matmul_q2_gemv_b1_tiles"],
    },
    KernelSource {
        path: "ops/matmul_q1/matmul_gemm.cu",
        text: include_str!("../ops/matmul_q1/matmul_gemm.cu"),
        entry_points: &[],
    },
    KernelSource {
        path: "ops/matmul_q1/matmul_gemm_f16.cu",
        text: include_str!("../ops/matmul_q1/matmul_gemm_f16.cu"),
        entry_points: &["x_to_f16_rows_q1", "x_to_f16_rows_q2", "x_to_f16_rows_norm_q1", "x_to_f16_rows_norm_q2"],
    },
    KernelSource {
        path: "ops/matmul_q1/matmul_gemm_wgmma.cu",
        text: include_str!("../ops/matmul_q1/matmul_gemm_wgmma.cu"),
        entry_points: &[],
    },
    KernelSource {
        path: "ops/matmul_q1/matmul_gemm_small.cu",
        text: include_str!("../ops/matmul_q1/matmul_gemm_small.cu"),
        entry_points: &[],
    },
    KernelSource {
        path: "ops/matmul_q1/matmul_q1.cu",
        text: include_str!("../ops/matmul_q1/matmul_q1.cu"),
        entry_points: &[
            "matmul_q1_gemv_tc",
            "matmul_q1_gemv_b1",
            "matmul_q1_gemv_b1_out",
            "matmul_q1_gemv_b1_rope",
            "matmul_q1_gemv_b1_pair",
            "matmul_q1_gemv_b1_t2",
            "matmul_q1_gemv_b1_t4",
            "matmul_q1_gemv_b1_t8",
            "matmul_q1_gemv_b1_t2_out",
            "matmul_q1_gemv_b1_t4_out",
            "matmul_q1_gemv_b1_t8_out",
            "matmul_q1_gemm_small8",
            "matmul_q1_gemm_small16",
            "matmul_q1_gemm_small32",
            "matmul_q1_gemm_mma_bf16x3",
            "matmul_q1_gemm_f16_128x128",
            "matmul_q1_gemm_f16_128x128_split",
            "matmul_q1_gemm_f16_128x256",
            "matmul_q1_gemm_wgmma",
            "matmul_q1_gemm_wgmma_n64",
            "matmul_q1_gemm_wgmma_n64_split",
            "matmul_q1_gemm_wgmma_n256",
            "matmul_q1_gemm_wgmma_n256_split",
            "matmul_q1_gemm_wgmma_pair",
            "matmul_q1_gemm_wgmma_n256_pair",
            "matmul_q1_add_gemv_tc",
            "matmul_q1_add_gemv_b1",
            "matmul_q1_add_gemv_b1_out",
            "matmul_q1_add_gemv_b1_t2",
            "matmul_q1_add_gemv_b1_t4",
            "matmul_q1_add_gemv_b1_t8",
            "matmul_q1_add_gemv_b1_t2_out",
            "matmul_q1_add_gemv_b1_t4_out",
            "matmul_q1_add_gemv_b1_t8_out",
            "matmul_q1_add_gemm_small8",
            "matmul_q1_add_gemm_small16",
            "matmul_q1_add_gemm_small32",
            "matmul_q1_add_gemm_mma_bf16x3",
            "matmul_q1_add_gemm_f16_128x128",
            "matmul_q1_add_gemm_f16_128x128_split",
            "matmul_q1_add_gemm_f16_128x256",
            "matmul_q1_add_gemm_wgmma",
            "matmul_q1_add_gemm_wgmma_n64",
            "matmul_q1_add_gemm_wgmma_n64_split",
            "matmul_q1_add_gemm_wgmma_n256",
            "matmul_q1_add_gemm_wgmma_n256_split",
        ],
    },
    KernelSource {
        path: "ops/matmul_q2/matmul_q2.cu",
        text: include_str!("../ops/matmul_q2/matmul_q2.cu"),
        entry_points: &[
            "matmul_q2_gemv_tc",
            "matmul_q2_gemv_b1",
            "matmul_q2_gemv_b1_out",
            "matmul_q2_gemv_b1_rope",
            "matmul_q2_gemv_b1_pair",
            "matmul_q2_gemv_b1_t2",
            "matmul_q2_gemv_b1_t4",
            "matmul_q2_gemv_b1_t8",
            "matmul_q2_gemv_b1_t2_out",
            "matmul_q2_gemv_b1_t4_out",
            "matmul_q2_gemv_b1_t8_out",
            "matmul_q2_gemm_small8",
            "matmul_q2_gemm_small16",
            "matmul_q2_gemm_small32",
            "matmul_q2_gemm_mma_bf16x3",
            "matmul_q2_gemm_f16_128x128",
            "matmul_q2_gemm_f16_128x128_split",
            "matmul_q2_gemm_f16_128x256",
            "matmul_q2_gemm_wgmma",
            "matmul_q2_gemm_wgmma_n64",
            "matmul_q2_gemm_wgmma_n64_split",
            "matmul_q2_gemm_wgmma_n256",
            "matmul_q2_gemm_wgmma_n256_split",
            "matmul_q2_gemm_wgmma_pair",
            "matmul_q2_gemm_wgmma_n256_pair",
            "matmul_q2_add_gemv_tc",
            "matmul_q2_add_gemv_b1",
            "matmul_q2_add_gemv_b1_out",
            "matmul_q2_add_gemv_b1_t2",
            "matmul_q2_add_gemv_b1_t4",
            "matmul_q2_add_gemv_b1_t8",
            "matmul_q2_add_gemv_b1_t2_out",
            "matmul_q2_add_gemv_b1_t4_out",
            "matmul_q2_add_gemv_b1_t8_out",
            "matmul_q2_add_gemm_small8",
            "matmul_q2_add_gemm_small16",
            "matmul_q2_add_gemm_small32",
            "matmul_q2_add_gemm_mma_bf16x3",
            "matmul_q2_add_gemm_f16_128x128",
            "matmul_q2_add_gemm_f16_128x128_split",
            "matmul_q2_add_gemm_f16_128x256",
            "matmul_q2_add_gemm_wgmma",
            "matmul_q2_add_gemm_wgmma_n64",
            "matmul_q2_add_gemm_wgmma_n64_split",
            "matmul_q2_add_gemm_wgmma_n256",
            "matmul_q2_add_gemm_wgmma_n256_split",
        ],
    },
    KernelSource {
        path: "ops/gate_up_swiglu_q1/gate_up_swiglu_q1.cu",
        text: include_str!("../ops/gate_up_swiglu_q1/gate_up_swiglu_q1.cu"),
        entry_points: &[
            "gate_up_swiglu_q1_gemv_tc",
            "gate_up_swiglu_q1_gemv_b1",
            "gate_up_swiglu_q1_gemv_b1_out",
            "gate_up_swiglu_q1_gemv_b1_t2",
            "gate_up_swiglu_q1_gemv_b1_t4",
            "gate_up_swiglu_q1_gemv_b1_t8",
            "gate_up_swiglu_q1_gemv_b1_t2_out",
            "gate_up_swiglu_q1_gemv_b1_t4_out",
            "gate_up_swiglu_q1_gemv_b1_t8_out",
            "gate_up_swiglu_q1_gemm_small8",
            "gate_up_swiglu_q1_gemm_small16",
            "gate_up_swiglu_q1_gemm_small32",
            "gate_up_swiglu_q1_gemm_mma_bf16x3",
            "gate_up_swiglu_q1_gemm_f16_128x128",
            "gate_up_swiglu_q1_gemm_f16_128x128_split",
            "gate_up_swiglu_q1_gemm_f16_128x256",
            "gate_up_swiglu_q1_gemm_wgmma",
            "gate_up_swiglu_q1_gemm_wgmma_n64",
            "gate_up_swiglu_q1_gemm_wgmma_n64_split",
            "gate_up_swiglu_q1_gemm_wgmma_n256",
            "gate_up_swiglu_q1_gemm_wgmma_n256_split",
        ],
    },
    KernelSource {
        path: "ops/gate_up_swiglu_q2/gate_up_swiglu_q2.cu",
        text: include_str!("../ops/gate_up_swiglu_q2/gate_up_swiglu_q2.cu"),
        entry_points: &[
            "gate_up_swiglu_q2_gemv_tc",
            "gate_up_swiglu_q2_gemv_b1",
            "gate_up_swiglu_q2_gemv_b1_out",
            "gate_up_swiglu_q2_gemv_b1_t2",
            "gate_up_swiglu_q2_gemv_b1_t4",
            "gate_up_swiglu_q2_gemv_b1_t8",
            "gate_up_swiglu_q2_gemv_b1_t2_out",
            "gate_up_swiglu_q2_gemv_b1_t4_out",
            "gate_up_swiglu_q2_gemv_b1_t8_out",
            "gate_up_swiglu_q2_gemm_small8",
            "gate_up_swiglu_q2_gemm_small16",
            "gate_up_swiglu_q2_gemm_small32",
            "gate_up_swiglu_q2_gemm_mma_bf16x3",
            "gate_up_swiglu_q2_gemm_f16_128x128",
            "gate_up_swiglu_q2_gemm_f16_128x128_split",
            "gate_up_swiglu_q2_gemm_f16_128x256",
            "gate_up_swiglu_q2_gemm_wgmma",
            "gate_up_swiglu_q2_gemm_wgmma_n64",
            "gate_up_swiglu_q2_gemm_wgmma_n64_split",
            "gate_up_swiglu_q2_gemm_wgmma_n256",
            "gate_up_swiglu_q2_gemm_wgmma_n256_split",
        ],
    },
    KernelSource {
        path: "ops/rms_norm/rms_norm.cu",
        text: include_str!("../ops/rms_norm/rms_norm.cu"),
        entry_points: &[
            "rms_norm_row_per_block",
        ],
    },
    KernelSource {
        path: "ops/qk_norm_rope/qk_norm_rope.cu",
        text: include_str!("../ops/qk_norm_rope/qk_norm_rope.cu"),
        entry_points: &[
            "qk_norm_rope_head_per_block",
            "qk_norm_rope_kv_write",
        ],
    },
    KernelSource {
        path: "ops/kv_write/kv_write.cu",
        text: include_str!("../ops/kv_write/kv_write.cu"),
        entry_points: &[
            "kv_write_head_per_block",
        ],
    },
    KernelSource {
        path: "ops/attention/attention.cu",
        text: include_str!("../ops/attention/attention.cu"),
        entry_points: &[
            "attention_split_keys",
            "attention_split_keys_any_group",
            "attention_split_keys_hd256",
        ],
    },
    // Device functions only: the flash-attention pieces the prefill and joint attention share.
    KernelSource {
        path: "ops/attention/flash.cuh",
        text: include_str!("../ops/attention/flash.cuh"),
        entry_points: &[],
    },
    KernelSource {
        path: "ops/attention/attention_prefill_mma.cu",
        text: include_str!("../ops/attention/attention_prefill_mma.cu"),
        entry_points: &[
            "attention_prefill_mma_hd64",
            "attention_prefill_mma_hd128",
            "attention_prefill_mma_hd64_any_group",
            "attention_prefill_mma_hd128_any_group",
            "attention_prefill_mma_hd256",
            "attention_prefill_mma_hd256_any_group",
        ],
    },
    KernelSource {
        path: "ops/attention/attention_decode.cu",
        text: include_str!("../ops/attention/attention_decode.cu"),
        entry_points: &[
            "attention_decode_g1_hd64",
            "attention_decode_g2_hd64",
            "attention_decode_g4_hd64",
            "attention_decode_g8_hd64",
            "attention_decode_g1_hd128",
            "attention_decode_g2_hd128",
            "attention_decode_g4_hd128",
            "attention_decode_g8_hd128",
            "attention_decode_g3_hd64",
            "attention_decode_g5_hd64",
            "attention_decode_g6_hd64",
            "attention_decode_g7_hd64",
            "attention_decode_g3_hd128",
            "attention_decode_g5_hd128",
            "attention_decode_g6_hd128",
            "attention_decode_g7_hd128",
            "attention_decode_g1_hd256",
            "attention_decode_g2_hd256",
            "attention_decode_g6_hd256",
            "attention_decode_g1_hd128_planes",
            "attention_decode_g2_hd128_planes",
            "attention_decode_g4_hd128_planes",
            "attention_decode_g8_hd128_planes",
            "attention_decode_g2_hd128_planes_heads",
            "attention_decode_g4_hd128_planes_heads",
        ],
    },
    KernelSource {
        path: "ops/decode_seqs/decode_seqs.cu",
        text: include_str!("../ops/decode_seqs/decode_seqs.cu"),
        entry_points: &[
            "qk_norm_rope_kv_write_seqs",
            "attention_decode_g1_hd64_seqs",
            "attention_decode_g2_hd64_seqs",
            "attention_decode_g3_hd64_seqs",
            "attention_decode_g4_hd64_seqs",
            "attention_decode_g5_hd64_seqs",
            "attention_decode_g6_hd64_seqs",
            "attention_decode_g7_hd64_seqs",
            "attention_decode_g8_hd64_seqs",
            "attention_decode_g1_hd128_seqs",
            "attention_decode_g2_hd128_seqs",
            "attention_decode_g3_hd128_seqs",
            "attention_decode_g4_hd128_seqs",
            "attention_decode_g5_hd128_seqs",
            "attention_decode_g6_hd128_seqs",
            "attention_decode_g7_hd128_seqs",
            "attention_decode_g8_hd128_seqs",
            "attention_decode_g1_hd128_seqs_planes",
            "attention_decode_g2_hd128_seqs_planes",
            "attention_decode_g4_hd128_seqs_planes",
            "attention_decode_g8_hd128_seqs_planes",
            "attention_decode_g1_hd256_seqs",
            "attention_decode_g2_hd256_seqs",
            "attention_decode_g6_hd256_seqs",
            "position_advance_seqs",
        ],
    },
    KernelSource {
        path: "ops/joint_attention/joint_attention.cu",
        text: include_str!("../ops/joint_attention/joint_attention.cu"),
        entry_points: &[
            "joint_attention_to_bf16",
            "joint_attention_hd384",
            "joint_attention_hd512",
            "joint_attention_hd384_compact",
            "joint_attention_hd512_compact",
        ],
    },
    KernelSource {
        path: "ops/joint_attention/joint_attention_qreg.cu",
        text: include_str!("../ops/joint_attention/joint_attention_qreg.cu"),
        entry_points: &[
            "joint_attention_hd64_q_regs",
            "joint_attention_hd128_q_regs",
            "joint_attention_hd64_q_regs_f32q",
            "joint_attention_hd128_q_regs_f32q",
        ],
    },
    KernelSource {
        path: "ops/joint_attention/joint_attention_wgmma.cu",
        text: include_str!("../ops/joint_attention/joint_attention_wgmma.cu"),
        entry_points: &["joint_attention_hd128_wgmma", "joint_attention_hd128_wgmma_f32q"],
    },
    KernelSource {
        path: "ops/softmax/softmax.cu",
        text: include_str!("../ops/softmax/softmax.cu"),
        entry_points: &[
            "softmax_row_per_block",
        ],
    },
    KernelSource {
        path: "ops/swiglu/swiglu.cu",
        text: include_str!("../ops/swiglu/swiglu.cu"),
        entry_points: &[
            "swiglu_grid_stride",
        ],
    },
    KernelSource {
        path: "ops/argmax/argmax.cu",
        text: include_str!("../ops/argmax/argmax.cu"),
        entry_points: &[
            "argmax_multi_block",
            "argmax_rows",
        ],
    },
    KernelSource {
        path: "ops/sample_top_k/sample_top_k.cu",
        text: include_str!("../ops/sample_top_k/sample_top_k.cu"),
        entry_points: &[
            "sample_block_candidates",
            "sample_finalize",
        ],
    },
    KernelSource {
        path: "ops/sample_rows/sample_rows.cu",
        text: include_str!("../ops/sample_rows/sample_rows.cu"),
        entry_points: &[
            "sample_rows",
        ],
    },
    KernelSource {
        path: "ops/embed_rows/embed_rows.cu",
        text: include_str!("../ops/embed_rows/embed_rows.cu"),
        entry_points: &[
            "embed_rows_q1",
            "embed_rows_q2",
        ],
    },
    KernelSource {
        path: "ops/residual_add/residual_add.cu",
        text: include_str!("../ops/residual_add/residual_add.cu"),
        entry_points: &[
            "residual_add_grid_stride",
        ],
    },
    KernelSource {
        path: "ops/position_advance/position_advance.cu",
        text: include_str!("../ops/position_advance/position_advance.cu"),
        entry_points: &[
            "position_advance",
        ],
    },
    // Templates only: the 3xTF32 tensor-core tile machinery of gemm_f32 and conv3x3.
    KernelSource {
        path: "ops/gemm_f32/tile_3xtf32.cu",
        text: include_str!("../ops/gemm_f32/tile_3xtf32.cu"),
        entry_points: &[],
    },
    KernelSource {
        path: "ops/gemm_f32/gemm_f32.cu",
        text: include_str!("../ops/gemm_f32/gemm_f32.cu"),
        entry_points: &[
            "gemm_f32_3xtf32_vec16",
            "gemm_f32_3xtf32_any_k",
            "gemm_f32_rows_column_cta_vec16",
            "gemm_f32_rows_column_cta_any_k",
            "gemm_f32_small_n_vec16",
            "gemm_f32_small_n_any_k",
        ],
    },
    // After tile_3xtf32.cu (its split and CTA rasterisation).
    KernelSource {
        path: "ops/gemm_f32/gemm_f32_wgmma.cu",
        text: include_str!("../ops/gemm_f32/gemm_f32_wgmma.cu"),
        entry_points: &["gemm_f32_tf32_split", "gemm_f32_3xtf32_wgmma", "gemm_f32_split_merge"],
    },
    KernelSource {
        path: "ops/conv3x3/conv3x3.cu",
        text: include_str!("../ops/conv3x3/conv3x3.cu"),
        entry_points: &[
            "conv3x3_3xtf32_vec16",
            "conv3x3_3xtf32_any_c",
            "conv3x3_3xtf32_split_vec16",
            "conv3x3_3xtf32_split_any_c",
            "conv3x3_split_merge",
        ],
    },
    KernelSource {
        path: "ops/conv3x3/conv3x3_direct.cu",
        text: include_str!("../ops/conv3x3/conv3x3_direct.cu"),
        entry_points: &[
            "conv3x3_direct_co4",
            "conv3x3_direct_co8",
        ],
    },
    KernelSource {
        path: "ops/silu/silu.cu",
        text: include_str!("../ops/silu/silu.cu"),
        entry_points: &[
            "silu_grid_stride",
        ],
    },
    // After silu.cu: the fused GroupNorm + SiLU uses its silu_stable.
    KernelSource {
        path: "ops/group_norm/group_norm.cu",
        text: include_str!("../ops/group_norm/group_norm.cu"),
        entry_points: &[
            "group_norm_partial_stats",
            "group_norm_normalize",
        ],
    },
    KernelSource {
        path: "ops/upsample_nearest2x/upsample_nearest2x.cu",
        text: include_str!("../ops/upsample_nearest2x/upsample_nearest2x.cu"),
        entry_points: &[
            "upsample_nearest2x_float2",
            "upsample_nearest2x_grid_stride",
        ],
    },
    KernelSource {
        path: "ops/im2col/im2col.cu",
        text: include_str!("../ops/im2col/im2col.cu"),
        entry_points: &[
            "im2col_3x3_grid_stride",
        ],
    },
    // Qwen3.5 (Bonsai 2): the Hadamard activation transform, the Gated DeltaNet's conv,
    // recurrence and output norm, the attention output gate.
    KernelSource {
        path: "ops/hadamard/hadamard.cu",
        text: include_str!("../ops/hadamard/hadamard.cu"),
        entry_points: &["hadamard_block_in_smem", "hadamard_blocks_in_warps", "hadamard_rotate_planes",
            "hadamard_rotate_planes_rows"],
    },
    KernelSource {
        path: "ops/hadamard/hadamard_f16.cu",
        text: include_str!("../ops/hadamard/hadamard_f16.cu"),
        entry_points: &["hadamard_rotate_f16_rows_q1", "hadamard_rotate_f16_rows_q2"],
    },
    KernelSource {
        path: "ops/ssm_conv/ssm_conv.cu",
        text: include_str!("../ops/ssm_conv/ssm_conv.cu"),
        entry_points: &["ssm_conv_channel_per_thread", "ssm_conv_state_from_rows", "ssm_conv_seqs"],
    },
    KernelSource {
        path: "ops/gated_delta/gated_delta.cu",
        text: include_str!("../ops/gated_delta/gated_delta.cu"),
        entry_points: &["gated_delta_rows", "gated_delta_seqs"],
    },
    KernelSource {
        path: "ops/gated_delta/gated_delta_chunked.cu",
        text: include_str!("../ops/gated_delta/gated_delta_chunked.cu"),
        entry_points: &["gated_delta_chunk_prepare", "gated_delta_chunk_state", "gated_delta_chunk_out"],
    },
    KernelSource {
        path: "ops/gated_rms_norm/gated_rms_norm.cu",
        text: include_str!("../ops/gated_rms_norm/gated_rms_norm.cu"),
        entry_points: &["gated_rms_norm_warp_per_head"],
    },
    KernelSource {
        path: "ops/sigmoid_gate/sigmoid_gate.cu",
        text: include_str!("../ops/sigmoid_gate/sigmoid_gate.cu"),
        entry_points: &["sigmoid_gate_grid_stride"],
    },
    KernelSource {
        path: "verify/bench.cu",
        text: include_str!("../verify/bench.cu"),
        entry_points: &[
            "bench_spin_cycles",
        ],
    },
];
