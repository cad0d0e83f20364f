use super::*;
use crate::synthetic::Geometry;

#[test]
fn kv_cache_of_bonsai_8b_is_layers_times_k_and_v_times_f16() {
    let config = Geometry::bonsai_8b().config();
    let plan = MemoryPlan::new(&config, 0, 4096, 1);
    // 36 layers x (K and V) x 8 kv heads x 128 dims x 4096 positions x 2 bytes.
    assert_eq!(plan.kv_cache_bytes, 36 * 2 * 8 * 128 * 4096 * 2);
    assert_eq!(plan.rope_bytes, 2 * 4096 * 64 * 4);
}

#[test]
fn activations_and_scratch_grow_with_batch_and_context() {
    let config = Geometry::bonsai_4b().config();
    let small = MemoryPlan::new(&config, 1000, 1024, 1);
    let wide = MemoryPlan::new(&config, 1000, 1024, PLANNED_MAX_BATCH);
    let long = MemoryPlan::new(&config, 1000, 8192, 1);
    assert!(wide.activation_bytes > small.activation_bytes && wide.scratch_bytes > small.scratch_bytes);
    assert!(long.kv_cache_bytes == 8 * small.kv_cache_bytes && long.scratch_bytes > small.scratch_bytes);
    // The logits rows dominate a wide state: at least max_batch x vocab f32.
    assert!(wide.activation_bytes >= PLANNED_MAX_BATCH * config.vocab * 4);
    assert_eq!(small.total_bytes(), 1000 + small.rope_bytes + small.kv_cache_bytes + small.activation_bytes + small.scratch_bytes);
}

#[test]
fn weights_bytes_count_every_matrix_and_norm() {
    let geometry = Geometry::tiny();
    let config = geometry.config();
    let host = crate::synthetic::random_host_weights(&geometry, crate::synthetic::WeightKind::OneBit, 7)
        .expect("tiny synthetic weights");
    let per_layer_norms = (2 * config.hidden + 2 * config.head_dim) * 4;
    let mut want = host.token_embd.len_bytes() + config.hidden * 4 + host.output.as_ref().map_or(0, |m| m.len_bytes());
    for l in &host.layers {
        want += l.qkv.len_bytes() + l.attn_output.len_bytes() + l.gate_up.len_bytes() + l.down.len_bytes() + per_layer_norms;
    }
    assert_eq!(weights_device_bytes(&host), want);
}

#[test]
fn a_plan_that_does_not_fit_names_need_and_free() {
    let config = Geometry::bonsai_8b().config();
    let plan = MemoryPlan::new(&config, 1_160_000_000, 65_536, PLANNED_MAX_BATCH);
    let need = plan.total_bytes() + SAFETY_MARGIN_BYTES;
    assert!(plan.check_fits("test gpu", need).is_ok());
    let err = plan.check_fits("test gpu", need - 1).expect_err("one byte short must fail").to_string();
    assert!(err.contains(&need.to_string()) && err.contains(&(need - 1).to_string()), "{err}");
    assert!(err.contains("test gpu") && err.contains("--ctx"), "{err}");
}
