//! The decode timeline (`BONSAI_TRACE=1`): where a replayed decode graph spends its time, on the
//! GPU's own clock.
//!
//! With the variable set the kernel library is compiled with BONSAI_TRACE defined (at run time:
//! the embedded SASS never has the hooks, so production kernels pay nothing), and every kernel's
//! thread 0 of CTA 0 appends two events while the device flag is on (ptx.cuh: `trace_record`):
//! STARTED when it calls griddep_launch_dependents (the GEMVs do so first thing,
//! so it is the kernel's start) and RELEASED when its griddep_wait returns, i.e. when the previous
//! kernel has completed and its memory is visible. A kernel's RELEASED comes after the previous
//! kernel's (it waits for that kernel to complete), so the RELEASED events are in launch order, and
//! the gap from one to the next is the time the graph's critical path spends in that kernel after
//! its wait (its own work plus the completion and release latency). The kernel names come from
//! the launches recorded during capture ([`record_launches`]). Kernels with phase marks record
//! when CTA 0's thread 0 reaches each (kept in registers, appended at the kernel's end): the
//! binary GEMV's TC_MARK 1-5 (released, planes staged, loop done, partials met, stored), the
//! prepare's 5 (its groups stored), the decode attention's 1 and 3-6 (released, warp 0's keys
//! done, partials met, outputs stored, planes stored). A mark belongs to the launch of its
//! geometry released last before it.

use crate::launch::Gpu;
use std::collections::HashMap;
use std::fmt::Write as _;

use cudarc::driver::{DriverError, LaunchConfig};


/// Events the device buffer holds (TRACE_CAPACITY in ptx.cuh; these constants are checked
/// against it by a test).
const CAPACITY: usize = 65536;
const STARTED: u64 = 1;
const RELEASED: u64 = 2;
const CTA_END: u64 = 3;
/// TRACE_MARK_BASE / TRACE_MARK_SLOTS: phase i of a kernel is event kind MARK + i, i < MARKS.
const MARK: u64 = 16;
const MARKS: u64 = 16;

/// Most consecutive replays one trace covers.
pub const MAX_REPLAYS: usize = crate::config::MAX_TRACE_REPLAYS;

mod replays;
pub use replays::report_replays;

/// One launch as recorded: the kernel's name and geometry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchRecord {
    pub name: String,
    pub grid: (u32, u32),
    pub block: u32,
}

/// The record of one launch of the entry point `name`.
pub(crate) fn launch_record(name: &str, cfg: &LaunchConfig) -> LaunchRecord {
    LaunchRecord { name: name.to_string(), grid: (cfg.grid_dim.0, cfg.grid_dim.1), block: cfg.block_dim.0 }
}

/// What a device event records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Started,
    Released,
    /// CTA 0 reached the kernel's phase mark i.
    Mark(u8),
    /// A CTA (`cta`, on SM `sm`) ended (`BONSAI_TRACE=cta`).
    CtaEnd { cta: u16, sm: u8 },
}

/// One device event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub ns: u64,
    pub kind: EventKind,
    pub grid: (u32, u32),
    pub block: u32,
}

fn decode_event(ns: u64, word: u64) -> Option<Event> {
    if word & 0xFF == CTA_END {
        // event | CTA (row by row) << 8 | smid << 20 | gridDim.x << 28 | blockDim.x << 40 (ptx.cuh).
        let kind = EventKind::CtaEnd { cta: ((word >> 8) & 0xFFF) as u16, sm: ((word >> 20) & 0xFF) as u8 };
        let grid = (((word >> 28) & 0xFFF) as u32, 1);
        return Some(Event { ns, kind, grid, block: ((word >> 40) & 0x7FF) as u32 });
    }
    let kind = match word & 0xFF {
        STARTED => EventKind::Started,
        RELEASED => EventKind::Released,
        k if (MARK..MARK + MARKS).contains(&k) => EventKind::Mark((k - MARK) as u8),
        _ => return None,
    };
    let block = ((word >> 8) & 0xFFF) as u32;
    let grid = (((word >> 20) & 0xFF_FFFF) as u32, ((word >> 44) & 0xFFFFF) as u32);
    Some(Event { ns, kind, grid, block })
}

/// Empties the device buffer and turns the flag on (`on`) or off.
pub fn arm(gpu: Gpu<'_>, on: bool) -> Result<(), DriverError> {
    let module = gpu.lib.module();
    let mut len = module.get_global("bonsai_trace_len", gpu.stream)?;
    gpu.stream.memcpy_htod(&0u32.to_ne_bytes(), &mut len)?;
    let mut flag = module.get_global("bonsai_trace_on", gpu.stream)?;
    gpu.stream.memcpy_htod(&i32::from(on).to_ne_bytes(), &mut flag)?;
    Ok(())
}

/// The events recorded since [`arm`] (after the stream's work is done), in time order.
pub fn collect(gpu: Gpu<'_>) -> Result<Vec<Event>, DriverError> {
    let module = gpu.lib.module();
    let len = module.get_global("bonsai_trace_len", gpu.stream)?;
    let mut len_bytes = [0u8; 4];
    gpu.stream.memcpy_dtoh(&len, &mut len_bytes)?;
    let n = (u32::from_ne_bytes(len_bytes) as usize).min(CAPACITY);
    let buf = module.get_global("bonsai_trace", gpu.stream)?;
    let mut bytes = vec![0u8; CAPACITY * 16];
    gpu.stream.memcpy_dtoh(&buf, &mut bytes)?;
    gpu.stream.synchronize()?;
    let mut events: Vec<Event> = bytes[..n * 16]
        .chunks_exact(16)
        .filter_map(|c| {
            let ns = u64::from_ne_bytes(c[..8].try_into().expect("8 bytes"));
            let word = u64::from_ne_bytes(c[8..].try_into().expect("8 bytes"));
            decode_event(ns, word)
        })
        .collect();
    events.sort_by_key(|e| e.ns);
    Ok(events)
}

/// The timeline of one replay: per kernel (launch order) the time from its release to the next
/// one's, and how long before its release it had started (where it records STARTED); then the
/// same summed per kernel name, largest first.
pub fn report(launches: &[LaunchRecord], events: &[Event]) -> String {
    let released = released_events(events);
    let mut out = String::new();
    let n = released.len().min(launches.len());
    if released.len() != launches.len() {
        let _ = writeln!(
            out,
            "trace: {} RELEASED events for {} launches (the table pairs the first {n})",
            released.len(),
            launches.len()
        );
    }
    let mismatch = (0..n)
        .find(|&i| released[i].grid != launches[i].grid || released[i].block != launches[i].block);
    if let Some(i) = mismatch {
        let _ = writeln!(
            out,
            "trace: event {i}'s geometry differs from launch {i} ({}): pairing unreliable after it",
            launches[i].name
        );
    }
    // STARTED events: each to the first kernel, in launch order, of the same geometry that has
    // none yet and is released after it.
    let mut started: Vec<Option<u64>> = vec![None; n];
    for e in events.iter().filter(|e| e.kind == EventKind::Started) {
        if let Some(i) = (0..n).find(|&i| {
            started[i].is_none()
                && released[i].ns >= e.ns
                && launches[i].grid == e.grid
                && launches[i].block == e.block
        }) {
            started[i] = Some(e.ns);
        }
    }
    let _ = writeln!(
        out,
        "{:>4} {:<44} {:>11} {:>11} {:>12}",
        "#", "kernel", "grid x blk", "release->", "started ahead"
    );
    for i in 0..n {
        let gap =
            if i + 1 < n { Some((released[i + 1].ns - released[i].ns) as f64 / 1e3) } else { None };
        let ahead = started[i].map(|s| (released[i].ns - s) as f64 / 1e3);
        let name = &launches[i].name;
        let _ = writeln!(
            out,
            "{i:>4} {:<44} {:>11} {:>11} {:>12}",
            truncate(name, 44),
            format!("{}x{}", launches[i].grid.0, launches[i].block),
            gap.map_or("-".into(), |g| format!("{g:.2} us")),
            ahead.map_or("-".into(), |a| format!("{a:.2} us")),
        );
    }
    let mut phases = Vec::new();
    add_phase_rows(&mut phases, launches, &released[..n], events);
    let _ = write!(out, "{}", phase_text(&phases, "mean us after the kernel's release"));
    let _ = write!(out, "{}", cta_table(launches, &released[..n], events));
    let per_name = per_kernel(launches, &released[..n]);
    let total: f64 = per_name.iter().map(|p| p.2).sum();
    let _ =
        writeln!(out, "\nper kernel (release to next release), one replay, {total:.1} us in all:");
    for (name, count, sum) in &per_name {
        let _ = writeln!(
            out,
            "  {:<44} {count:>4} x {:>8.2} us = {sum:>8.1} us ({:.1}%)",
            truncate(name, 44),
            sum / *count as f64,
            100.0 * sum / total
        );
    }
    out
}

/// The RELEASED events of one replay, in order.
pub(crate) fn released_events(events: &[Event]) -> Vec<&Event> {
    events.iter().filter(|e| e.kind == EventKind::Released).collect()
}

/// Per kernel name (launches paired with `released` in order): launches with a next release, and
/// the sum of their release-to-next times in us; largest sum first.
pub(crate) fn per_kernel(launches: &[LaunchRecord], released: &[&Event]) -> Vec<(String, usize, f64)> {
    let n = released.len().min(launches.len());
    let mut per_name: Vec<(String, usize, f64)> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for i in 0..n.saturating_sub(1) {
        let name = launches[i].name.as_str();
        let slot = *index.entry(name).or_insert_with(|| {
            per_name.push((name.to_string(), 0, 0.0));
            per_name.len() - 1
        });
        per_name[slot].1 += 1;
        per_name[slot].2 += (released[i + 1].ns - released[i].ns) as f64 / 1e3;
    }
    per_name.sort_by(|a, b| b.2.total_cmp(&a.2));
    per_name
}

/// A kernel name's phase marks summed over launches: (name, launches, sum of next-release offsets,
/// per mark (count, sum of offsets)).
pub(crate) type PhaseRow = (String, usize, f64, Vec<(usize, f64)>);

/// Adds each launch's phase marks of CTA 0 (offsets from its release) and next release to `rows`.
pub(crate) fn add_phase_rows(rows: &mut Vec<PhaseRow>, launches: &[LaunchRecord], released: &[&Event], events: &[Event]) {
    let n = released.len().min(launches.len());
    for i in 0..n.saturating_sub(1) {
        let (start, end) = (released[i].ns, released[i + 1].ns);
        let marks: Vec<(u8, f64)> = events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::Mark(m)
                    if e.ns >= start && e.ns < end && e.grid == launches[i].grid && e.block == launches[i].block =>
                {
                    Some((m, (e.ns - start) as f64 / 1e3))
                }
                _ => None,
            })
            .collect();
        if marks.is_empty() {
            continue;
        }
        let name = &launches[i].name;
        let row = match rows.iter().position(|r| &r.0 == name) {
            Some(r) => r,
            None => {
                rows.push((name.clone(), 0, 0.0, vec![(0, 0.0); MARKS as usize]));
                rows.len() - 1
            }
        };
        rows[row].1 += 1;
        rows[row].2 += (end - start) as f64 / 1e3;
        for (m, t) in marks {
            let slot = &mut rows[row].3[m as usize];
            slot.0 += 1;
            slot.1 += t;
        }
    }
}

/// Per kernel name with phase marks: the mean time from its release to each mark of CTA 0 and to
/// the next kernel's release.
pub(crate) fn phase_text(rows: &[PhaseRow], what: &str) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut out = format!("\nphase marks of CTA 0, {what} (mark: time), then the next release:\n");
    for (name, count, next, marks) in rows {
        let _ = write!(out, "  {:<44} {count:>4} x", truncate(name, 44));
        for (m, (c, sum)) in marks.iter().enumerate() {
            if *c > 0 {
                let _ = write!(out, "  {m}: {:.2}", sum / *c as f64);
            }
        }
        let _ = writeln!(out, "  | next {:.2}", next / *count as f64);
    }
    out
}

/// Per kernel name with CTA ends (`BONSAI_TRACE=cta`): mean us after the release of CTA 0's end,
/// the median CTA's, the last CTA's and the next release; then the CTAs and SMs most often among
/// the last eighth to end (count over the launches).
fn cta_table(launches: &[LaunchRecord], released: &[&Event], events: &[Event]) -> String {
    struct Row {
        name: String,
        launches: usize,
        sums: [f64; 4],
        late_ctas: HashMap<u16, usize>,
        late_sms: HashMap<u16, usize>,
    }
    let mut rows: Vec<Row> = Vec::new();
    for i in 0..released.len().saturating_sub(1) {
        let (start, end) = (released[i].ns, released[i + 1].ns);
        let mut ends: Vec<(u64, u16, u8)> = events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::CtaEnd { cta, sm }
                    if e.ns >= start && e.ns < end && e.grid.0 == launches[i].grid.0 && e.block == launches[i].block =>
                {
                    Some((e.ns - start, cta, sm))
                }
                _ => None,
            })
            .collect();
        if ends.len() < launches[i].grid.0 as usize {
            continue; // not every CTA recorded (or not a recording kernel)
        }
        ends.sort_unstable();
        let first_cta = ends.iter().find(|e| e.1 == 0).map_or(0, |e| e.0);
        let row = match rows.iter().position(|r| r.name == launches[i].name) {
            Some(r) => r,
            None => {
                rows.push(Row {
                    name: launches[i].name.clone(),
                    launches: 0,
                    sums: [0.0; 4],
                    late_ctas: HashMap::new(),
                    late_sms: HashMap::new(),
                });
                rows.len() - 1
            }
        };
        let r = &mut rows[row];
        r.launches += 1;
        let us = |ns: u64| ns as f64 / 1e3;
        r.sums[0] += us(first_cta);
        r.sums[1] += us(ends[ends.len() / 2].0);
        r.sums[2] += us(ends[ends.len() - 1].0);
        r.sums[3] += us(end - start);
        for &(_, cta, sm) in &ends[ends.len() - ends.len().div_ceil(8)..] {
            *r.late_ctas.entry(cta).or_default() += 1;
            *r.late_sms.entry(u16::from(sm)).or_default() += 1;
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    let top = |m: &HashMap<u16, usize>| {
        let mut v: Vec<(u16, usize)> = m.iter().map(|(&k, &c)| (k, c)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.iter().take(8).map(|(k, c)| format!("{k}:{c}")).collect::<Vec<_>>().join(" ")
    };
    let mut out = String::from(
        "\nCTA ends, mean us after the release: CTA 0 / median CTA / last CTA / next release; then the CTAs and SMs most often in the last eighth (id:count):\n",
    );
    for r in &rows {
        let n = r.launches as f64;
        let _ = writeln!(
            out,
            "  {:<44} {:>4} x  {:.2} / {:.2} / {:.2} / {:.2}\n      late CTAs {}\n      late SMs  {}",
            truncate(&r.name, 44),
            r.launches,
            r.sums[0] / n,
            r.sums[1] / n,
            r.sums[2] / n,
            r.sums[3] / n,
            top(&r.late_ctas),
            top(&r.late_sms)
        );
    }
    out
}

fn truncate(s: &str, n: usize) -> &str {
    s.get(..n).unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(name: &str, grid: u32, block: u32) -> LaunchRecord {
        LaunchRecord { name: name.into(), grid: (grid, 1), block }
    }
    fn event(ns: u64, released: bool, grid: u32, block: u32) -> Event {
        let kind = if released { EventKind::Released } else { EventKind::Started };
        Event { ns, kind, grid: (grid, 1), block }
    }

    #[test]
    fn event_layout_matches_ptx_cuh() {
        use crate::launch::tests::cu_define;
        let ptx = "cuda/ptx.cuh";
        assert_eq!(cu_define(ptx, "TRACE_CAPACITY"), CAPACITY);
        assert_eq!(cu_define(ptx, "TRACE_STARTED") as u64, STARTED);
        assert_eq!(cu_define(ptx, "TRACE_RELEASED") as u64, RELEASED);
        assert_eq!(cu_define(ptx, "TRACE_MARK_BASE") as u64, MARK);
        assert_eq!(cu_define(ptx, "TRACE_MARK_SLOTS") as u64, MARKS);
        assert_eq!(cu_define(ptx, "TRACE_CTA_END") as u64, CTA_END);
    }

    #[test]
    fn events_decode_as_the_device_packs_them() {
        let word = RELEASED | (512 << 8) | (128 << 20) | (1 << 44);
        assert_eq!(decode_event(7, word), Some(event(7, true, 128, 512)));
        assert_eq!(decode_event(7, 0), None);
        let mark = (MARK + 3) | (384 << 8) | (128 << 20) | (1 << 44);
        assert_eq!(decode_event(9, mark).map(|e| e.kind), Some(EventKind::Mark(3)));
        assert_eq!(decode_event(9, MARK + MARKS), None);
    }

    #[test]
    fn phase_marks_belong_to_the_launch_released_before_them() {
        let launches = [launch("gemv_a", 128, 512), launch("prep", 4, 256), launch("gemv_a", 128, 512)];
        let mark = |ns: u64, m: u8| Event { ns, kind: EventKind::Mark(m), grid: (128, 1), block: 512 };
        let events = [
            event(0, true, 128, 512),
            mark(1_000, 2),
            mark(3_000, 5),
            event(4_000, true, 4, 256),
            event(6_000, true, 128, 512),
            mark(6_500, 2),
        ];
        let text = report(&launches, &events);
        // Only the first gemv_a has a next release; its marks at 1.00 and 3.00 us, next at 4.00.
        assert!(text.contains("2: 1.00  5: 3.00  | next 4.00"), "{text}");
        assert!(text.contains("gemv_a") && text.contains("   1 x"), "{text}");
    }

    #[test]
    fn cta_ends_decode_and_rank_per_launch() {
        let word = CTA_END | (5 << 8) | (77 << 20) | (4 << 28) | (512 << 40);
        let e = decode_event(3, word).expect("a CTA end");
        assert_eq!((e.kind, e.grid.0, e.block), (EventKind::CtaEnd { cta: 5, sm: 77 }, 4, 512));
        // A 4-CTA launch released at 0 (next release 10 us): CTA 0 ends at 2, the others at 3, 4
        // and 8 us (CTA 3 on SM 9 last); the median of four is the third, 4 us.
        let launches = [launch("gemv_a", 4, 512), launch("prep", 4, 256)];
        let end = |ns: u64, cta: u16, sm: u8| Event { ns, kind: EventKind::CtaEnd { cta, sm }, grid: (4, 1), block: 512 };
        let events = [
            event(0, true, 4, 512),
            end(2_000, 0, 1),
            end(3_000, 1, 2),
            end(4_000, 2, 3),
            end(8_000, 3, 9),
            event(10_000, true, 4, 256),
        ];
        let text = report(&launches, &events);
        assert!(text.contains("1 x  2.00 / 4.00 / 8.00 / 10.00"), "{text}");
        assert!(text.contains("late CTAs 3:1") && text.contains("late SMs  9:1"), "{text}");
    }

    #[test]
    fn the_report_pairs_releases_in_order_and_starts_by_geometry() {
        let launches =
            [launch("gemv_a", 128, 512), launch("attention", 64, 128), launch("gemv_a", 128, 512)];
        let events = [
            event(0, true, 128, 512),
            event(1_000, false, 128, 512), // the third launch starting early
            event(5_000, true, 64, 128),
            event(7_500, true, 128, 512),
        ];
        let text = report(&launches, &events);
        assert!(text.contains("5.00 us") && text.contains("2.50 us"), "{text}");
        // The third kernel started 6.5 us before its release.
        assert!(text.contains("6.50 us"), "{text}");
        assert!(text.contains("gemv_a") && text.contains("7.5 us in all"), "{text}");
    }
}
