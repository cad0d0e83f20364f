//! The `bonsai` command line. Each subcommand lives in its own module; this file only parses
//! arguments and turns errors into one-line messages with a non-zero exit.

use clap::{Parser, Subcommand};

mod convert;

#[derive(Parser)]
#[command(name = "bonsai", version, about = "Run PrismML's 1-bit and ternary Bonsai models")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    // Each helper adds its subcommand here, one line, with the logic in its own module:
    //   Info(info::InfoArgs)          -> crates/bonsai-cli/src/info.rs
    //   Convert(convert::ConvertArgs) -> crates/bonsai-cli/src/convert.rs
    //   Kernels(kernels::KernelsArgs) -> crates/bonsai-cli/src/kernels.rs
    //   Generate / Chat / Perplexity  -> crates/bonsai-cli/src/{generate,chat,perplexity}.rs
    //   Bench(bench::BenchArgs)       -> crates/bonsai-cli/src/bench.rs
    /// Convert a Hugging Face Qwen3 checkpoint folder to GGUF
    Convert(convert::ConvertArgs),
}

fn main() {
    let cli = Cli::parse();
    let result: anyhow::Result<()> = match cli.command {
        Command::Convert(args) => convert::run(args),
    };
    if let Err(err) = result {
        // One line: the chain of causes joined, as a user reads it.
        eprintln!("error: {err:#}");
        std::process::exit(1);
    }
}
