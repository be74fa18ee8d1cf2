"""``finish`` rolls every call's own figures up into its callers', as a sum over the calls
inside it computed the straightforward way."""

from __future__ import annotations

from collections import Counter

import numpy as np

from nbinspect.core.trace import ROW, Call, TraceResult, finish


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


def _row(call: Call) -> list:
    return [getattr(call, field) for field in ROW]


def test_finish_over_rows_gives_the_calls_finish_gives_over_call_objects():
    """The torch recorder keeps rows (lists in ROW order): the result's columns, Calls and
    totals are those of the same calls kept as Call objects, before and after finish."""
    rng = np.random.default_rng(1)
    for n in (0, 1, 2, 30, 200):
        calls = _random_calls(rng, n)
        for c in calls[::3]:
            c.own_backward_flops, c.status, c.output_shapes = int(rng.integers(0, 9)), "interrupted", [(1, 2)]
        rows = [_row(c) for c in calls]
        by_rows = TraceResult(rows, [], None, Counter(), True, True, False)
        assert [_row(c) for c in by_rows.calls] == rows  # before finish: the rows as they are
        by_objects = finish(TraceResult(calls, [], None, Counter(), True, True, False), lambda uncounted: "")
        finish(by_rows, lambda uncounted: "")
        assert by_rows.totals == by_objects.totals
        assert by_rows.columns == by_objects.columns
        everything = (*ROW, "flops", "backward_flops", "activation_bytes")
        for field in everything:
            assert [getattr(c, field) for c in by_rows.calls] == [getattr(c, field) for c in calls], field
        assert by_objects.calls is calls  # the recorder's own objects, figures set
