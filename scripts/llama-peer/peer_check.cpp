// llama-peer-check: what `bonsai perplexity` and `bonsai generate --temp 0` compute, on llama.cpp.
//
//   llama-peer-check MODEL.gguf TEXT_FILE CTX PROMPT N_PREDICT THREADS
//
// Perplexity: the text tokenized without special tokens (no BOS), cut into independent windows
// of CTX tokens, every next token inside a window scored (-log softmax in double, max subtracted),
// exp of the mean: `bonsai perplexity`'s definition, not llama-perplexity's (which scores only
// the second half of each window). Greedy: PROMPT tokenized the same way, then N_PREDICT argmax
// steps (lowest id on a tie); the generated text and ids are printed.
// Built by scripts/build-llama-cpu.sh against the same static libllama as llama-bench.
#include "llama.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static void quiet(enum ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text) {
    int n = -llama_tokenize(vocab, text.data(), (int) text.size(), nullptr, 0, false, false);
    std::vector<llama_token> out(n);
    if (llama_tokenize(vocab, text.data(), (int) text.size(), out.data(), n, false, false) != n) {
        fprintf(stderr, "tokenize failed\n");
        exit(1);
    }
    return out;
}

static int argmax(const float * logits, int n_vocab) {
    int best = 0;
    for (int i = 1; i < n_vocab; i++) if (logits[i] > logits[best]) best = i;
    return best;
}

// Runs tokens [pos0, pos0 + n) of `ids` at positions pos0.., logits for every row when `all`.
static void decode(llama_context * ctx, const std::vector<llama_token> & ids, int pos0, int n, bool all) {
    llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        batch.token[i] = ids[pos0 + i];
        batch.pos[i] = pos0 + i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = all || i == n - 1;
    }
    batch.n_tokens = n;
    if (llama_decode(ctx, batch) != 0) {
        fprintf(stderr, "llama_decode failed\n");
        exit(1);
    }
    llama_batch_free(batch);
}

int main(int argc, char ** argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s MODEL TEXT_FILE CTX PROMPT N_PREDICT THREADS\n", argv[0]);
        return 2;
    }
    const int n_ctx = atoi(argv[3]);
    const std::string prompt = argv[4];
    const int n_predict = atoi(argv[5]);
    const int threads = atoi(argv[6]);
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = std::max(n_ctx, (int) prompt.size() + n_predict + 8);
    cp.n_batch = cp.n_ctx;
    cp.n_ubatch = cp.n_ctx;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot create a context\n"); return 1; }

    std::ifstream file(argv[2], std::ios::binary);
    std::stringstream text;
    text << file.rdbuf();
    const std::vector<llama_token> tokens = tokenize(vocab, text.str());
    double nll = 0.0;
    long scored = 0;
    for (size_t w0 = 0; w0 < tokens.size(); w0 += n_ctx) {
        const int len = (int) std::min<size_t>(n_ctx, tokens.size() - w0);
        std::vector<llama_token> win(tokens.begin() + w0, tokens.begin() + w0 + len);
        llama_memory_clear(llama_get_memory(ctx), true);
        decode(ctx, win, 0, len, true);
        for (int i = 0; i + 1 < len; i++) {
            const float * l = llama_get_logits_ith(ctx, i);
            double mx = l[0];
            for (int j = 1; j < n_vocab; j++) mx = std::max(mx, (double) l[j]);
            double z = 0.0;
            for (int j = 0; j < n_vocab; j++) z += std::exp((double) l[j] - mx);
            nll += std::log(z) + mx - (double) l[win[i + 1]];
            scored++;
        }
    }
    printf("perplexity: %.4f over %ld predicted tokens (%zu tokens, windows of %d)\n",
           std::exp(nll / std::max(scored, 1L)), scored, tokens.size(), n_ctx);

    std::vector<llama_token> seq = tokenize(vocab, prompt);
    llama_memory_clear(llama_get_memory(ctx), true);
    decode(ctx, seq, 0, (int) seq.size(), false);
    std::string out_text, out_ids;
    for (int step = 0; step < n_predict; step++) {
        const float * logits = llama_get_logits_ith(ctx, -1);
        const int next = argmax(logits, n_vocab);
        if (step == 0) {
            // The first step's logits, for telling a near-tie from a real difference.
            std::vector<int> order(n_vocab);
            for (int i = 0; i < n_vocab; i++) order[i] = i;
            std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                              [&](int a, int b) { return logits[a] > logits[b]; });
            printf("first step top 5:");
            for (int i = 0; i < 5; i++) printf(" %d:%.5f", order[i], logits[order[i]]);
            printf("\n");
        }
        char piece[256];
        const int n = llama_token_to_piece(vocab, next, piece, sizeof piece, 0, true);
        out_text.append(piece, std::max(n, 0));
        out_ids += (step ? " " : "") + std::to_string(next);
        seq.push_back(next);
        decode(ctx, seq, (int) seq.size() - 1, 1, false);
    }
    printf("greedy ids: %s\n", out_ids.c_str());
    printf("greedy text: %s\n", out_text.c_str());
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
