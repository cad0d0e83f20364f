"""Simple children's stories, made up from a seed: the corpus of bonsai's default model.

Pure Python standard library and deterministic: sample i of seed s depends on (s, i) only, so a
corpus can be written by several processes and any sample made again. About one sample in ten is
a ChatML exchange (a user asks for a story, the assistant tells it), so the model also answers in
`bonsai chat`. Samples are separated by <|endoftext|>.

    python3 stories.py --seed 1 --count 100000 --out corpus.txt [--jobs 8]
    python3 stories.py --seed 2 --count 3 --out -            # print a few
"""

import argparse
import multiprocessing
import random
import sys

from story_plots import PLOTS, Setting
from story_text import article, pick, random_character
from story_words import ANIMALS, FOODS, MORALS, PLACES, THINGS

ENDOFTEXT = "<|endoftext|>"
CHAT_SHARE = 0.1
# Chats that are not a request for a story, with their fixed replies.
SMALL_TALK = [
    ("Hello!", "Hello! I am a little story teller. Would you like to hear a story?"),
    ("Hi", "Hi there! Do you want me to tell you a story?"),
    ("Who are you?", "I am a small model that tells simple stories about children, animals and friends."),
    ("What can you do?", "I can tell you short stories. Ask me for a story about an animal, a child or a friend."),
    ("Thank you!", "You are welcome! I hope you liked the story."),
    ("Good night.", "Good night! Sleep well and have sweet dreams."),
]


def make_story(rng, kind=None, name=None, plot=None, thing=None, human=None):
    """One story as text; the arguments pin what a chat request asked for."""
    plot = plot or pick(rng, list(PLOTS))
    write, weathers = PLOTS[plot]
    hero = random_character(rng, kind=kind, name=name, human=human)
    setting = Setting(rng, pick(rng, PLACES), thing or pick(rng, THINGS), pick(rng, FOODS),
                      pick(rng, weathers))
    paragraphs, moral = write(rng, hero, setting)
    if moral and rng.random() < 0.5:
        paragraphs[-1].append(pick(rng, MORALS[moral]))
    if rng.random() < 0.15:
        paragraphs[-1].append("The end.")
    return "\n\n".join(" ".join(p) for p in paragraphs)


def chat_sample(rng):
    """A ChatML conversation: one exchange, sometimes followed by a second one (thanks, or
    another request), so that a multi-turn `bonsai chat` stays in the distribution."""
    text = chat_exchange(rng)
    if rng.random() < 0.25:
        if rng.random() < 0.3:
            text += chatml(*SMALL_TALK[4])
        else:
            text += chat_exchange(rng, again=True)
    return text


def chat_exchange(rng, again=False):
    """A request and a story that fits it (or a short reply)."""
    if rng.random() < 0.05:
        question, answer = pick(rng, SMALL_TALK)
        return chatml(question, answer)
    if again and rng.random() < 0.5:
        return chatml(pick(rng, ["Tell me another story.", "Can you tell me one more story?"]),
                      make_story(rng))
    request = rng.randrange(7)
    if request == 0:
        kind = pick(rng, ANIMALS)[0]
        question = pick(rng, [f"Tell me a story about {article(kind)}.",
                              f"Can you tell me a story about {article(kind)}?",
                              f"Write a short story about {article(kind)}."])
        story = make_story(rng, kind=kind)
    elif request == 1:
        kind = pick(rng, ["girl", "boy"])
        hero_rng = random.Random(rng.random())
        name = random_character(hero_rng, kind=kind).name
        question = pick(rng, [f"Tell me a story about a {kind} named {name}.",
                              f"Tell me a story about {name}."])
        story = make_story(rng, kind=kind, name=name)
    elif request == 2:
        thing, things = pick(rng, THINGS)
        question = pick(rng, [f"Tell me a story about a lost {thing}.",
                              f"Can you write a story about someone who loses {article(thing)}?"])
        story = make_story(rng, plot="lost", thing=(thing, things))
    elif request == 3:
        plot, topic = pick(rng, [("share", "sharing"), ("fear", "being brave"),
                                 ("try", "never giving up"), ("friend", "making a new friend"),
                                 ("sorry", "telling the truth"), ("rain", "a rainy day"),
                                 ("gift", "a birthday present"), ("rescue", "helping others"),
                                 ("adventure", "an adventure"), ("race", "a race")])
        question = pick(rng, [f"Tell me a story about {topic}.",
                              f"Can you tell me a short story about {topic}?"])
        story = make_story(rng, plot=plot)
    else:
        question = pick(rng, ["Tell me a story.", "Tell me a bedtime story.",
                              "Can you tell me a story?", "Please tell me a short story.",
                              "I want to hear a story."])
        story = make_story(rng)
    return chatml(question, story)


def chatml(question, answer):
    return (f"<|im_start|>user\n{question}<|im_end|>\n"
            f"<|im_start|>assistant\n{answer}<|im_end|>\n")


def sample(seed, index):
    """Sample `index` of the corpus of `seed` (a story or a chat)."""
    rng = random.Random(f"{seed}:{index}")
    if rng.random() < CHAT_SHARE:
        return chat_sample(rng)
    return make_story(rng)


def _chunk(args):
    seed, start, stop = args
    return "".join(sample(seed, i) + ENDOFTEXT for i in range(start, stop))


def write_corpus(seed, count, out, jobs=1):
    chunk = 2000
    ranges = [(seed, a, min(a + chunk, count)) for a in range(0, count, chunk)]
    if jobs > 1:
        with multiprocessing.Pool(jobs) as pool:
            for text in pool.imap(_chunk, ranges):
                out.write(text)
    else:
        for r in ranges:
            out.write(_chunk(r))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, required=True, help="samples to write")
    ap.add_argument("--out", required=True, help="file, or - for stdout")
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args()
    if args.out == "-":
        write_corpus(args.seed, args.count, sys.stdout, 1)
    else:
        with open(args.out, "w", encoding="utf-8") as f:
            write_corpus(args.seed, args.count, f, args.jobs)


if __name__ == "__main__":
    main()
