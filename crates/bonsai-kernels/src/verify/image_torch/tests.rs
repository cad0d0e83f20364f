//! CPU-side tests of the image-compare registry and manifest (the GPU half runs on the H200).

use super::manifest::{name_hash, write_case, write_f32};
use super::*;

fn tmp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bonsai-image-torch-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn registry_names_are_unique_and_shapes_consistent() {
    let all = cases();
    let mut names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), all.len(), "duplicate case names");
    for case in &all {
        assert!(case.name.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_'), "{} is not file-name safe", case.name);
        assert!(case.name.starts_with(case.op.key()), "{} does not start with its op {}", case.name, case.op.key());
        assert!(case.bytes > 0.0 || case.flops > 0.0, "{}: no work", case.name);
        let x = &case.inputs[0].shape;
        let expected_out: Vec<usize> = match case.op {
            TorchOp::GroupNorm { groups, .. } | TorchOp::GroupNormSilu { groups, .. } => {
                assert_eq!(x[0] % groups, 0, "{}", case.name);
                assert_eq!(case.inputs[1].shape, vec![x[0]]);
                x.clone()
            }
            TorchOp::Silu => x.clone(),
            TorchOp::UpsampleNearest2x => vec![x[0], 2 * x[1], 2 * x[2]],
            TorchOp::Im2col => vec![9 * x[0], x[1] * x[2]],
            _ => case.output_shape.clone(),
        };
        assert_eq!(case.output_shape, expected_out, "{}", case.name);
    }
    // The four ops this branch launches are all registered, at the decoder's largest activation.
    for op in ["group_norm", "group_norm_silu", "silu", "upsample_nearest2x", "im2col", "gemm_f32", "conv3x3", "joint_attention"] {
        assert!(all.iter().any(|c| c.op.key() == op), "{op} has no case");
    }
    assert!(all.iter().any(|c| c.name == "group_norm_c384_512x512"));
}

#[test]
fn builders_for_other_ops_hold_the_issue_shapes() {
    fn never(_: Gpu<'_>, _: &ImageCase, _: &[CudaSlice<f32>], _: &mut CudaSlice<f32>) -> Result<(), LaunchError> {
        unreachable!("only the case descriptions are tested")
    }
    let gemm = gemm_f32_cases(never);
    assert_eq!(gemm.len(), 8);
    assert!(gemm.iter().any(|c| c.name == "gemm_f32_m4608_n27648_k3072" && c.flops == 2.0 * 4608.0 * 27648.0 * 3072.0));
    let conv = conv3x3_cases(never);
    assert!(conv.iter().all(|c| c.inputs[1].shape[1] == c.inputs[0].shape[0] && c.inputs[1].shape[2..] == [3, 3]));
    let attn = joint_attention_cases(OurKernel::F32(never));
    assert!(attn.iter().any(|c| c.output_shape == vec![4608, 24 * 128]));
}

#[test]
fn case_selection_by_name_or_op() {
    let all = cases();
    let by_op: Vec<_> = all.iter().filter(|c| c.selected_by(&["silu".into()])).collect();
    assert!(!by_op.is_empty() && by_op.iter().all(|c| c.op == TorchOp::Silu));
    let one: Vec<_> = all.iter().filter(|c| c.selected_by(&["im2col_c384_64x64".into()])).collect();
    assert_eq!(one.len(), 1);
    assert_eq!(all.iter().filter(|c| c.selected_by(&[])).count(), all.len());
    assert_eq!(all.iter().filter(|c| c.selected_by(&["nothing".into()])).count(), 0);
}

#[test]
fn rotation_exceeds_the_l2_budget() {
    for bytes in [1u64, 1 << 20, 100 << 20, 4 << 30] {
        let copies = rotation_copies(bytes);
        assert!(copies >= 2, "{bytes}: {copies}");
        assert!(copies as u64 * bytes > super::ROTATION_BYTES as u64, "{bytes}: {copies}");
    }
}

#[test]
fn drawn_inputs_are_seeded_and_ternary_files_hold_the_dense_weights() {
    let mut case = cases().into_iter().find(|c| c.op == TorchOp::Silu).expect("a silu case");
    case.inputs = vec![
        InputSpec { name: "a", shape: vec![3, 5], fill: Fill::Uniform { lo: -1.0, hi: 1.0 } },
        InputSpec { name: "w", shape: vec![2, 256], fill: Fill::TernaryWeights },
    ];
    let seed = 7;
    let a = draw_inputs(&mut SplitMix64::new(seed), &case);
    let b = draw_inputs(&mut SplitMix64::new(seed), &case);
    assert_eq!(a[0].data, b[0].data, "seed {seed}");
    assert!(a[0].data.iter().all(|v| (-1.0..1.0).contains(v)) && a[0].data.iter().any(|&v| v != 0.0));
    let Some(QMatrix::Q2(q)) = &a[1].quantized else { panic!("ternary input without its blocks") };
    assert_eq!(a[1].data.len(), 512);
    for (i, &v) in a[1].data.iter().enumerate() {
        assert_eq!(v, q.weight(i / 256, i % 256), "element {i}");
    }
    assert_ne!(name_hash("silu_c96_64x64"), name_hash("silu_c96_64x65"));
}

#[test]
fn files_are_little_endian_f32_and_the_manifest_lists_them() {
    let dir = tmp_dir("manifest");
    let case = cases().into_iter().find(|c| c.op.key() == "group_norm").expect("a group_norm case");
    let mut rng = SplitMix64::new(11);
    let mut small = case.clone();
    small.inputs[0].shape = vec![32, 3, 5];
    small.inputs[1].shape = vec![32];
    small.inputs[2].shape = vec![32];
    small.output_shape = vec![32, 3, 5];
    let host = draw_inputs(&mut rng, &small);
    let ours: Vec<f32> = (0..small.output_len()).map(|i| i as f32 * 0.5 - 3.0).collect();
    let rec = write_case(&dir, &small, &host, Some(&ours), Some(1.5e-6), 3, None).expect("write");
    let mut manifest = Manifest::new(11, "test device".into(), 4.2e12);
    manifest.cases.push(rec);
    let failed = write_case(&dir, &small, &host, None, None, 0, Some("group_norm: bad".into())).expect("write");
    manifest.cases.push(failed);
    manifest.write(&dir).expect("manifest");

    let text = std::fs::read_to_string(dir.join(MANIFEST_FILE)).expect("read");
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(json["format"], MANIFEST_FORMAT);
    let c0 = &json["cases"][0];
    assert_eq!(c0["op"], "group_norm");
    assert_eq!(c0["params"]["groups"], 32);
    assert_eq!(c0["inputs"][0]["shape"], serde_json::json!([32, 3, 5]));
    assert_eq!(c0["speed_target"]["kind"], "fraction_of_copy");
    assert_eq!(c0["ours_median_s"], 1.5e-6);
    let out_file = c0["output"]["file"].as_str().expect("output file");
    let bytes = std::fs::read(dir.join(out_file)).expect("output");
    let back: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    assert_eq!(back, ours);
    let x_bytes = std::fs::read(dir.join(c0["inputs"][0]["file"].as_str().expect("x file"))).expect("x");
    assert_eq!(x_bytes.len(), 4 * 32 * 15);
    assert_eq!(c0["file_bytes"].as_u64(), Some((4 * (32 * 15 * 2 + 64)) as u64));
    let c1 = &json["cases"][1];
    assert!(c1["output"]["file"].is_null() && c1["ours_median_s"].is_null());
    assert_eq!(c1["error"], "group_norm: bad");
    assert!(!dir.join(format!("{MANIFEST_FILE}.tmp")).exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn write_f32_streams_more_than_one_chunk() {
    let dir = tmp_dir("chunks");
    let data: Vec<f32> = (0..200_003).map(|i| (i as f32).sin()).collect();
    let path = dir.join("x.f32");
    write_f32(&path, &data).expect("write");
    let bytes = std::fs::read(&path).expect("read");
    assert_eq!(bytes.len(), 4 * data.len());
    assert_eq!(&bytes[4 * 200_002..], &data[200_002].to_le_bytes());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compare_without_a_driver_is_an_error_not_a_panic() {
    // SAFETY: only probes whether libcuda can be opened.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        return; // a GPU machine: image-compare itself covers it
    }
    let opts = CompareOptions { dump: tmp_dir("nodriver"), cases: vec![], max_case_bytes: u64::MAX, seed: Some(1), config: crate::Config::default() };
    let err = run(&opts).expect_err("no driver here");
    assert!(err.to_string().contains("no CUDA driver"), "{err}");
}
