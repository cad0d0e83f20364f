//! The `bonsai` command line. Each subcommand lives in its own module; this file only parses
//! arguments and turns errors into one-line messages with a non-zero exit.

mod convert;
mod info;
mod kernels;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "bonsai", version, about = "Run PrismML's 1-bit and ternary Bonsai models")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Describe a GGUF file: architecture, geometry, tokenizer, tensors, bytes per token.
    Info(info::InfoArgs),
    /// Convert a Hugging Face Qwen3 checkpoint folder to GGUF
    Convert(convert::ConvertArgs),
    /// Inspect, build, clear or verify the CUDA kernel library and its cache
    Kernels(kernels::KernelsArgs),
}

fn main() {
    let cli = Cli::parse();
    let result: anyhow::Result<()> = match cli.command {
        Command::Info(args) => info::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Kernels(args) => kernels::run(args),
    };
    if let Err(err) = result {
        // One line: the chain of causes joined, as a user reads it.
        eprintln!("error: {err:#}");
        std::process::exit(1);
    }
}
