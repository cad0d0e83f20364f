//! The server's counters, gauges and latency histograms, rendered in Prometheus' text format for
//! `GET /metrics`.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Upper bounds (seconds) of the latency histograms' buckets.
const LATENCY_BUCKETS: [f64; 14] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// A cumulative histogram over [`LATENCY_BUCKETS`].
#[derive(Default)]
pub struct Histogram {
    inner: Mutex<HistogramData>,
}

#[derive(Default, Clone)]
struct HistogramData {
    buckets: [u64; LATENCY_BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    pub fn observe(&self, seconds: f64) {
        let mut h = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        for (bucket, &le) in h.buckets.iter_mut().zip(&LATENCY_BUCKETS) {
            if seconds <= le {
                *bucket += 1;
            }
        }
        h.count += 1;
        h.sum += seconds;
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let h = self.inner.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (count, le) in h.buckets.iter().zip(LATENCY_BUCKETS) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {count}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}\n{name}_sum {}\n{name}_count {}", h.count, h.sum, h.count);
    }
}

/// Everything `/metrics` reports. Counters only grow; gauges are set by the engine each step.
#[derive(Default)]
pub struct Metrics {
    pub requests: AtomicU64,
    pub requests_rejected: AtomicU64,
    pub requests_failed: AtomicU64,
    pub prompt_tokens: AtomicU64,
    pub prompt_tokens_cached: AtomicU64,
    pub prompt_tokens_copied: AtomicU64,
    pub generated_tokens: AtomicU64,
    /// Generated tokens picked on the host from downloaded logits.
    pub host_picked_tokens: AtomicU64,
    pub forward_steps: AtomicU64,
    pub queue_depth: AtomicU64,
    pub running: AtomicU64,
    /// Sequences in the last forward step.
    pub batch_sequences: AtomicU64,
    /// Token rows in the last forward step.
    pub batch_rows: AtomicU64,
    /// Blocks of the paged KV cache held by sequences (running ones and finished ones whose
    /// tokens stay for prefix reuse), and the blocks in all.
    pub kv_blocks_in_use: AtomicU64,
    pub kv_blocks_total: AtomicU64,
    pub time_to_first_token: Histogram,
    pub inter_token_latency: Histogram,
    pub step_seconds: Histogram,
}

impl Metrics {
    pub fn add(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }
    pub fn set(gauge: &AtomicU64, n: usize) {
        gauge.store(n as u64, Ordering::Relaxed);
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let scalars: [(&str, &str, &str, &AtomicU64); 15] = [
            ("bonsai_requests_total", "counter", "Generation requests accepted.", &self.requests),
            ("bonsai_requests_rejected_total", "counter", "Requests turned away because the queue was full.", &self.requests_rejected),
            ("bonsai_requests_failed_total", "counter", "Accepted requests that ended in an error.", &self.requests_failed),
            ("bonsai_prompt_tokens_total", "counter", "Prompt tokens of accepted requests.", &self.prompt_tokens),
            ("bonsai_prompt_tokens_cached_total", "counter", "Prompt tokens reused from a cached prefix.", &self.prompt_tokens_cached),
            ("bonsai_prompt_tokens_copied_total", "counter", "Cached prompt tokens copied from another sequence's cache.", &self.prompt_tokens_copied),
            ("bonsai_generated_tokens_total", "counter", "Tokens generated.", &self.generated_tokens),
            (
                "bonsai_host_picked_tokens_total",
                "counter",
                "Generated tokens picked on the host from downloaded logits (penalties, logprobs, sampling settings the device sampler does not take, or a batch-mate's).",
                &self.host_picked_tokens,
            ),
            ("bonsai_forward_steps_total", "counter", "Forward steps of the batch.", &self.forward_steps),
            ("bonsai_queue_depth", "gauge", "Requests waiting for a sequence slot.", &self.queue_depth),
            ("bonsai_running_sequences", "gauge", "Requests being generated.", &self.running),
            ("bonsai_batch_sequences", "gauge", "Sequences in the last forward step.", &self.batch_sequences),
            ("bonsai_batch_rows", "gauge", "Token rows in the last forward step.", &self.batch_rows),
            ("bonsai_kv_blocks_in_use", "gauge", "KV cache blocks held by sequences (running, or cached for prefix reuse).", &self.kv_blocks_in_use),
            ("bonsai_kv_blocks_total", "gauge", "KV cache blocks in the pool.", &self.kv_blocks_total),
        ];
        for (name, kind, help, v) in scalars {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}", v.load(Ordering::Relaxed));
        }
        self.time_to_first_token.render(&mut out, "bonsai_time_to_first_token_seconds", "From arrival to the first generated token.");
        self.inter_token_latency.render(&mut out, "bonsai_inter_token_latency_seconds", "Between consecutive tokens of one request.");
        self.step_seconds.render(&mut out, "bonsai_forward_step_seconds", "One forward step of the batch, sampling included.");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative_and_renders_prometheus_text() {
        let m = Metrics::default();
        m.time_to_first_token.observe(0.003);
        m.time_to_first_token.observe(0.2);
        m.time_to_first_token.observe(100.0);
        Metrics::add(&m.requests, 3);
        let text = m.render();
        assert!(text.contains("bonsai_requests_total 3\n"), "{text}");
        assert!(text.contains("bonsai_time_to_first_token_seconds_bucket{le=\"0.0025\"} 0\n"), "{text}");
        assert!(text.contains("bonsai_time_to_first_token_seconds_bucket{le=\"0.005\"} 1\n"), "{text}");
        assert!(text.contains("bonsai_time_to_first_token_seconds_bucket{le=\"0.25\"} 2\n"), "{text}");
        assert!(text.contains("bonsai_time_to_first_token_seconds_bucket{le=\"+Inf\"} 3\n"), "{text}");
        assert!(text.contains("bonsai_time_to_first_token_seconds_count 3\n"), "{text}");
        assert!(text.contains("# TYPE bonsai_queue_depth gauge\n"), "{text}");
    }
}
