//! `bonsai chat`: an interactive multi-turn REPL. The KV cache is kept between turns: each turn
//! the whole conversation is rendered, and only the tokens after the longest prefix already in
//! the cache are run (the cache is rewound to that prefix, which also covers templates that
//! rewrite earlier turns, e.g. Qwen3 dropping old thinking blocks).

use std::io::{BufRead, Write};

use bonsai_model::chat::{render_chat, ChatOptions, Message};
use bonsai_model::generate::{generate, Event, GenerateOptions};
use bonsai_model::loader::LoadedModel;
use bonsai_model::tokenizer::StreamDecoder;
use bonsai_model::{Backend, ModelError};

use crate::generate::{load, print_stats, ModelArgs, SamplingArgs, TemplateArgs, PREFILL_BATCH};

#[derive(clap::Args, Debug)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Most tokens per reply
    #[arg(short = 'n', long = "n-predict", default_value_t = 512)]
    pub n: usize,
    /// System prompt for the conversation
    #[arg(long)]
    pub system: Option<String>,
    /// Ask Qwen3 to skip its thinking block (the template pre-fills an empty one)
    #[arg(long)]
    pub no_think: bool,
    #[command(flatten)]
    pub template: TemplateArgs,
}

pub fn run(args: ChatArgs, config: &bonsai_kernels::Config) -> anyhow::Result<()> {
    let loaded = load(&args.model, config)?;
    crate::on_any_backend!(loaded, |l| repl(l, &args))
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn repl<B: Backend>(loaded: &LoadedModel<B>, args: &ChatArgs) -> anyhow::Result<()> {
    let LoadedModel { model, chat_template, .. } = loaded;
    let tokenizer = loaded.text_tokenizer()?;
    let mut sampler = args.sampling.sampler(&loaded.sampling)?;
    let mut state = model.new_state(PREFILL_BATCH, false)?;
    let options = args.template.options(ChatOptions { enable_thinking: !args.no_think, ..ChatOptions::default() })?;
    let initial: Vec<Message> = args.system.iter().map(|s| Message::new("system", s)).collect();
    let mut messages = initial.clone();
    // Tokens whose K/V are in the cache, in order (history[..n_past] of the last turn).
    let mut cached: Vec<u32> = Vec::new();
    let mut told_fallback = false;
    eprintln!("chat: type a message; /reset clears the conversation, /exit or end-of-input quits");
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    loop {
        print!("> ");
        std::io::stdout().flush()?;
        let Some(line) = lines.next().transpose()? else { break };
        let line = line.trim();
        match line {
            "" => continue,
            "/exit" | "/quit" => break,
            "/reset" => {
                messages = initial.clone();
                cached.clear();
                model.rewind(&mut state, 0)?;
                eprintln!("(conversation cleared)");
                continue;
            }
            _ => {}
        }
        messages.push(Message::new("user", line));
        let rendered = render_chat(chat_template.as_deref(), &messages, &options);
        if let (Some(reason), false) = (&rendered.fallback_reason, told_fallback) {
            eprintln!("note: {reason}");
            told_fallback = true;
        }
        let tokens = tokenizer.encode(&rendered.text)?;
        // Keep the cached prefix, but always run at least one new token.
        let keep = common_prefix(&cached, &tokens).min(tokens.len().saturating_sub(1));
        // A recurrent (qwen35) state cannot drop tokens: it keeps all of them or none.
        let keep = model.rewind_point(&state, 0, keep);
        model.rewind(&mut state, keep)?;
        cached.truncate(keep);
        let prompt = &tokens[keep..];
        if args.model.verbose {
            eprintln!("(reusing {keep} cached tokens, running {} new)", prompt.len());
        }
        let room = model.max_seq().saturating_sub(keep + prompt.len());
        if room == 0 {
            messages.pop();
            eprintln!("error: {}", ModelError::ContextFull { need: keep + prompt.len() + 1, ctx: model.max_seq() });
            eprintln!("(type /reset to start over)");
            continue;
        }
        let gen_options = GenerateOptions {
            max_new_tokens: args.n.min(room + 1),
            stop_ids: tokenizer.stop_ids().to_vec(),
            want_logits: false,
        };
        let mut decoder = StreamDecoder::new();
        let mut reply = Vec::new();
        let mut history = cached.clone();
        let mut stdout = std::io::stdout().lock();
        let io = |e: std::io::Error| ModelError::Unsupported(format!("writing output: {e}"));
        let stats = generate(model, &mut state, &mut sampler, prompt, &mut history, &gen_options, |event| {
            if let Event::Token(id) = event {
                if !gen_options.stop_ids.contains(&id) {
                    reply.push(id);
                    stdout.write_all(decoder.push(tokenizer, id)?.as_bytes()).map_err(io)?;
                    stdout.flush().map_err(io)?;
                }
            }
            Ok(())
        })?;
        writeln!(stdout, "{}", decoder.finish())?;
        drop(stdout);
        cached = history;
        cached.truncate(state.n_past());
        messages.push(Message::new("assistant", &tokenizer.decode(&reply)?));
        if args.model.verbose {
            print_stats(&stats);
        }
    }
    Ok(())
}
