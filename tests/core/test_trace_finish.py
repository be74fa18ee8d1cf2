"""``finish`` rolls every call's own figures up into its callers', as a sum over the calls
inside it computed the straightforward way."""

from __future__ import annotations

from collections import Counter

import numpy as np

from nbinspect.core.trace import Call, TraceResult, finish


def _random_calls(rng, n: int) -> list[Call]:
    """Calls in execution order (a parent before its children), several roots, some figures zero."""
    calls: list[Call] = []
    stack: list[Call] = []
    for i in range(n):
        while stack and rng.integers(3) == 0:
            stack.pop()
        parent = stack[-1].index if stack else None
        call = Call(i, f"m{i}", "Linear", len(stack), parent, 0, [], 0)
        call.own_flops = int(rng.integers(0, 5)) * int(rng.integers(2))
        call.own_activation_bytes = int(rng.integers(0, 100))
        calls.append(call)
        stack.append(call)
    return calls


def _inside(calls: list[Call], index: int) -> list[Call]:
    """The call and every call made while it ran, by following parents up."""
    out = []
    for c in calls:
        p: int | None = c.index
        while p is not None and p != index:
            p = calls[p].parent
        if p == index:
            out.append(c)
    return out


def test_finish_sums_every_call_inside():
    rng = np.random.default_rng(0)
    for n in (0, 1, 2, 30, 200):
        calls = _random_calls(rng, n)
        result = TraceResult(calls, [], None, Counter(), True, False, False)
        for _ in range(2):  # twice: the same figures
            finish(result, lambda uncounted: "")
            for c in calls:
                inside = _inside(calls, c.index)
                assert c.flops == sum(x.own_flops for x in inside)
                assert c.activation_bytes == sum(x.own_activation_bytes for x in inside)
                assert c.backward_flops == 0
        root = calls[0] if calls else None
        assert result.totals["flops"] == (root.flops if root else 0)
        assert result.totals["backward_flops"] is None
