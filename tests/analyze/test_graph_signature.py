"""A call's graph signature (analyze/graph.py) is equal for two calls exactly when their
values are: (type, input shapes, output shapes) and, for a call with children, the children's
signatures in order and the edges between them. Checked on random values drawn from small
pools, so that equal values come up often and unequal ones differ in a single part."""

from __future__ import annotations

import random

import numpy as np

from nbinspect.analyze.graph import _call_signature, _text_hashes

SHAPES = [(), (7,), (4096, 2**40)]


def _value(rng: random.Random, pool: list[int]) -> tuple:
    ins = None if rng.random() < 0.2 else tuple(rng.choice(SHAPES) for _ in range(rng.randint(0, 1)))
    outs = None if rng.random() < 0.2 else (rng.choice(SHAPES),)
    head = (rng.choice(["Linear", 'it\'s "quoted"']), ins, outs)
    kids = tuple(rng.choice(pool) for _ in range(rng.randint(1, 2)))
    edges = tuple((rng.randint(0, 1), 1, rng.choice(pool)) for _ in range(rng.randint(0, 1)))
    return head, kids, edges


def _signature(value: tuple) -> int:
    head, kids, edges = value
    rows = np.array(edges, dtype=np.uint64).reshape(-1, 3).view(np.int64)
    return _call_signature(head, np.array(kids, dtype=np.uint64), rows)


def test_call_signatures_are_equal_exactly_when_the_calls_are():
    rng = random.Random(0)
    pool = [rng.getrandbits(64) for _ in range(3)]
    values = [_value(rng, pool) for _ in range(3000)]
    by_value: dict[tuple, int] = {}
    by_signature: dict[int, tuple] = {}
    for value in values:
        signature = _signature(value)
        assert by_value.setdefault(value, signature) == signature  # equal values, equal signatures
        assert by_signature.setdefault(signature, value) == value  # and no two values share one
    assert len(by_value) < len(values) / 2  # equal values did come up
    # a kid's signature and an edge row of the same numbers are not confused (lengths are hashed)
    head = ("Linear", None, None)
    one_kid = _call_signature(head, np.array([1, 2, 3], dtype=np.uint64), np.zeros((0, 3), dtype=np.int64))
    one_edge = _call_signature(head, np.zeros(0, dtype=np.uint64), np.array([[1, 2, 3]], dtype=np.int64))
    assert one_kid != one_edge


def test_text_hashes_are_the_same_for_values_that_cannot_be_hashed():
    shapes = [(2, 3), (2, 3), (4,), ()]
    hashed = _text_hashes(shapes)
    assert hashed[0] == hashed[1] and len(set(hashed.tolist())) == 3
    # a list (as a symbolic size stands for here) cannot be a dict key: every value by its text
    with_list = _text_hashes([*shapes, [5]])
    assert with_list[:4].tolist() == hashed.tolist()
