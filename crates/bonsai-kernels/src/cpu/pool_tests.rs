//! The pool covers every item exactly once, splits as documented, and turns panics into errors.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

use super::{Pool, Split, Waiting};

/// Runs one dispatch and returns how often each item was visited and the parts' ranges.
fn visit(pool: &Pool, n_items: usize, split: Split) -> (Vec<u32>, Vec<std::ops::Range<usize>>) {
    let counts: Vec<AtomicU32> = (0..n_items).map(|_| AtomicU32::new(0)).collect();
    let ranges = Mutex::new(Vec::new());
    pool.try_for_each_part(n_items, split, &|range| {
        for i in range.clone() {
            counts[i].fetch_add(1, Relaxed);
        }
        ranges.lock().unwrap().push(range);
    })
    .expect("no part panics");
    let mut ranges = ranges.into_inner().unwrap();
    ranges.sort_by_key(|r| r.start);
    (counts.into_iter().map(AtomicU32::into_inner).collect(), ranges)
}

#[test]
fn every_item_is_visited_exactly_once() {
    for (threads, waiting) in [1, 2, 3, 5, 8, 16].into_iter().flat_map(|t| [(t, Waiting::SpinThenPark), (t, Waiting::Park)]) {
        let pool = Pool::with_waiting(threads, waiting).expect("spawn");
        assert_eq!(pool.threads(), threads);
        for n_items in [0, 1, 2, 7, 8, 9, 63, 64, 65, 100, 1000, 2048, 4099, 151_936] {
            for (align, min_items, per_thread) in [(1, 1, 1), (8, 1, 1), (4, 64, 1), (8, 64, 1), (64, 1, 1), (16, 1 << 14, 1), (1, 1, 4), (8, 2, 3)] {
                let split = Split::new(align, min_items).parts_per_thread(per_thread);
                let (counts, ranges) = visit(&pool, n_items, split);
                assert!(
                    counts.iter().all(|&c| c == 1),
                    "{threads} threads, {n_items} items, align {align}: counts {:?}",
                    counts.iter().enumerate().filter(|(_, &c)| c != 1).take(5).collect::<Vec<_>>()
                );
                if n_items == 0 {
                    assert!(ranges.is_empty());
                    continue;
                }
                let parts = ranges.len();
                // Contiguous, aligned boundaries, balanced to within one aligned unit.
                for pair in ranges.windows(2) {
                    assert_eq!(pair[0].end, pair[1].start);
                    assert_eq!(pair[0].end % align, 0, "boundary off the {align}-item tile");
                }
                let units: Vec<usize> = ranges.iter().map(|r| r.len().div_ceil(align)).collect();
                let (lo, hi) = (units.iter().min().unwrap(), units.iter().max().unwrap());
                assert!(hi - lo <= 1, "{threads} threads, {n_items} items: unbalanced units {units:?}");
                // As many parts as the thread count, the units and the minimum allow.
                let want_parts = (threads * per_thread).min(n_items.div_ceil(align)).min(n_items / min_items).max(1);
                assert_eq!(parts, want_parts, "{threads} threads, {n_items} items, align {align}, min {min_items}");
            }
        }
    }
}

#[test]
fn a_panicking_part_is_an_error_and_the_pool_keeps_working() {
    let pool = Pool::with_waiting(4, Waiting::SpinThenPark).expect("spawn");
    // Part 0 runs on the caller, the others on workers: panic in each in turn.
    for panicking_part in 0..4 {
        let err = pool
            .try_for_each_part(400, Split::new(1, 1), &|range| {
                if range.start == panicking_part * 100 {
                    panic!("part {panicking_part} failed on purpose");
                }
            })
            .expect_err("a part panicked");
        assert_eq!(err.message, format!("part {panicking_part} failed on purpose"));
        let (counts, _) = visit(&pool, 400, Split::new(1, 1));
        assert!(counts.iter().all(|&c| c == 1), "the next dispatch after a panic covers every item");
    }
    // Every part panicking still returns (one message).
    let err = pool.try_for_each_part(400, Split::new(1, 1), &|_| panic!("all parts")).expect_err("all panicked");
    assert_eq!(err.message, "all parts");
    // The single-part (inline) path reports a panic the same way.
    let err = pool.try_for_each_part(1, Split::new(1, 1), &|_| panic!("inline")).expect_err("inline panicked");
    assert_eq!(err.message, "inline");
}

#[test]
fn nested_and_concurrent_dispatches_complete() {
    let pool = Pool::new(3).expect("spawn");
    let total = AtomicUsize::new(0);
    // A part that dispatches again runs the inner loop on its own thread.
    pool.try_for_each_part(30, Split::new(1, 1), &|outer| {
        for _ in outer {
            pool.try_for_each_part(10, Split::new(1, 1), &|inner| {
                total.fetch_add(inner.len(), Relaxed);
            })
            .expect("inner dispatch");
        }
    })
    .expect("outer dispatch");
    assert_eq!(total.load(Relaxed), 300);
    // Several threads dispatching at once take turns.
    let total = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..200 {
                    pool.try_for_each_part(1000, Split::new(8, 1), &|r| {
                        total.fetch_add(r.len(), Relaxed);
                    })
                    .expect("dispatch");
                }
            });
        }
    });
    assert_eq!(total.load(Relaxed), 4 * 200 * 1000);
}

#[test]
fn workers_that_parked_wake_for_the_next_dispatch() {
    let pool = Pool::with_waiting(3, Waiting::SpinThenPark).expect("spawn");
    for _ in 0..3 {
        // Longer than the spin and yield windows: the workers are parked by now.
        std::thread::sleep(super::SPIN + super::YIELD + std::time::Duration::from_millis(20));
        let (counts, ranges) = visit(&pool, 300, Split::new(1, 1));
        assert!(counts.iter().all(|&c| c == 1));
        assert_eq!(ranges.len(), 3);
    }
}
