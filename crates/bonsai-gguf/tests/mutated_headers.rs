//! Property: any mutation of a valid file's header (byte flips, hostile u64 counts/lengths/
//! offsets, truncation) gives Ok or a typed error, within bounded time and memory.

mod common;

use bonsai_gguf::{GgufFile, TensorType};
use common::{tiny_qwen3, to_bytes, Rng};
use proptest::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts live heap bytes and their peak, so the test can bound what parsing allocates.
struct CountingAlloc;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: ptr came from alloc with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Parsed metadata costs a bounded multiple of its encoded size: the worst case is an array of
/// 1-byte values, each becoming a 32-byte `MetaValue` (plus Vec growth doubling), so 128x the
/// input plus a constant for the hash maps covers it.
const ALLOC_FACTOR: usize = 128;
const ALLOC_SLACK: usize = 1 << 20;
/// Parsing a few-KB file takes microseconds; a second means a runaway loop.
const MAX_PARSE_SECS: f64 = 1.0;

#[derive(Debug, Clone)]
enum Mutation {
    SetByte(usize, u8),
    /// Overwrite 8 bytes with a hostile u64 (count, length, dimension or offset).
    SetU64(usize, u64),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let hostile = prop_oneof![
        Just(0u64),
        Just(1u64),
        Just(u64::MAX),
        Just(u64::MAX / 2),
        Just(1u64 << 32),
        Just(1u64 << 40),
        any::<u64>(),
        0u64..256,
    ];
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Mutation::SetByte(p, b)),
        (any::<usize>(), hostile).prop_map(|(p, v)| Mutation::SetU64(p, v)),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(mut bytes: Vec<u8>, header_len: usize, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        match *m {
            Mutation::SetByte(p, b) => {
                let at = p % header_len.min(bytes.len()).max(1);
                if at < bytes.len() {
                    bytes[at] = b;
                }
            }
            Mutation::SetU64(p, v) => {
                let at = p % header_len.min(bytes.len()).max(1);
                for (i, b) in v.to_le_bytes().into_iter().enumerate() {
                    if let Some(slot) = bytes.get_mut(at + i) {
                        *slot = b;
                    }
                }
            }
            Mutation::Truncate(p) => bytes.truncate(p % (bytes.len() + 1)),
        }
    }
    bytes
}

fn check(bytes: Vec<u8>) -> Result<(), TestCaseError> {
    let len = bytes.len();
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let start = std::time::Instant::now();
    let result = GgufFile::from_bytes(bytes);
    let secs = start.elapsed().as_secs_f64();
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    prop_assert!(secs < MAX_PARSE_SECS, "parse took {secs} s");
    prop_assert!(
        peak <= ALLOC_FACTOR * len + ALLOC_SLACK,
        "parse allocated {peak} B for a {len} B file"
    );
    if let Err(e) = &result {
        prop_assert!(!e.to_string().contains('\n'), "multi-line error: {e}");
    } else if let Ok(file) = &result {
        for t in file.tensors() {
            let view = file.tensor(&t.name).expect("listed tensor has a view");
            prop_assert!(view.dequantize_to_vec().is_ok(), "{} does not dequantize", t.name);
        }
    }
    Ok(())
}

/// The two base files (1-bit untied, ternary tied) and their header lengths, built once.
fn bases() -> &'static [(Vec<u8>, usize); 2] {
    static BASES: std::sync::OnceLock<[(Vec<u8>, usize); 2]> = std::sync::OnceLock::new();
    BASES.get_or_init(|| {
        // Fixed seed: proptest's shrinking needs the base files to be reproducible.
        let mut rng = Rng(0x5EED_0000_0000_0001);
        let mut build = |ty, tied| {
            let bytes = to_bytes(&tiny_qwen3(&mut rng, ty, tied));
            let header_len =
                GgufFile::from_bytes(bytes.clone()).expect("base parses").data_offset() as usize;
            (bytes, header_len)
        };
        [
            build(TensorType::Q1_0, false),
            build(TensorType::TwoBit(bonsai_gguf::TwoBitLayout::Tq2G128ScaleLast), true),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn mutated_headers_never_panic(muts in prop::collection::vec(mutation(), 1..6), which in 0usize..2) {
        let (base, header_len) = &bases()[which];
        check(apply(base.clone(), *header_len, &muts))?;
    }
}
