//! The decode timeline over several replays (`BONSAI_TRACE_REPLAYS`): one replay's timeline moves
//! by a few tenths of a microsecond per kernel from run to run, as large as the differences a
//! variant is traced for, so comparisons want each kernel's spread over replays.

use std::fmt::Write as _;

use super::{add_phase_rows, per_kernel, phase_text, released_events, report, truncate, Event, LaunchRecord};

/// The first replay's full [`report`]; with more replays, per kernel name the median and range
/// over the replays of its mean release-to-next time, the whole replay's likewise, and the phase
/// marks' means over all of them.
pub fn report_replays(launches: &[LaunchRecord], replays: &[Vec<Event>]) -> String {
    let Some(first) = replays.first() else { return String::new() };
    let mut out = report(launches, first);
    if replays.len() < 2 {
        return out;
    }
    let mut per_name: Vec<(String, Vec<f64>)> = Vec::new();
    let mut totals = Vec::with_capacity(replays.len());
    let mut phases = Vec::new();
    for events in replays {
        let released = released_events(events);
        let kernels = per_kernel(launches, &released);
        totals.push(kernels.iter().map(|k| k.2).sum::<f64>());
        for (name, count, sum) in kernels {
            let mean = sum / count as f64;
            match per_name.iter_mut().find(|p| p.0 == name) {
                Some(p) => p.1.push(mean),
                None => per_name.push((name, vec![mean])),
            }
        }
        add_phase_rows(&mut phases, launches, &released, events);
    }
    let _ = writeln!(
        out,
        "\nover {} replays, us: per kernel the median (min - max) of its mean release-to-next time:",
        replays.len()
    );
    let _ = writeln!(out, "  {:<44} {}", "whole replay", spread(&mut totals));
    per_name.sort_by(|a, b| b.1.iter().sum::<f64>().total_cmp(&a.1.iter().sum::<f64>()));
    for (name, means) in &mut per_name {
        let _ = writeln!(out, "  {:<44} {}", truncate(name, 44), spread(means));
    }
    let what = format!("mean us after the kernel's release over {} replays", replays.len());
    let _ = write!(out, "{}", phase_text(&phases, &what));
    out
}

/// "median (min - max)" of `v` (sorted in place).
fn spread(v: &mut [f64]) -> String {
    v.sort_by(f64::total_cmp);
    format!("{:>8.2} ({:.2} - {:.2})", v[v.len() / 2], v[0], v[v.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::super::EventKind;
    use super::*;

    fn launch(name: &str) -> LaunchRecord {
        LaunchRecord { name: name.into(), grid: (1, 1), block: 32 }
    }
    fn released(ns: u64) -> Event {
        Event { ns, kind: EventKind::Released, grid: (1, 1), block: 32 }
    }

    #[test]
    fn spreads_per_kernel_over_replays() {
        let launches = [launch("a"), launch("b"), launch("a"), launch("end")];
        // Replay 1: a 1 us, b 2 us, a 3 us (a's mean 2, total 6); replay 2: a 2, b 4, a 2 (mean 2,
        // total 8); replay 3: a 4, b 1, a 4 (mean 4, total 9).
        let replay = |gaps: [u64; 3]| {
            let mut ns = 0;
            let mut events = vec![released(ns)];
            for g in gaps {
                ns += g * 1000;
                events.push(released(ns));
            }
            events
        };
        let replays = [replay([1, 2, 3]), replay([2, 4, 2]), replay([4, 1, 4])];
        let text = report_replays(&launches, &replays);
        let summary = text.split("over 3 replays").nth(1).expect("a summary after the first report");
        let row = |name: &str| {
            let line = summary.lines().find(|l| l.trim_start().starts_with(name))?;
            Some(line.trim_start()[name.len()..].split_whitespace().collect::<Vec<_>>().join(" "))
        };
        assert_eq!(row("whole replay").as_deref(), Some("8.00 (6.00 - 9.00)"));
        assert_eq!(row("a").as_deref(), Some("2.00 (2.00 - 4.00)"));
        assert_eq!(row("b").as_deref(), Some("2.00 (1.00 - 4.00)"));
        assert!(row("end").is_none(), "the last launch has no next release");
    }

    #[test]
    fn one_replay_is_the_plain_report() {
        let launches = [launch("a"), launch("b")];
        let events = vec![released(0), released(1500)];
        assert_eq!(report_replays(&launches, std::slice::from_ref(&events)), report(&launches, &events));
    }
}
