"""Random module trees with shared modules, tied parameters and partially overlapping views
(hypothesis): the counts are the truth computed from memory addresses (also per subtree),
own counts add up, every path has a row, the JSON validates, nothing changes; a tree with a
cycle is refused."""

from __future__ import annotations

import jsonschema
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import nbinspect

from ..conftest import assert_unchanged, model_state

VALIDATOR = jsonschema.Draft202012Validator(nbinspect.json_schema())


def _addresses(t: torch.Tensor) -> set[int]:
    """The memory address of every element of a strided tensor, from its sizes and strides."""
    offsets = torch.tensor(t.storage_offset())
    for k, (size, stride) in enumerate(zip(t.shape, t.stride())):
        shape = [1] * t.dim()
        shape[k] = size
        offsets = offsets + (torch.arange(size) * stride).view(shape)
    base = t.untyped_storage().data_ptr()
    return {base + int(o) * t.element_size() for o in offsets.reshape(-1)}


@st.composite
def trees(draw) -> tuple[nn.Module, list[nn.Module]]:
    """A DAG of modules (edges only from lower to higher index: no cycles), with modules
    registered at several paths, parameters tied as objects, as views and transposed, and
    parameters and buffers that are slices (contiguous or strided) of one storage, partly
    overlapping each other."""
    n = draw(st.integers(1, 7))
    modules: list[nn.Module] = []
    for _ in range(n):
        if draw(st.booleans()):
            modules.append(nn.Linear(draw(st.integers(1, 4)), draw(st.integers(1, 4)), bias=draw(st.booleans())))
        else:
            modules.append(nn.Module())
    for k in range(1, n):  # a tree: each module under an earlier one
        modules[draw(st.integers(0, k - 1))].add_module(f"c{k}", modules[k])
    for j, k in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3)):
        if j < k:  # the same module at a second path, still acyclic
            modules[j].add_module(f"alias{k}", modules[k])
    linears = [m for m in modules if isinstance(m, nn.Linear)]
    kinds = ["same", "view", "transposed", "fresh", "slice"]
    params, buffers = torch.zeros(6, 4), torch.zeros(6, 4)  # the storages that slices partly share
    for i, how in enumerate(draw(st.lists(st.sampled_from(kinds), max_size=4))):
        holder = modules[draw(st.integers(0, n - 1))]
        if how == "slice" or not linears:
            holder.register_parameter(f"p{i}", nn.Parameter(draw(slices(params))))
        else:
            source = linears[draw(st.integers(0, len(linears) - 1))].weight
            value = {
                "same": source,
                "view": nn.Parameter(source.data),
                "transposed": nn.Parameter(source.data.t()),
                "fresh": nn.Parameter(torch.randn(2)),
            }[how]
            holder.register_parameter(f"p{i}", value)
        if draw(st.booleans()):
            holder.register_buffer(f"b{i}", draw(slices(buffers)))
    return modules[0], modules


@st.composite
def slices(draw, base: torch.Tensor) -> torch.Tensor:
    """A non-empty view of `base`: rows and columns from a start, to an end, with a step (a
    strided view), sometimes transposed or flattened (contiguous ranges of the storage)."""
    if draw(st.booleans()):
        flat = base.view(-1)
        start = draw(st.integers(0, flat.numel() - 1))
        return flat[start : draw(st.integers(start + 1, flat.numel()))]
    index = []
    for size in base.shape:
        start = draw(st.integers(0, size - 1))
        index.append(slice(start, draw(st.integers(start + 1, size)), draw(st.integers(1, 3))))
    view = base[tuple(index)]
    return view.t() if draw(st.booleans()) else view


def _covered(module: nn.Module, kind: str) -> set[int]:
    """Addresses of the elements of `module`'s parameters or buffers, its subtree included."""
    tensors = module.parameters() if kind == "parameter" else module.buffers()
    return {a for t in tensors for a in _addresses(t)}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees())
def test_random_trees_keep_the_invariants(tree):
    model, _ = tree
    before = model_state(model)
    insp = nbinspect.inspect(model, stats=False)
    # unique totals = the distinct element addresses the parameters (buffers) cover, also
    # per subtree; parameters and buffers are slices of different storages
    assert insp.totals["total_params"] == len(_covered(model, "parameter"))
    assert insp.totals["param_bytes"] == 4 * len(_covered(model, "parameter"))
    assert insp.totals["buffer_numel"] == len(_covered(model, "buffer"))
    subtrees = {path: len(_covered(m, "parameter")) for path, m in model.named_modules(remove_duplicate=False)}
    assert dict(zip(insp.layers["name"], insp.layers["params"])) == subtrees
    assert insp.layers["own_params"].sum() == insp.totals["total_params"]
    paths = [path for path, _ in model.named_modules(remove_duplicate=False)]
    assert list(insp.layers["name"]) == paths  # one row per path a module is registered at
    assert insp.totals["total_params_by_path"] == sum(
        p.numel()
        for _, m in model.named_modules(remove_duplicate=False)
        for p in m._parameters.values()
        if p is not None
    )
    VALIDATOR.validate(insp.to_dict())
    assert_unchanged(before, model_state(model))


@settings(max_examples=30, deadline=None)
@given(trees(), st.data())
def test_a_cycle_anywhere_is_refused(tree, data):
    _, modules = tree
    k = data.draw(st.integers(0, len(modules) - 1))
    j = data.draw(st.integers(0, k))  # k hangs below j (or is j): an edge back up closes a cycle
    reachable = {id(m) for m in modules[j].modules()}
    if id(modules[k]) not in reachable:
        return
    modules[k].add_module("back", modules[j])
    with pytest.raises(ValueError, match="module cycle: .* again"):
        nbinspect.inspect(modules[0], stats=False)
