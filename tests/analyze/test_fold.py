"""Which repeated blocks fold is decided once (analyze/fold.py), by structure and tensor shapes;
the text tree, the payload (the widget's and the standalone page's JSON) and the widget all
show those folds, and a fold's pooled statistics and histogram are computed once, in Python
(analyze/views.py), from the members' tensors."""

from __future__ import annotations

import copy
import json
import random

import numpy as np
import pytest
import torch
from torch import nn

import nbinspect
from nbinspect import examples
from nbinspect.analyze.fold import fold_repeats
from nbinspect.render.payload import STAT_FIELDS, histogram


def _different_shapes() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8, bias=False), nn.Linear(8, 4, bias=False))


def _equal_linears() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(*(nn.Linear(8, 8) for _ in range(3)))


def test_blocks_of_different_shapes_do_not_fold():
    insp = nbinspect.inspect(_different_shapes())
    assert "×2" not in insp.summary()  # the two Linears have the same type and counts but different shapes
    payload = insp._payload()
    assert payload["folds"]["rows"] == []
    assert "×" not in json.dumps(payload, ensure_ascii=False)  # nor in the JSON the widget and the page get
    assert "×" not in insp.to_json()


def test_equal_blocks_fold_into_one_row():
    insp = nbinspect.inspect(_equal_linears())
    assert "0–2 ×3" in insp.summary()
    folds = insp._payload()["folds"]
    assert (folds["path"], folds["label"], folds["rows"]) == (["0–2"], ["0–2 ×3"], [[1, 2, 3]])


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(6)
        self.experts = nn.ModuleList(nn.Linear(6, 6, bias=False) for _ in range(3))


class _Nested(nn.Module):
    """Blocks that fold, each holding experts that fold: folds inside a fold's members."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(_Block() for _ in range(4))
        self.odd = nn.ModuleList([nn.Linear(6, 6), nn.Linear(6, 6, bias=False)])  # not equal: no fold


@pytest.mark.parametrize(
    "build",
    [lambda: examples.build("tiny_lm"), _Nested, _equal_linears, _different_shapes],
    ids=["tiny_lm", "nested", "equal_linears", "different_shapes"],  # stable ids: the workers must agree
)
def test_the_payload_carries_the_folds_fold_repeats_decides(build):
    insp = nbinspect.inspect(build())
    folds = fold_repeats(insp.frames["layers"], insp.frames["params"])
    payload = insp._payload()["folds"]
    expected = sorted(folds.first.items())
    assert payload["rows"] == [list(fold.rows) for _, fold in expected]
    assert payload["label"] == [fold.label for _, fold in expected]
    names = insp.frames["layers"]["name"].tolist()
    for path, rows in zip(payload["path"], payload["rows"]):
        first, last = names[rows[0]], names[rows[-1]]
        assert path == f"{first}–{last.rpartition('.')[2]}"
    assert insp._views.folds == folds  # and the same decision as the text tree's


def test_nested_folds_each_have_an_entry():
    folds = nbinspect.inspect(_Nested())._payload()["folds"]
    assert folds["path"] == ["blocks.0–3", "blocks.0.experts.0–2", *(f"blocks.{i}.experts.0–2" for i in (1, 2, 3))]


class _Sick(nn.Module):
    """Three equal blocks with NaN, Inf, zeros and a weight tied across two members (counted
    once in the fold, as in a module's own row); `width` 300 makes the weights large (their
    statistics read in chunks, their histograms sampled)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.stem = nn.Linear(3, width)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(width, 256), nn.LayerNorm(256)) for _ in range(3))
        self.blocks[2][0].weight = self.blocks[0][0].weight
        with torch.no_grad():
            self.blocks[1][0].weight[3, 4] = float("nan")
            self.blocks[1][0].weight[5, :7] = float("inf")
            self.blocks[2][0].bias[:50] = 0.0
            self.blocks[0][1].weight.mul_(1.5)


def _reference(tensors: list[torch.Tensor]) -> dict[str, float]:
    """The statistics of the values of `tensors` taken together, in float64 numpy."""
    x = np.concatenate([t.detach().numpy().astype(np.float64).ravel() for t in tensors])
    finite = x[np.isfinite(x)]
    return {
        "numel": x.size,
        "mean": finite.mean(),
        "std": finite.std(),
        "min": finite.min(),
        "max": finite.max(),
        "abs_mean": np.abs(finite).mean(),
        "l2": np.sqrt(np.sum(finite**2)),
        "zeros": np.count_nonzero(x == 0) / x.size,
        "nan": np.count_nonzero(np.isnan(x)),
        "inf": np.count_nonzero(np.isinf(x)),
    }


def _distinct(module: nn.Module, members: list[nn.Module]) -> list[torch.Tensor]:
    seen: dict[int, torch.Tensor] = {}
    for m in members:
        for p in m.parameters():
            seen.setdefault(id(p), p)
    return list(seen.values())


@pytest.mark.parametrize("width", [20, 300])
def test_pooled_statistics_equal_a_float64_reference_of_the_members_tensors(width):
    model = _Sick(width)
    insp = nbinspect.inspect(model)
    views = insp._views
    group = views.fold_groups.set_index("name").loc["blocks.0–2"]
    tensors = _distinct(model, list(model.blocks))
    want = _reference(tensors)
    for field in ("numel", "nan", "inf", "min", "max"):
        assert group[field] == want[field], field
    # small tensors' statistics are float64 sums; a large one's are chunked float32 sums around a
    # shift (nbinspect/analyze/reduce.py), within ~1e-8 of the spread: pooling them adds nothing
    rel, spread = (1e-12, 1e-15) if width < 100 else (1e-7, 1e-7 * want["std"])
    for field in ("mean", "std", "abs_mean", "l2", "zeros"):
        assert group[field] == pytest.approx(want[field], rel=rel, abs=spread), field
    # the histogram is the members' weight matrices taken together (as each member's own row shows)
    matrices = [t for t in tensors if t.dim() >= 2]
    values = np.concatenate([t.detach().numpy().astype(np.float64).ravel() for t in matrices])
    values = values[np.isfinite(values)]
    assert group["hist_scope"] == "weight matrices"
    assert int(np.sum(group["hist_counts"])) == values.size
    assert (group["hist_edges"][0], group["hist_edges"][-1]) == (values.min(), values.max())
    full = histogram(views, "blocks.0–2", "module")  # the detail panel's full-resolution one
    assert full is not None and full["c"] == [int(c) for c in group["hist_counts"]]
    # the payload sends them rounded as every statistic is (6 significant digits)
    payload = insp._payload()["folds"]
    sent = dict(zip(STAT_FIELDS, payload["stats"][0]))
    for field in STAT_FIELDS:
        assert sent[field] == (int(group[field]) if field in ("numel", "nan", "inf") else float(f"{group[field]:.6g}"))
    assert payload["problems"] == ["NaN, Inf"] and payload["problem_tensors"] == [1]
    assert sum(payload["hist"][0]["c"]) == values.size


def test_a_fold_with_no_weight_matrices_shows_all_its_values():
    torch.manual_seed(2)
    model = nn.Sequential(*(nn.LayerNorm(5) for _ in range(4)))
    with torch.no_grad():
        for i, norm in enumerate(model):
            norm.weight.add_(i)
    insp = nbinspect.inspect(model)
    group = insp._views.fold_groups.iloc[0]
    want = _reference(list(model.parameters()))
    assert group["hist_scope"] == "all values"
    assert int(np.sum(group["hist_counts"])) == want["numel"]
    assert group["mean"] == pytest.approx(want["mean"], rel=1e-12)
    assert group["std"] == pytest.approx(want["std"], rel=1e-12)


def test_the_pooled_statistics_are_the_parent_roll_up_when_the_members_are_all_of_it():
    insp = nbinspect.inspect(examples.build("tiny_lm"))
    group = insp._views.fold_groups.set_index("name").loc["blocks.0–1"]
    blocks = insp.frames["stats_by_module"].set_index("name").loc["blocks"]
    for field in ("numel", "nan", "inf", "min", "max"):
        assert group[field] == blocks[field]
    for field in ("mean", "std", "abs_mean", "l2", "zeros"):
        assert group[field] == pytest.approx(blocks[field], rel=1e-13)
    counts, edges = insp._views.matrices["blocks"]
    assert np.array_equal(group["hist_counts"], counts) and np.array_equal(group["hist_edges"], edges)


def test_without_statistics_a_fold_is_its_members_and_label():
    folds = nbinspect.inspect(examples.build("tiny_lm"), stats=False)._payload()["folds"]
    assert folds == {"path": ["blocks.0–1"], "label": ["0–1 ×2"], "rows": [[4, 14]]}


def _reference_folds(layers, params) -> tuple[dict[int, tuple], set[int]]:
    """Runs and hidden rows found directly: each member's structure compared recursively, each
    number compared with the one before it, each member's subtree collected on its own."""
    names, types = layers["name"].tolist(), layers["type"].tolist()
    kids: dict[int, list[int]] = {i: [] for i in range(len(names))}
    for i, parent in enumerate(layers["parent"].tolist()):
        if i:
            kids[names.index(parent)].append(i)
    own = {i: [] for i in range(len(names))}
    for name, module, shape, dtype, grad in zip(
        *(params[c].tolist() for c in ("name", "module", "shape", "dtype", "requires_grad"))
    ):
        own[names.index(module)].append((name.rpartition(".")[2], tuple(shape), dtype, bool(grad)))

    def structure(i: int) -> tuple:
        local = [names[c].rpartition(".")[2] for c in kids[i]]
        return (
            types[i],
            tuple(own[i]),
            tuple(("#" if k.isdigit() else k, structure(c)) for k, c in zip(local, kids[i])),
        )

    def subtree(i: int) -> set[int]:
        return {i}.union(*(subtree(c) for c in kids[i]))

    first, hidden = {}, set()
    for i in kids:
        rows = kids[i]
        a = 0
        while a < len(rows):
            b = a + 1
            while (
                b < len(rows)
                and names[rows[a]].rpartition(".")[2].isdigit()
                and structure(rows[b]) == structure(rows[a])
                and names[rows[b]].rpartition(".")[2] == str(int(names[rows[b - 1]].rpartition(".")[2]) + 1)
            ):
                b += 1
            if b - a >= 2:
                first[rows[a]] = tuple(rows[a:b])
                hidden |= set().union(*(subtree(m) for m in rows[a + 1 : b]))
            a = b
    return first, hidden


def _random_tree(rng) -> nn.Module:
    def block(depth: int) -> nn.Module:
        if depth == 0 or rng.random() < 0.4:
            return rng.choice([lambda: nn.Linear(4, 4), lambda: nn.Linear(4, 4, bias=False), nn.ReLU])()
        n = rng.randint(1, 5)
        numbers = sorted(rng.sample(range(7), n)) if rng.random() < 0.3 else range(n)  # gaps break runs
        same = rng.random() < 0.6  # equal members (a run) or each its own
        made = block(depth - 1)
        children = {str(k): copy.deepcopy(made) if same else block(depth - 1) for k in numbers}
        if rng.random() < 0.2:
            children["head"] = block(depth - 1)
        return nn.ModuleDict(children)

    return block(3)


def test_fold_repeats_equals_a_direct_search_on_random_trees():
    rng = random.Random(0)
    runs = nested = 0
    for _ in range(60):
        insp = nbinspect.inspect(_random_tree(rng), stats=False)
        folds = fold_repeats(insp.frames["layers"], insp.frames["params"])
        first, hidden = _reference_folds(insp.frames["layers"], insp.frames["params"])
        assert {row: fold.rows for row, fold in folds.first.items()} == first
        assert folds.hidden == hidden
        runs += len(first)
        nested += any(insp.frames["layers"]["is_leaf"].tolist()[row] is False for row in first)
    assert runs > 60 and nested > 10  # runs of leaves and of blocks were both checked


def _plain_fold_repeats(layers, params):
    """The plain search fold_repeats replaced (tuples of tensors hashed per row, each sibling
    compared in a Python loop), kept here as the reference for every field of its result."""
    names = layers["name"].tolist()
    index = {name: i for i, name in enumerate(names)}
    children: list[list[int]] = [[] for _ in names]
    for i, parent in enumerate(layers["parent"].tolist()):
        if parent in index:
            children[index[parent]].append(i)
    own: list[list[tuple]] = [[] for _ in names]
    if params is not None and not params.empty:
        columns = (params[c].tolist() for c in ("name", "module", "shape", "dtype", "requires_grad"))
        for name, module, shape, dtype, grad in zip(*columns):
            if module in index:
                shape = shape if type(shape) is tuple else None if shape is None else tuple(shape)
                own[index[module]].append((name[len(module) + 1 :] if module else name, shape, dtype, bool(grad)))
    keys = [name.rpartition(".")[2] for name in names]
    ids: dict[tuple, int] = {}
    signature, stop = [0] * len(names), list(range(1, len(names) + 1))
    for i in range(len(names) - 1, -1, -1):
        parts = tuple(("#" if keys[c].isdigit() else keys[c], signature[c]) for c in children[i])
        signature[i] = ids.setdefault((layers["type"].iloc[i], tuple(own[i]), parts), len(ids))
        if children[i]:
            stop[i] = max(stop[i], stop[children[i][-1]])
    first, hidden = {}, set()
    for kids in children:
        a = 0
        while a < len(kids):
            b = a + 1
            if keys[kids[a]].isdigit():
                number = int(keys[kids[a]]) + 1
                while b < len(kids) and signature[kids[b]] == signature[kids[a]] and keys[kids[b]] == str(number):
                    b, number = b + 1, number + 1
            if b - a >= 2:
                label = f"{keys[kids[a]]}–{keys[kids[b - 1]]} ×{b - a}"
                first[kids[a]] = (label, b - a, tuple(kids[a:b]), stop[kids[b - 1]])
                for member in kids[a + 1 : b]:
                    todo = [member]
                    while todo:
                        hidden.add(todo[-1])
                        todo += children[todo.pop()]
            a = b
    return first, hidden


class _Numbered(nn.Module):
    """Children numbered as a ModuleDict may hold them: leading zeros, gaps, huge numbers,
    dtypes and trainability that differ, a module's own parameter beside its children."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(3))
        self.a = nn.ModuleDict({k: nn.Linear(3, 3) for k in ("00", "01", "2", "4", "5")})
        self.b = nn.ModuleDict({str(2**70 + k): nn.Linear(3, 3) for k in range(3)})
        self.c = nn.ModuleList(nn.Linear(3, 3) for _ in range(5))
        self.c[2].double()
        self.c[4].weight.requires_grad_(False)
        self.d = nn.ModuleList(nn.BatchNorm1d(3) for _ in range(3))  # buffers after parameters


@pytest.mark.parametrize(
    "build",
    [lambda: examples.build("tiny_lm"), _Nested, _equal_linears, _different_shapes, _Numbered],
    ids=["tiny_lm", "nested", "equal_linears", "different_shapes", "numbered"],
)
def test_fold_repeats_equals_the_plain_search(build):
    insp = nbinspect.inspect(build(), stats=False)
    layers, params = insp.frames["layers"], insp.frames["params"]
    variants = [
        params,
        None,
        params.iloc[::-1],  # not by module: reordered
        params.assign(shape=[list(s) for s in params["shape"]]),  # lists where tuples were
        params.iloc[1:],  # a module with fewer tensors than its siblings
    ]
    for p in variants:
        folds = fold_repeats(layers, p)
        first, hidden = _plain_fold_repeats(layers, p)
        assert {row: tuple(fold) for row, fold in folds.first.items()} == first
        assert list(folds.first) == list(first)  # in the same order
        assert folds.hidden == hidden
    if build is _Numbered:
        labels = {fold.label for fold in fold_repeats(layers, params).first.values()}
        assert labels >= {"01–2 ×2", "4–5 ×2", f"{2**70}–{2**70 + 2} ×3", "0–1 ×2", "0–2 ×3"}


def test_fold_repeats_equals_the_plain_search_on_random_trees():
    rng = random.Random(1)
    for _ in range(40):
        insp = nbinspect.inspect(_random_tree(rng), stats=False)
        layers, params = insp.frames["layers"], insp.frames["params"]
        folds = fold_repeats(layers, params)
        assert ({row: tuple(fold) for row, fold in folds.first.items()}, folds.hidden) == _plain_fold_repeats(
            layers, params
        )
