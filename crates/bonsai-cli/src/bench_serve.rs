//! `bonsai bench serve`: a load generator for an OpenAI-compatible server. It targets `--url`, or
//! starts `bonsai serve` itself with the arguments after `--`; drives N concurrent streams, each
//! a streamed completion of random prompt ids with `ignore_eos` so it runs to its length; and
//! reports aggregate output tok/s, time to first token and inter-token latency (p50/p99), and
//! errors. Every SSE chunk carries one token, so chunk times are token times.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};

#[derive(clap::Args, Debug)]
pub struct BenchServeArgs {
    /// A running server (http://HOST:PORT); without it, `bonsai serve --port 0` starts with the
    /// arguments after `--` and stops at the end
    #[arg(long)]
    pub url: Option<String>,
    /// Concurrent streams
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub streams: u32,
    /// Requests in all (default: one per stream)
    #[arg(long)]
    pub requests: Option<usize>,
    /// Prompt tokens per request (random ids below 256, different per request)
    #[arg(short = 'p', long = "prompt-tokens", default_value_t = 512)]
    pub prompt_tokens: usize,
    /// Tokens generated per request
    #[arg(short = 'n', long = "gen-tokens", default_value_t = 128)]
    pub gen_tokens: usize,
    /// Sampling temperature of every request (0: greedy). Above 0 the requests sample with the
    /// server's defaults for top-k, top-p and min-p (bonsai serve: the model file's
    /// recommendation, else llama-server's 40, 0.95, 0.05) unless the options below are given
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// top_k of every request (default: the server's)
    #[arg(long)]
    pub top_k: Option<usize>,
    /// top_p of every request (default: the server's)
    #[arg(long)]
    pub top_p: Option<f32>,
    /// min_p of every request (default: the server's)
    #[arg(long)]
    pub min_p: Option<f32>,
    /// Bearer key for the server
    #[arg(long)]
    pub api_key: Option<String>,
    /// Print one JSON object instead of the summary
    #[arg(long)]
    pub json: bool,
    /// Arguments for the server this starts (after `--`), e.g. `-- --synthetic bonsai-8b -np 64`
    #[arg(last = true)]
    pub server_args: Vec<String>,
}

/// One request's outcome.
#[derive(Default)]
struct Outcome {
    ttft: Option<f64>,
    gaps: Vec<f64>,
    tokens: usize,
    error: Option<String>,
}

/// A server this command started (killed on drop).
struct Started(Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn run(args: BenchServeArgs) -> anyhow::Result<()> {
    let (addr, _server) = match &args.url {
        Some(url) => (url.trim_start_matches("http://").trim_end_matches('/').to_string(), None),
        None => {
            let (addr, child) = start_server(&args.server_args)?;
            (addr, Some(child))
        }
    };
    let key = args.api_key.as_deref();
    let models = get_json(&addr, "/v1/models", key).context("listing the server's models")?;
    let model = models["data"][0]["id"].as_str().context("the server lists no model")?.to_string();
    let total = args.requests.unwrap_or(args.streams as usize);
    let next = AtomicUsize::new(0);
    let outcomes = Mutex::new(Vec::with_capacity(total));
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..args.streams {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let outcome = one_request(&addr, key, &request_body(&args, &model, i), args.gen_tokens);
                outcomes.lock().unwrap_or_else(|e| e.into_inner()).push(outcome);
            });
        }
    });
    let wall = start.elapsed().as_secs_f64();
    let outcomes = outcomes.into_inner().unwrap_or_else(|e| e.into_inner());
    report(&args, &model, total, wall, &outcomes)
}

fn start_server(extra: &[String]) -> anyhow::Result<(String, Started)> {
    let exe = std::env::current_exe().context("locating the bonsai binary")?;
    let mut child = Command::new(exe)
        .args(["serve", "--port", "0"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting bonsai serve")?;
    let mut stderr = BufReader::new(child.stderr.take().context("the server's stderr")?);
    let started = Started(child);
    let mut line = String::new();
    loop {
        line.clear();
        if stderr.read_line(&mut line)? == 0 {
            bail!("bonsai serve exited before listening");
        }
        eprint!("server: {line}");
        if let Some(rest) = line.split("http://").nth(1) {
            let addr = rest.split_whitespace().next().unwrap_or_default().to_string();
            std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
            return Ok((addr, started));
        }
    }
}

/// Writes one HTTP/1.1 request and returns the stream positioned after the response headers,
/// with the status and whether the body is chunked.
fn send(addr: &str, method: &str, path: &str, key: Option<&str>, body: &str) -> anyhow::Result<(BufReader<TcpStream>, u16, bool)> {
    let mut s = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(600)))?;
    let auth = key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut reader = BufReader::new(s);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let mut chunked = false;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        chunked |= line.to_ascii_lowercase().starts_with("transfer-encoding: chunked");
    }
    Ok((reader, status, chunked))
}

fn get_json(addr: &str, path: &str, key: Option<&str>) -> anyhow::Result<Value> {
    let (mut reader, status, chunked) = send(addr, "GET", path, key, "")?;
    let mut body = Vec::new();
    if chunked {
        while let Some(chunk) = read_chunk(&mut reader)? {
            body.extend(chunk);
        }
    } else {
        reader.read_to_end(&mut body)?;
    }
    if status != 200 {
        bail!("GET {path}: HTTP {status}: {}", String::from_utf8_lossy(&body));
    }
    Ok(serde_json::from_slice(&body)?)
}

/// One chunk of a chunked body; None at the last.
fn read_chunk(reader: &mut BufReader<TcpStream>) -> anyhow::Result<Option<Vec<u8>>> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16).with_context(|| format!("a chunk size line {line:?}"))?;
    if size == 0 {
        return Ok(None);
    }
    let mut chunk = vec![0u8; size + 2];
    reader.read_exact(&mut chunk)?;
    chunk.truncate(size);
    Ok(Some(chunk))
}

/// A prompt of `n` ids below 256 (valid in every vocabulary), different for every request.
fn prompt_ids(request: usize, n: usize) -> Vec<u32> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ (request as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            1 + (state % 255) as u32
        })
        .collect()
}

/// Request `i`'s body: its prompt, length and sampling settings (the ones not given are left to
/// the server).
fn request_body(args: &BenchServeArgs, model: &str, i: usize) -> String {
    let mut body = json!({
        "model": model, "prompt": prompt_ids(i, args.prompt_tokens.max(1)), "max_tokens": args.gen_tokens,
        "temperature": args.temperature, "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true},
    });
    for (name, value) in [("top_k", args.top_k.map(|k| json!(k))), ("top_p", args.top_p.map(|p| json!(p))), ("min_p", args.min_p.map(|p| json!(p)))] {
        if let Some(value) = value {
            body[name] = value;
        }
    }
    body.to_string()
}

fn one_request(addr: &str, key: Option<&str>, body: &str, gen_tokens: usize) -> Outcome {
    let mut outcome = Outcome::default();
    if let Err(e) = stream_request(addr, key, body, gen_tokens, &mut outcome) {
        outcome.error = Some(format!("{e:#}"));
    }
    outcome
}

fn stream_request(addr: &str, key: Option<&str>, body: &str, gen_tokens: usize, outcome: &mut Outcome) -> anyhow::Result<()> {
    let sent = Instant::now();
    let (mut reader, status, chunked) = send(addr, "POST", "/v1/completions", key, body)?;
    if status != 200 || !chunked {
        let mut rest = String::new();
        let _ = reader.read_to_string(&mut rest);
        bail!("HTTP {status}: {}", rest.trim());
    }
    let (mut pending, mut last, mut usage) = (Vec::<u8>::new(), None::<Instant>, None);
    while let Some(chunk) = read_chunk(&mut reader)? {
        pending.extend(chunk);
        while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = pending.drain(..end + 2).collect();
            let Some(data) = std::str::from_utf8(&event).ok().and_then(|e| e.trim().strip_prefix("data: ")) else { continue };
            if data == "[DONE]" {
                continue;
            }
            let v: Value = serde_json::from_str(data).with_context(|| format!("a chunk {data:?}"))?;
            if let Some(e) = v.get("error") {
                bail!("the server ended the stream: {e}");
            }
            if !v["usage"].is_null() {
                usage = v["usage"]["completion_tokens"].as_u64();
            }
            let token = v["choices"][0]["finish_reason"].is_null() && v["choices"][0]["text"].is_string();
            if token {
                let now = Instant::now();
                match last {
                    None => outcome.ttft = Some((now - sent).as_secs_f64()),
                    Some(t) => outcome.gaps.push((now - t).as_secs_f64()),
                }
                last = Some(now);
                outcome.tokens += 1;
            }
        }
    }
    match usage {
        Some(n) if n as usize == outcome.tokens && outcome.tokens == gen_tokens => Ok(()),
        Some(n) => bail!("{} token chunks, usage says {n}, {gen_tokens} asked for", outcome.tokens),
        None => bail!("the stream ended without a usage chunk"),
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn report(args: &BenchServeArgs, model: &str, total: usize, wall: f64, outcomes: &[Outcome]) -> anyhow::Result<()> {
    let tokens: usize = outcomes.iter().map(|o| o.tokens).sum();
    let errors: Vec<&str> = outcomes.iter().filter_map(|o| o.error.as_deref()).collect();
    let mut ttft: Vec<f64> = outcomes.iter().filter_map(|o| o.ttft).collect();
    let mut gaps: Vec<f64> = outcomes.iter().flat_map(|o| o.gaps.iter().copied()).collect();
    ttft.sort_by(f64::total_cmp);
    gaps.sort_by(f64::total_cmp);
    let aggregate = tokens as f64 / wall;
    if args.json {
        let v = json!({
            "model": model, "streams": args.streams, "requests": total, "prompt_tokens": args.prompt_tokens,
            "gen_tokens": args.gen_tokens, "temperature": args.temperature, "output_tokens": tokens, "seconds": wall, "output_tok_per_s": aggregate,
            "ttft_p50_s": percentile(&ttft, 0.5), "ttft_p99_s": percentile(&ttft, 0.99),
            "itl_p50_s": percentile(&gaps, 0.5), "itl_p99_s": percentile(&gaps, 0.99), "errors": errors.len(),
        });
        println!("{v}");
    } else {
        println!(
            "{model}: {} streams, {total} requests of {} prompt + {} generated tokens, {}",
            args.streams,
            args.prompt_tokens,
            args.gen_tokens,
            if args.temperature > 0.0 { format!("sampled at temperature {}", args.temperature) } else { "greedy".to_string() }
        );
        println!("output: {tokens} tokens in {wall:.2} s = {aggregate:.1} tok/s aggregate");
        println!(
            "time to first token: p50 {:.3} s, p99 {:.3} s | inter-token latency: p50 {:.2} ms, p99 {:.2} ms | errors: {}",
            percentile(&ttft, 0.5),
            percentile(&ttft, 0.99),
            percentile(&gaps, 0.5) * 1e3,
            percentile(&gaps, 0.99) * 1e3,
            errors.len()
        );
    }
    if let Some(first) = errors.first() {
        bail!("{} of {total} requests failed; the first: {first}", errors.len());
    }
    Ok(())
}
