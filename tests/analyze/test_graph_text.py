"""The graph's signature text of a call, written from its parts (analyze/graph.py
``_call_text``), is exactly ``repr`` of the value: the signatures hash that text."""

from __future__ import annotations

import random

from nbinspect.analyze.graph import _call_text


def _shape(rng: random.Random) -> tuple:
    return tuple(rng.choice([0, 1, 7, 4096, 2**40]) for _ in range(rng.randint(0, 4)))


def test_call_text_is_repr():
    rng = random.Random(0)
    texts: dict = {}  # shared across values, as one trace's signatures share it
    pool = [rng.getrandbits(64) for _ in range(4)]  # repeated blocks: children share signatures
    for _ in range(500):
        ins = None if rng.random() < 0.1 else [_shape(rng) for _ in range(rng.randint(0, 3))]
        outs = None if rng.random() < 0.1 else [_shape(rng) for _ in range(rng.randint(0, 3))]
        kids = [rng.choice(pool) if rng.random() < 0.5 else rng.getrandbits(64) for _ in range(rng.randint(0, 6))]
        inside = [(rng.randint(0, 9), rng.randint(0, 9), _shape(rng)) for _ in range(rng.randint(0, 6))]
        value = (rng.choice(["Linear", "Sequential", 'it\'s "quoted"']), ins, outs, kids, inside)
        assert _call_text(value, texts) == repr(value)
