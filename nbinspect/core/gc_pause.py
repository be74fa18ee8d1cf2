"""Pause Python's cyclic garbage collector around one analysis.

An analysis allocates a few small objects per module, tensor and call. With a large model
alive, each of the collector's full passes walks every module and tensor object, and those
passes cost more than the analysis itself (frame building on 5,000 modules: ~2x). As
``timeit`` does, the collector is paused for the call and left as it was; nested pauses
leave it to the outermost.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["gc_paused"]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """A context manager, or a decorator: ``@gc_paused()``."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
