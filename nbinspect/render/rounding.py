"""Floats kept to 6 significant digits, ``float(f"{v:.6g}")``, for whole arrays at once.

The payload rounds every statistic and histogram edge so (tens of thousands on a large
model); Python's formatting costs ~0.35 µs a value. numpy gives the same double wherever
that can be proven, and the formatting decides the rest:

- ``m = v * 10**k`` (or ``v / 10**-k``), with ``k = 5 - floor(log10|v|)`` and ``|k| <= 22``
  so that the power of ten is exact, is one correctly rounded operation: ``m`` is within
  half an ulp (< 1.2e-10, as ``|m| < 2**20``) of the true scaled value ``t``.
- Where ``100001 <= |m| < 999999``, ``t`` has exactly 6 digits before the point (so the
  exponent was right), and where ``m`` is more than 1e-6 away from a half-integer, the
  nearest integer ``r`` to ``m`` is the nearest to ``t`` and no tie: the digits ``%.6g``
  picks.
- ``r / 10**k`` (or ``r * 10**-k``) of two exact operands is again one correctly rounded
  operation: the double nearest to the decimal ``r × 10**-k``, which is what ``float()``
  of the formatted digits returns.

Every other value (zero, non-finite, tiny, huge, near a boundary or a tie) goes through the
formatting itself. ``tests/test_payload_golden.py`` checks both against each other.
"""

from __future__ import annotations

import numpy as np

__all__ = ["significant"]

_POW10 = np.array([float(10**i) for i in range(23)])  # exact: 10**22 = 2**22 * 5**22, and 5**22 < 2**53


def significant(values: np.ndarray) -> list:
    """``[float(f"{v:.6g}") for v in values]`` of a float array, as Python floats."""
    v = np.asarray(values, dtype=np.float64)
    a = np.abs(v)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        k = 5 - np.floor(np.log10(a))
        ok = np.isfinite(k) & (np.abs(k) <= 22)
        k = np.where(ok, k, 0).astype(np.int64)
        power = _POW10[np.abs(k)]
        up = k >= 0
        m = np.where(up, v * power, v / power)
        r = np.rint(m)
        size = np.abs(m)
        ok &= (size >= 100001) & (size < 999999) & (np.abs(np.abs(m - r) - 0.5) > 1e-6)
        out = np.where(up, r / power, r * power).tolist()
    for i in np.flatnonzero(~ok).tolist():
        out[i] = float(f"{float(v[i]):.6g}")
    return out
