//! The ops of a warm decode step on the CPU backend allocate nothing: their buffers live in the
//! state or in the pool threads' scratch. What is left is the step's bookkeeping (the plan key,
//! the list of sequences the step runs), a few allocations per token whatever the model's depth:
//! the test checks that a model of twice the layers allocates exactly as often per step. Its own
//! test binary, because the counting allocator sees every thread of the process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use bonsai_model::qwen3::HostWeights;
use bonsai_model::synthetic::{random_tensors, Geometry, WeightKind};
use bonsai_model::{CpuBackend, Qwen3};

/// The system allocator, counting allocations and reallocations.
struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations per warm greedy decode step of a random model with `n_layers` layers: the fewest
/// over several windows of steps. A pool thread's scratch grows the first time that thread runs
/// an op (and the pool's threads claim parts as they come free, so which thread runs which part
/// differs from step to step): a window may still hold such a first time, a later one does not.
fn allocations_per_step(n_layers: usize, kind: WeightKind) -> usize {
    // Wide enough that the GEMVs split into several parts on the CPU pool (16-column parts).
    let g = Geometry { n_layers, hidden: 256, ffn: 512, n_q_heads: 4, n_kv_heads: 2, head_dim: 64, vocab: 300, context_len: 128, tied_embeddings: false };
    let host = HostWeights::load(&g.config(), random_tensors(&g, kind, 7).unwrap()).unwrap();
    let model = Qwen3::new(CpuBackend, g.config(), host, g.context_len).unwrap();
    let mut state = model.new_state(8, false).unwrap();
    model.prefill(&mut state, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    // Warm: the first steps size each pool thread's scratch.
    for _ in 0..4 {
        model.decode_greedy(&mut state).unwrap();
    }
    const STEPS: usize = 8;
    const WINDOWS: usize = 6;
    let mut fewest = usize::MAX;
    for _ in 0..WINDOWS {
        let before = ALLOCATIONS.load(Relaxed);
        for _ in 0..STEPS {
            model.decode_greedy(&mut state).unwrap();
        }
        fewest = fewest.min(ALLOCATIONS.load(Relaxed) - before);
    }
    assert_eq!(fewest % STEPS, 0, "{kind:?}, {n_layers} layers: {fewest} allocations in {STEPS} steps vary by step");
    fewest / STEPS
}

#[test]
fn warm_cpu_decode_ops_allocate_nothing() {
    for kind in [WeightKind::OneBit, WeightKind::Ternary] {
        let (two, four) = (allocations_per_step(2, kind), allocations_per_step(4, kind));
        println!("{kind:?}: {two} allocations per decode step (2 layers), {four} (4 layers)");
        assert_eq!(two, four, "{kind:?}: the ops of a decode step allocate ({two} per step at 2 layers, {four} at 4)");
        assert!(two <= 8, "{kind:?}: {two} allocations per decode step");
    }
}
