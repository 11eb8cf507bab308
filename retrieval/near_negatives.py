"""Near-topic out-of-domain turns made from a corpus itself, for calibration to keep the door shut.

The shipped pool (``corpus/ood_pool.jsonl``) is far from most corpora: a calibration fitted against it alone may
loosen the cross-encoder's threshold until turns that borrow the corpus's words in another domain pass (on a
bicycle-repair corpus, -7.0 answered "How do I replace the timing belt on my car engine" with a brake-pad card).
``near_turns`` writes such turns from the corpus's own vocabulary: its most common content words asked about a
machine of another domain ("how do I replace the brake on my lawn mower"), skipping a domain whose head word the
cards use (a corpus about cars keeps its cars). ``calibration.choose`` never loosens a threshold past the point
where more of them pass than with the thresholds it started from.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from retrieval.refusal_vocabulary import Vocabulary, content_words

# Machines and places of other domains (the last word is the head the cards must not use).
DOMAINS = (
    "car engine",
    "motorbike",
    "lawn mower",
    "washing machine",
    "dishwasher",
    "gas boiler",
    "outboard motor",
    "laser printer",
    "chainsaw",
    "sailboat",
    "espresso machine",
    "air conditioner",
    "tractor",
    "sewing machine",
    "electric guitar",
    "aquarium",
)
FRAMES = (
    "how do I replace the {word} on my {domain}",
    "my {domain} {word} is making a noise, what should I do",
    "how often should I change the {word} in my {domain}",
    "what does a worn {word} on a {domain} look like",
    "can I fix the {word} of my {domain} myself",
)
N_WORDS = 12  # the corpus's most common content words used
MAX_TURNS = 45


def corpus_words(vocabulary: Vocabulary, titles: Sequence[str], n: int = N_WORDS) -> list[str]:
    """The ``n`` words of the cards' titles (noun phrases: "Replacing rim brake pads") found in the most cards;
    letters only, at least 4, no -ing form."""
    words = {w for t in titles for w in content_words(t) if w.isalpha() and len(w) >= 4 and not w.endswith("ing")}
    return sorted(words, key=lambda w: (-vocabulary.df.get(w, 0), w))[:n]


def near_turns(vocabulary: Vocabulary, titles: Sequence[str], n: int | None = None, seed: int = 0) -> list[str]:
    """At most ``n`` (``MAX_TURNS``) turns asking about the corpus's title words in other domains' machines
    (deterministic)."""
    n = MAX_TURNS if n is None else n
    domains = [d for d in DOMAINS if vocabulary.df.get(d.split()[-1], 0) == 0]
    words = corpus_words(vocabulary, titles)
    if not domains or not words:
        return []
    rng = random.Random(seed)
    combos = [(f, w, d) for f in FRAMES for w in words for d in domains]
    picked = rng.sample(combos, min(n, len(combos)))
    return list(dict.fromkeys(f.format(word=w, domain=d) for f, w, d in picked))


def floor(refused_at_start: int) -> int:
    """How many near-topic turns a calibrated threshold must still refuse: as many as the start did."""
    return refused_at_start


def within_floor(counts: dict[tuple[int, ...], int], start: tuple[int, ...] | None) -> Sequence[tuple[int, ...]]:
    """The grid points that refuse at least as many near-topic turns as ``start`` (all points if it is unknown)."""
    if start is None or start not in counts:
        return list(counts)
    return [i for i, n in counts.items() if n >= floor(counts[start])]
