"""The official `openai` Python client against a running `bonsai serve` (the demo model).

Usage: python3 openai_client_test.py BASE_URL API_KEY MODEL
Run by crates/bonsai-cli/tests/serve.rs, which starts the server; scripts/test.sh installs the
pinned client. Exits non-zero with a message on the first failed check.
"""

import sys
import threading

import openai
from openai import OpenAI

BASE, KEY, MODEL = sys.argv[1], sys.argv[2], sys.argv[3]
client = OpenAI(base_url=BASE + "/v1", api_key=KEY, max_retries=0, timeout=120)
CHECKS = 0


def check(cond, what):
    global CHECKS
    if not cond:
        raise SystemExit(f"FAILED: {what}")
    CHECKS += 1


def chat(content, **kw):
    return client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}], **kw)


# Models.
ids = [m.id for m in client.models.list().data]
check(ids == [MODEL], f"models.list() lists {MODEL}: {ids}")

# Chat, not streamed: usage counts the tokens actually produced (one logprob entry each).
r = chat("Hello there", max_tokens=12, temperature=0, logprobs=True, top_logprobs=2)
c = r.choices[0]
check(r.object == "chat.completion" and c.message.role == "assistant", "chat completion shape")
check(c.finish_reason in ("stop", "length"), f"finish_reason {c.finish_reason}")
check(r.usage.completion_tokens == len(c.logprobs.content), f"usage {r.usage.completion_tokens} vs {len(c.logprobs.content)} tokens")
check(c.finish_reason == "stop" or r.usage.completion_tokens == 12, "length means max_tokens tokens")
check(r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, "total_tokens")
check(all(len(t.top_logprobs) == 2 for t in c.logprobs.content), "two alternatives per token")

# The same request streamed gives the same text, and the usage chunk when asked for.
chunks = list(chat("Hello there", max_tokens=12, temperature=0, stream=True, stream_options={"include_usage": True}))
check(chunks[0].choices[0].delta.role == "assistant", "first chunk carries the role")
streamed = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
check(streamed == c.message.content, f"streamed text {streamed!r} == {c.message.content!r}")
finals = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
check(finals == [c.finish_reason], f"one finish_reason chunk: {finals}")
check(chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == r.usage.completion_tokens, "usage chunk last")

# Completions, streamed and not.
t = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=10, temperature=0)
check(t.object == "text_completion" and t.usage.completion_tokens <= 10, "completion shape")
parts = list(client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=10, temperature=0, stream=True))
check("".join(p.choices[0].text for p in parts) == t.choices[0].text, "streamed completion text")

# Seeds: the same seed reproduces a sampled answer.
a = chat("Tell me a story", max_tokens=16, temperature=1.0, seed=42).choices[0].message.content
b = chat("Tell me a story", max_tokens=16, temperature=1.0, seed=42).choices[0].message.content
check(a == b, f"seeded sampling reproducible: {a!r} vs {b!r}")

# Stop strings: cut exactly before the first occurrence, also when split across tokens.
full = client.completions.create(model=MODEL, prompt="abc", max_tokens=24, temperature=0).choices[0].text
if len(full) >= 6:
    stop = full[3:5]
    cut = client.completions.create(model=MODEL, prompt="abc", max_tokens=24, temperature=0, stop=[stop])
    check(cut.choices[0].text == full[: full.index(stop)], f"stop {stop!r}: {cut.choices[0].text!r} vs {full!r}")
    check(cut.choices[0].finish_reason == "stop", "finish_reason stop")

# Tools as the client sends them, with a conversation that holds a call and its answer: accepted,
# and a reply without a call is plain text.
tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
history = [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
]
r = client.chat.completions.create(model=MODEL, messages=history, tools=tools, tool_choice="auto", max_tokens=8, temperature=0)
m = r.choices[0]
check(m.finish_reason in ("stop", "length", "tool_calls"), f"finish_reason with tools: {m.finish_reason}")
check(m.message.tool_calls is None or all(tc.function.name for tc in m.message.tool_calls), "tool_calls shape")

# Errors arrive as the client's typed exceptions.
try:
    client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    check(False, "unknown model must fail")
except openai.NotFoundError:
    check(True, "")
try:
    OpenAI(base_url=BASE + "/v1", api_key="wrong", max_retries=0).models.list()
    check(False, "a wrong key must fail")
except openai.AuthenticationError:
    check(True, "")
try:
    chat("x", temperature=5)
    check(False, "temperature 5 must fail")
except openai.BadRequestError as e:
    check(e.body.get("param") == "temperature", f"param named: {e.body}")

# 16 concurrent clients: each greedy answer equals the same request alone. Batched and alone
# logits differ within the CPU bound (1e-3 of the largest logit, the model crate's batch test);
# a divergence is accepted only where the alone run's top two tokens were that close (a tie).
prompts = [f"Request number {i}: say something" for i in range(16)]
alone = [chat(p, max_tokens=12, temperature=0, logprobs=True, top_logprobs=2) for p in prompts]
results = [None] * 16
errors = []


def worker(i):
    try:
        results[i] = chat(prompts[i], max_tokens=12, temperature=0)
    except Exception as e:  # noqa: BLE001 - reported below
        errors.append(repr(e))


threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
for th in threads:
    th.start()
for th in threads:
    th.join()
check(not errors, f"concurrent requests failed: {errors}")
TIE = 2e-2  # 2 x 1e-3 x max|logit|, with the demo model's logits below 10 in magnitude
for i, (one, many) in enumerate(zip(alone, results)):
    want, got = one.choices[0].message.content, many.choices[0].message.content
    if want != got:
        tokens = one.choices[0].logprobs.content
        j = next(k for k in range(len(tokens)) if not got.startswith("".join(t.token for t in tokens[: k + 1])))
        tops = tokens[j].top_logprobs
        check(len(tops) == 2 and tops[0].logprob - tops[1].logprob <= TIE, f"stream {i}: {got!r} vs alone {want!r}")
    check(many.usage.completion_tokens == one.usage.completion_tokens or want != got, f"stream {i} usage")

print(f"openai client: {CHECKS} checks passed (openai {openai.__version__})")
