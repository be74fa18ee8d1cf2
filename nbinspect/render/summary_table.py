"""The torchinfo-style summary table, rendered from the ``layers`` / ``flow`` frames and totals.

One row per module call in execution order when a forward pass was traced (a module
called again shows ``(recursive)``, as torchinfo does), else one row per module in
pre-order; rows read ``├─name (Type)``, and Trainable is a count of trainable parameters.
`verbose` 0 leaves the rows out, 2 adds a row per parameter under its module (1 does so
for a model without submodules). Then the parameter totals, the FLOPs (and mult-adds), and
the sizes in MiB (2**20 bytes, as everywhere in nbinspect): input, forward/backward pass
(output arrays of every call, twice: values and gradients, torchinfo's estimate),
parameters, and their sum; then any footer lines (MLX's allocator, a failed pass).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from .format import format_count, format_shape, is_missing

__all__ = ["summary_table"]

_WIDTHS = (44, 22, 14, 12)
_MB = 2**20  # MiB, as the rest of nbinspect (the design's own code divides by 1024 * 1024)


def _trainable(trainable: int, frozen: int, own: bool = False, row: Any = None) -> str:
    if row is not None and not row.is_leaf:  # a container's row counts its own tensors, as Param #
        return "--" if not row.own_params else format_count(min(int(row.own_params), int(trainable)))
    return format_count(int(trainable)) if trainable or frozen else "--"


def _line(cells: list[str]) -> str:
    first, *rest = cells
    return (first.ljust(_WIDTHS[0]) + "".join(c.rjust(w) for c, w in zip(rest, _WIDTHS[1:]))).rstrip()


def _label(name: str, type_: str, depth: int, position: dict[int, int]) -> str:
    position[depth] = position.get(depth, 0) + 1
    for deeper in [d for d in position if d > depth]:
        del position[deeper]
    if depth == 0:
        return type_
    leaf = name.rsplit(".", 1)[-1]
    return f"{'│    ' * (depth - 1)}├─{leaf} ({type_})"


def _tuple(shape: Any) -> str:
    dims = [int(d) for d in shape]
    return "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"


def _param_cell(row: Any) -> str:
    if row.is_leaf:
        return format_count(row.params) if row.params else "--"
    return format_count(row.own_params) if row.own_params else "--"


def _parameter_rows(module: str, depth: int, params: pd.DataFrame | None) -> list[str]:
    if params is None or not len(params):
        return []
    own = params[(params["module"] == module) & (params["kind"] == "parameter")]
    out = []
    for t in own.itertuples(index=False):
        leaf = t.name[len(module) + 1 :] if module else t.name
        trainable = format_count(int(t.numel)) if not is_missing(t.requires_grad) and t.requires_grad else "0"
        label = f"{'│    ' * depth}  {leaf}"
        out.append(_line([label, format_shape(t.shape), format_count(int(t.numel)), trainable]))
    return out


def summary_table(
    name: str,
    layers: pd.DataFrame,
    totals: Mapping[str, Any],
    flow: pd.DataFrame | None,
    verbose: int = 1,
    params: pd.DataFrame | None = None,
    footer: tuple[str, ...] = (),
) -> str:
    by_name = {r.name: r for r in layers.itertuples(index=False)}
    rule, thin = "=" * sum(_WIDTHS), "-" * sum(_WIDTHS)
    out = [rule, _line(["Layer (type)", "Output Shape", "Param #", "Trainable"]), rule]
    position: dict[int, int] = {}
    alone = len(layers) == 1  # a model without submodules: its parameters are the rows
    if verbose and flow is not None:
        for call in flow.itertuples(index=False):
            row = by_name[call.name]
            params_cell = "(recursive)" if call.call else _param_cell(row)
            label = _label(call.name, call.type, call.depth, position)
            shape = format_shape(call.output_shapes) if not is_missing(call.output_shapes) else "--"
            out.append(_line([label, shape, params_cell, _trainable(row.trainable_params, row.frozen_params, row=row)]))
            if verbose == 2 or alone:
                out += _parameter_rows(call.name, call.depth, params)
        called = set(flow["name"])
        for row in layers.itertuples(index=False):  # never called (unused, or after a failed pass)
            if row.name and row.name not in called:
                label = _label(row.name, row.type, row.depth, position)
                trainable = _trainable(row.trainable_params, row.frozen_params, row=row)
                out.append(_line([label, "--", _param_cell(row), trainable]))
    elif verbose:
        for row in layers.itertuples(index=False):
            label = _label(row.name, row.type, row.depth, position)
            trainable = _trainable(row.trainable_params, row.frozen_params, row=row)
            out.append(_line([label, "--", _param_cell(row), trainable]))
            if verbose == 2 or alone:
                out += _parameter_rows(row.name, row.depth, params)
    out += [
        rule,
        f"Total params: {totals['total_params']:,}",
        f"Trainable params: {totals['trainable_params']:,}",
        f"Non-trainable params: {totals['non_trainable_params']:,}",
    ]
    if totals.get("flops") is not None:
        out += [f"Total FLOPs: {totals['flops']:,}", f"Total mult-adds (M): {totals['flops'] / 2 / 1e6:.2f}"]
    out.append(thin)
    params_mb = totals["param_bytes"] / _MB
    if flow is not None:
        inputs = totals.get("input_shapes") or []
        input_mb = totals.get("input_bytes", 0) / _MB
        pass_mb = 2 * totals.get("activation_bytes", 0) / _MB
        out += [
            f"Input shape: {' '.join(_tuple(s) for s in inputs)}",
            f"Input size (MiB): {input_mb:.2f}",
            f"Forward/backward pass size (MiB): {pass_mb:.2f}",
            f"Params size (MiB): {params_mb:.2f}",
            f"Estimated Total Size (MiB): {input_mb + pass_mb + params_mb:.2f}",
        ]
    else:
        out.append(f"Params size (MiB): {params_mb:.2f}  (no input shape: pass input_shape for the rest)")
    out += list(footer)
    out.append(rule)
    return "\n".join(out)
