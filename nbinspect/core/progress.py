"""Progress bars that leave nothing behind in a saved notebook.

tqdm.auto draws an ipywidgets bar in a notebook: saved, it reads "Error displaying widget:
model not found" or the bar frozen where it was ("weight stats: 81%"). In a kernel the bar
here is one text output updated in place (a display id) and emptied when the bar closes;
in a terminal it is tqdm's own.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from typing import Any

from tqdm.std import tqdm as _std_tqdm

__all__ = ["NotebookBar", "progress_bar"]


class _Sink:
    """Where tqdm writes its carriage returns in a notebook: nowhere (the display holds the bar)."""

    def write(self, _: str) -> None:
        pass

    def flush(self) -> None:
        pass


class NotebookBar(_std_tqdm):
    """tqdm's text bar as a notebook output updated in place; ``leave=False`` empties the
    output when the bar closes, so nothing stale is saved."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("file", _Sink())
        kwargs.setdefault("ncols", 100)
        super().__init__(*args, **kwargs)

    @staticmethod
    def status_printer(file: Any) -> Callable[[str], None]:
        shown: list[str] = []  # the display id, once the first text is shown

        def show(text: str) -> None:
            from IPython.display import display, update_display

            data = {"text/plain": text.strip()} if text.strip() else {}
            if not shown:
                if not data:
                    return
                shown.append(f"nbinspect-progress-{uuid.uuid4().hex}")
                display(data, raw=True, display_id=shown[0])
            else:
                update_display(data, raw=True, display_id=shown[0])

        return show


def progress_bar(**kwargs: Any) -> _std_tqdm:
    """A tqdm bar: :class:`NotebookBar` in a kernel, tqdm's terminal bar elsewhere."""
    cls = NotebookBar if "ipykernel" in sys.modules and _in_kernel() else _std_tqdm
    return cls(**kwargs)


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None
