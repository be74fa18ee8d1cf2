"""Resident memory from /proc (Linux): the current and peak resident set of a process, and
the highest one seen while a block runs."""

from __future__ import annotations

import threading
from pathlib import Path

__all__ = ["PeakRSS", "child_pids", "reset_peak", "status"]


def status(key: str, pid: int | str = "self") -> int:
    """Bytes of a ``/proc/<pid>/status`` line: "VmRSS" (resident now) or "VmHWM" (the peak);
    0 when the process has gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) * 1024 for line in text.splitlines() if line.startswith(key + ":")), 0)


def reset_peak() -> bool:
    """Restart this process's VmHWM from what is resident now (False where the kernel has no
    /proc/self/clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def child_pids() -> list[str]:
    """Process ids of this process's children (worker processes)."""
    return [c for task in Path("/proc/self/task").iterdir() for c in (task / "children").read_text().split()]


class PeakRSS:
    """The highest resident set of this process (`peak`, bytes; `base` on entry) and, with
    ``children=True``, of its largest child (`child_peak`), sampled every `interval` seconds
    while the block runs. Sampling sees what VmHWM cannot: a child's peak, or a peak after
    an earlier, higher one."""

    def __init__(self, interval: float = 0.002, children: bool = False) -> None:
        self.interval, self.children = interval, children
        self.base = self.peak = self.child_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        self.peak = max(self.peak, status("VmRSS"))
        if self.children:
            self.child_peak = max([self.child_peak, *(status("VmRSS", c) for c in child_pids())])

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> PeakRSS:
        self.base = self.peak = status("VmRSS")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    @property
    def extra(self) -> int:
        """Bytes above the resident set on entry."""
        return self.peak - self.base
