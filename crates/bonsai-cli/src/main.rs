//! The `bonsai` command line. Each subcommand lives in its own module; this file only parses
//! arguments and turns errors into one-line messages with a non-zero exit.

mod backend_choice;
mod bench;
mod bench_run;
mod bench_serve;
mod check;
mod convert;
mod info;
mod kernels;
mod chat;
mod demo;
mod generate;
mod hub;
mod perplexity;
mod quantize;
mod serve;
mod synthetic_file;

use bonsai_kernels::Config;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "bonsai", version, about = "Run PrismML's 1-bit and ternary Bonsai models")]
struct Cli {
    /// Kernel configuration, `key=value` pairs separated by commas (after BONSAI_KERNEL_CONFIG):
    /// device, graphs=on|off, pdl=on|off, embedded=on|off, trace=off|kernels|ctas, trace_replays
    #[arg(long, global = true, value_name = "PAIRS")]
    kernel_config: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Describe a GGUF file: architecture, geometry, tokenizer, tensors, bytes per token.
    Info(info::InfoArgs),
    /// Convert a Hugging Face Qwen3 checkpoint folder to GGUF
    Convert(convert::ConvertArgs),
    /// Re-pack a GGUF file's 1-bit / 2-bit / ternary tensors into another such type
    Quantize(quantize::QuantizeArgs),
    /// Inspect, build, clear or verify the CUDA kernel library and its cache
    Kernels(kernels::KernelsArgs),
    /// Generate text from a prompt (streams to stdout; speed on stderr)
    Generate(generate::GenerateArgs),
    /// Interactive multi-turn chat (KV cache kept between turns)
    Chat(chat::ChatArgs),
    /// Perplexity of a text file
    Perplexity(perplexity::PerplexityArgs),
    /// Prefill and decode speed (llama-bench style) on a file or a random model of real geometry
    Bench(bench::BenchArgs),
    /// Run the same greedy generation on the CPU and the GPU and compare (exit 1 on mismatch)
    Check(check::CheckArgs),
    /// Serve the model over an OpenAI-compatible HTTP API, batching concurrent requests
    Serve(serve::ServeArgs),
}

fn main() {
    let cli = Cli::parse_from(hub::expand_short_options(std::env::args_os()));
    // The one read of the environment's settings, with one error policy: a bad value stops here.
    let result = Config::from_env(cli.kernel_config.as_deref()).map_err(anyhow::Error::new).and_then(|config| {
        match cli.command {
            Command::Info(args) => info::run(args),
            Command::Convert(args) => convert::run(args),
            Command::Quantize(args) => quantize::run(args),
            Command::Kernels(args) => kernels::run(args, &config),
            Command::Generate(args) => generate::run(args, &config),
            Command::Chat(args) => chat::run(args, &config),
            Command::Perplexity(args) => perplexity::run(args, &config),
            Command::Bench(args) => bench::run(args, &config),
            Command::Check(args) => check::run(args, &config),
            Command::Serve(args) => serve::run(args, &config),
        }
    });
    if let Err(err) = result {
        if is_broken_pipe(&err) {
            // The reader closed stdout early (`bonsai info F | head`): what it wanted was
            // printed, so stop quietly with success, as coreutils do.
            return;
        }
        // One line: the chain of causes joined, as a user reads it.
        eprintln!("error: {err:#}");
        std::process::exit(1);
    }
}

/// Whether any cause in the chain is a write to a closed pipe.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
