"""The torchinfo-style summary table, rendered from the ``layers`` / ``flow`` frames and totals.

One row per module call in execution order when a forward pass was traced (a module
called again shows ``(recursive)``, as torchinfo does), else one row per module in
pre-order. Then the parameter totals, the FLOPs (and mult-adds), and the sizes:
input, forward/backward pass (output arrays of every call, twice: values and gradients,
torchinfo's estimate), parameters, and their sum.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from .format import format_count, format_shape, is_missing, trainable_status

__all__ = ["summary_table"]

_WIDTHS = (44, 22, 14, 10)
_MB = 1e6  # torchinfo reports sizes in decimal megabytes
_TRAINABLE = {"trainable": "True", "frozen": "False", "partial": "Partial", "": "--"}  # torchinfo's words


def _trainable(trainable: int, frozen: int) -> str:
    return _TRAINABLE[trainable_status(trainable, frozen)]


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
    return f"{'│    ' * (depth - 1)}├─{type_} ({leaf}): {depth}-{position[depth]}"


def _param_cell(row: Any) -> str:
    if row.is_leaf:
        return format_count(row.params) if row.params else "--"
    return format_count(row.own_params) if row.own_params else "--"


def summary_table(name: str, layers: pd.DataFrame, totals: Mapping[str, Any], flow: pd.DataFrame | None) -> str:
    by_name = {r.name: r for r in layers.itertuples(index=False)}
    rule, thin = "=" * sum(_WIDTHS), "-" * sum(_WIDTHS)
    out = [rule, _line(["Layer (type (name): depth-idx)", "Output Shape", "Param #", "Trainable"]), rule]
    position: dict[int, int] = {}
    if flow is not None:
        for call in flow.itertuples(index=False):
            row = by_name[call.name]
            params = "(recursive)" if call.call else _param_cell(row)
            label = _label(call.name, call.type, call.depth, position)
            shape = format_shape(call.output_shapes) if not is_missing(call.output_shapes) else "--"
            out.append(_line([label, shape, params, _trainable(row.trainable_params, row.frozen_params)]))
    else:
        for row in layers.itertuples(index=False):
            label = _label(row.name, row.type, row.depth, position)
            out.append(_line([label, "--", _param_cell(row), _trainable(row.trainable_params, row.frozen_params)]))
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
            f"Input shape: {' '.join(format_shape(s) for s in inputs)}",
            f"Input size (MB): {input_mb:.2f}",
            f"Forward/backward pass size (MB): {pass_mb:.2f}",
            f"Params size (MB): {params_mb:.2f}",
            f"Estimated Total Size (MB): {input_mb + pass_mb + params_mb:.2f}",
        ]
    else:
        out.append(f"Params size (MB): {params_mb:.2f}  (no input shape: pass input_shape for the rest)")
    out.append(rule)
    return "\n".join(out)
