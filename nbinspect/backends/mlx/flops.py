"""FLOPs of MLX calls from shapes, with the formulas of ``torch.utils.flop_counter``.

MLX has no dispatch mode to watch ops, so FLOPs come from two places:

- **Layers** whose work is known from their weights and shapes: Linear, QuantizedLinear (its
  logical weights: ``quantized_matmul`` does the same multiply-adds), and the Conv /
  ConvTranspose layers (a multiply-add is 2 FLOPs; bias not counted, as torch counts
  ``addmm`` and ``convolution``), Embedding and QuantizedEmbedding (a lookup: 0).
- **Functions** patched for the duration of a trace: ``mx.fast.scaled_dot_product_attention``
  (``2·b·h·s_q·s_k·(d_q + d_v)``; MultiHeadAttention runs through it), ``mx.matmul``,
  ``mx.addmm``, ``mx.einsum`` and the ``@`` operator, counted where a module's own code
  calls them (inside a layer counted above they are not counted again).

Anything else (norms, activations, softmax, elementwise arithmetic) is not counted; the
coverage note lists the layers that ran without a formula.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

__all__ = ["LAYER_FORMULAS", "coverage_note", "einsum_flops", "matmul_flops", "sdpa_flops"]


def matmul_flops(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """``a @ b`` with numpy's rules: 1-D operands are a row / a column, batch dims broadcast."""
    if not a or not b:
        return 0  # a scalar product is elementwise
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    batch = _broadcast(a2[:-2], b2[:-2])
    return 2 * math.prod(batch) * a2[-2] * a2[-1] * b2[-1]


def _broadcast(x: tuple[int, ...], y: tuple[int, ...]) -> tuple[int, ...]:
    n = max(len(x), len(y))
    x, y = (1,) * (n - len(x)) + tuple(x), (1,) * (n - len(y)) + tuple(y)
    return tuple(max(p, q) for p, q in zip(x, y))


def sdpa_flops(q: tuple[int, ...], k: tuple[int, ...], v: tuple[int, ...]) -> int:
    """Attention (b, h, s, d): ``q @ kᵀ`` then ``probs @ v``, as torch's ``sdpa_flop_count``."""
    *batch, s_q, d_q = q
    s_k, d_v = k[-2], v[-1]
    return 2 * math.prod(batch) * s_q * s_k * (d_q + d_v)


def einsum_flops(subscripts: str, shapes: list[tuple[int, ...]]) -> int | None:
    """A two-operand contraction costs 2 FLOPs per point of its index space (what torch
    counts for the bmm it lowers to); None for anything else (not counted)."""
    spec = subscripts.replace(" ", "")
    inputs, _, output = spec.partition("->")
    terms = inputs.split(",")
    if len(terms) != 2 or len(shapes) != 2 or "." in spec or not _:
        return None
    sizes: dict[str, int] = {}
    for term, shape in zip(terms, shapes):
        if len(term) != len(shape) or not re.fullmatch(r"[A-Za-z]*", term):
            return None
        for letter, size in zip(term, shape):
            sizes[letter] = max(sizes.get(letter, 1), size)
    if not set(terms[0]) & set(terms[1]) - set(output):
        return None  # an outer product: elementwise work
    return 2 * math.prod(sizes.values())


def _linear(module: Any, inputs: list, outputs: list) -> int:
    out_dims, in_dims = module["weight"].shape
    x = inputs[0].shape
    return 2 * math.prod(x[:-1]) * in_dims * out_dims


def _quantized_linear(module: Any, inputs: list, outputs: list) -> int:
    # quantized_matmul: the packed uint32 rows hold 32 // bits weights per word
    out_dims, packed = module["weight"].shape
    return 2 * math.prod(inputs[0].shape[:-1]) * packed * 32 // module.bits * out_dims


def _conv(module: Any, inputs: list, outputs: list) -> int:
    # MLX is channels-last: x (N, *spatial, C); weight (C_out, *kernel, C_in / groups)
    return 2 * outputs[0].shape[0] * math.prod(outputs[0].shape[1:-1]) * math.prod(module["weight"].shape)


def _conv_transpose(module: Any, inputs: list, outputs: list) -> int:
    # torch counts a transposed convolution over the input positions
    return 2 * inputs[0].shape[0] * math.prod(inputs[0].shape[1:-1]) * math.prod(module["weight"].shape)


def _zero(module: Any, inputs: list, outputs: list) -> int:
    return 0


LAYER_FORMULAS: dict[str, Callable[[Any, list, list], int]] = {
    "Linear": _linear,
    "QuantizedLinear": _quantized_linear,
    "QuantizedEmbedding": _zero,
    "Conv1d": _conv,
    "Conv2d": _conv,
    "Conv3d": _conv,
    "ConvTranspose1d": _conv_transpose,
    "ConvTranspose2d": _conv_transpose,
    "ConvTranspose3d": _conv_transpose,
    "Embedding": _zero,
}


def coverage_note(uncounted: Counter) -> str:
    """One line saying what the MLX FLOP figures include and which layers they leave out."""
    head = (
        "FLOPs from shapes: Linear, Conv, attention (scaled_dot_product_attention) and matmul/addmm/einsum/@ "
        "in a module's own code (torch.utils.flop_counter's formulas)"
    )
    if not uncounted:
        return head + "; every layer that ran was counted."
    listed = ", ".join(f"{name} x{n}" for name, n in sorted(uncounted.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{head}; not counted: {listed}, and other elementwise ops."
