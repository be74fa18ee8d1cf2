"""The training-loop side: :class:`ModelAnalysisManager`.

Three lines in a loop::

    manager = ModelAnalysisManager.create(AnalysisConfig(interval=50))
    ...
    optimizer.step()
    manager.on_optimizer_step(model, inputs=batch, optimizer=optimizer)

The manager counts optimizer steps, keeps one snapshot (taken at the first call, or by
:meth:`snapshot`, then after every measurement), and every `interval` steps measures the
delta since the snapshot with each metric plugin. Analysis never stops training: a metric
that raises is logged with its name and the others still report; a model whose trainable
parameters changed is reported once with what to do (``reset()``) and skipped.
"""

from __future__ import annotations

import json
import logging
import math
import time
import warnings
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from os import PathLike
from typing import Any

import pandas as pd
import torch
from torch import nn

from ..schema import TRACK_HISTORY
from .activation import ActivationMetrics
from .change import KEY_ALIASES, ParameterChangeMetrics
from .config import AnalysisConfig
from .delta import ArchitectureChanged, ParameterDelta
from .forward import check_inputs
from .gradient import GradientMetrics, OptimizerStateMetrics
from .metric import AnalysisContext, MetricComputer, call_compute
from .snapshot import ParameterSnapshot
from .sparse import SparseQualityMetrics

__all__ = ["KEY_ALIASES", "ModelAnalysisManager", "TrackingWarning"]

log = logging.getLogger("nbinspect.track")


class TrackingWarning(UserWarning):
    """Analysis was skipped or a metric failed; training goes on."""


class ModelAnalysisManager:
    """Runs metric plugins on the change of a model's weights every `config.interval`
    optimizer steps and keeps their history."""

    def __init__(self, config: AnalysisConfig | None = None, metrics: Iterable[MetricComputer] = ()):
        self.config = config if config is not None else AnalysisConfig()
        if not isinstance(self.config, AnalysisConfig):
            raise TypeError(f"ModelAnalysisManager: config must be an AnalysisConfig, got {type(config).__name__}")
        self.metrics: list[MetricComputer] = []
        for m in metrics:
            self.add_metric(m)
        self.step = 0
        self.errors: list[dict[str, Any]] = []  # {"step", "metric", "error"} of every failure
        self.last_change: pd.DataFrame | None = None  # schema.COMPARE frame of the last measurement
        self._snapshot: ParameterSnapshot | None = None
        self._rows: list[dict[str, Any]] = []
        self._history: pd.DataFrame | None = None
        self._model: weakref.ref[nn.Module] | None = None
        self._views: weakref.WeakSet = weakref.WeakSet()
        self._warned_architecture = False
        self.skipped: dict[str, int] = {}  # metric name -> measurements it was skipped (no or wrong inputs)
        self._said: set[tuple[str, str]] = set()  # (what, error type) already reported once

    @classmethod
    def create(cls, config: AnalysisConfig | None = None) -> ModelAnalysisManager:
        """A manager with the built-in metrics the config enables."""
        c = config if config is not None else AnalysisConfig()
        metrics: list[MetricComputer] = []
        if c.param_change_enabled:
            metrics.append(
                ParameterChangeMetrics(
                    c.param_change_thresholds, c.param_change_per_layer, c.param_change_track_components
                )
            )
        if c.gradient_enabled:
            metrics.append(GradientMetrics(c.gradient_per_module))
        if c.optimizer_state_enabled or c.momentum_enabled:
            metrics.append(OptimizerStateMetrics())
        if c.activation_enabled:
            metrics.append(ActivationMetrics())
        if c.sparse_quality_enabled:
            metrics.append(
                SparseQualityMetrics(
                    c.sparse_quality_thresholds, c.sparse_quality_include_random, c.sparse_quality_seed
                )
            )
        return cls(c, metrics)

    def add_metric(self, metric: MetricComputer) -> ModelAnalysisManager:
        """Add a plugin (chainable)."""
        if not isinstance(metric, MetricComputer):
            raise TypeError(f"add_metric: need a MetricComputer instance, got {type(metric).__name__}")
        self.metrics.append(metric)
        return self

    # ------------------------------------------------------------ the snapshot lifecycle

    @property
    def current_snapshot(self) -> ParameterSnapshot | None:
        return self._snapshot

    def snapshot(self, model: nn.Module, step: int | None = None) -> ParameterSnapshot:
        """Take the baseline now (e.g. before training); the next measurement is relative to it."""
        if step is not None:
            self.step = step
        self._snapshot = None  # free the old copy before making the new one: one snapshot held
        self._snapshot = ParameterSnapshot.take(
            model, self.step, device=self.config.snapshot_device, dtype=self.config.dtype
        )
        self._model = weakref.ref(model)
        return self._snapshot

    def reset(self) -> None:
        """Forget the snapshot (after an architecture change, or unfreezing layers); the next
        call takes a new one. The history is kept."""
        self._snapshot = None
        self.last_change = None
        self._warned_architecture = False

    # ------------------------------------------------------------ the loop's call

    def on_optimizer_step(
        self,
        model: nn.Module,
        inputs: Any = None,
        optimizer: torch.optim.Optimizer | None = None,
        *,
        step: int | None = None,
    ) -> dict[str, float]:
        """Call after each ``optimizer.step()``. Returns ``{}`` between intervals and the
        metrics (flat ``{key: float}``) at each interval. `inputs` (a fixed batch) is what
        sparse-quality and activation metrics run the model on; `step` overrides the
        manager's own count (a Trainer's global step). Never raises: a failure of the
        analysis (a sparse or uninitialised parameter it cannot copy) is recorded in
        ``errors`` and warned about, and training goes on."""
        self.step = self.step + 1 if step is None else int(step)
        try:
            if self._snapshot is None:
                self.snapshot(model)
                return {}
            if self.step % self.config.interval:
                return {}
            return self.measure(model, inputs, optimizer)
        except Exception as exc:  # analysis must never break training
            self._failed("step", exc)
            self._snapshot = None
            return {}

    def measure(
        self, model: nn.Module, inputs: Any = None, optimizer: torch.optim.Optimizer | None = None
    ) -> dict[str, float]:
        """Measure now, whatever the interval, then take a new snapshot."""
        if self._snapshot is None:
            self.snapshot(model)
            return {}
        start = time.perf_counter()
        since = self._snapshot.step
        try:
            delta = ParameterDelta.between(self._snapshot, model, self.step, self._thresholds())
        except ArchitectureChanged as exc:
            self._failed("snapshot", exc, warn=not self._warned_architecture)
            self._warned_architecture = True
            return {}
        except Exception as exc:  # analysis must never break training
            self._failed("delta", exc)
            self.snapshot(model)
            return {}
        context = AnalysisContext(model, self.step, inputs, optimizer)
        out: dict[str, float] = {}
        unusable = self._inputs_problem(inputs)
        for metric in self.metrics:
            name = getattr(metric, "name", type(metric).__name__)
            if unusable is not None and getattr(metric, "needs_inputs", False):
                self.skipped[name] = self.skipped.get(name, 0) + 1
                continue
            try:
                values = call_compute(metric, delta, self._snapshot, context)
                out.update({str(k): float(v) for k, v in values.items()})
            except Exception as exc:
                said = (name, type(exc).__name__)
                self._failed(name, exc, warn=said not in self._said, log_it=said not in self._said)
                self._said.add(said)
        self.last_change = delta.frame
        del delta  # it holds the old snapshot: let it go before the new one is taken
        self.snapshot(model)
        self._rows.append(
            {"step": self.step, "since_step": since, "analysis_seconds": time.perf_counter() - start, **out}
        )
        self._history = None
        for view in list(self._views):
            view.refresh()
        return out

    def _inputs_problem(self, inputs: Any) -> str | None:
        """Why the metrics that run the model cannot run now (said once per manager), or None."""
        needing = [getattr(m, "name", type(m).__name__) for m in self.metrics if getattr(m, "needs_inputs", False)]
        if not needing:
            return None
        if inputs is None:
            if ("inputs", "none") not in self._said:
                self._said.add(("inputs", "none"))
                what = " and ".join("sparse quality" if n == "sparse" else n for n in needing)
                flags = ", ".join(f"{'sparse_quality' if n == 'sparse' else n}_enabled=False" for n in needing)
                # short lines: a saved notebook shows the warning unwrapped (on GitHub one long
                # line widened a 700 px page to 2,600 px)
                warnings.warn(
                    f"nbinspect.track: {what} skipped (no inputs=)\n"
                    "  pass on_optimizer_step() inputs=, the batch the model is called with\n"
                    "  (a tensor, a tuple of positional arguments or a dict of keyword arguments);\n"
                    f"  {flags} turn{'s it' if len(needing) == 1 else ' them'} off;\n"
                    "  later skips are counted in manager.skipped",
                    TrackingWarning,
                    stacklevel=4,
                )
            return "no inputs"
        try:
            check_inputs(inputs)
        except TypeError as exc:
            if ("inputs", "wrong") not in self._said:
                self._said.add(("inputs", "wrong"))
                self._failed(", ".join(needing), exc)
            else:
                self.errors.append({"step": self.step, "metric": ", ".join(needing), "error": f"TypeError: {exc}"})
            return "wrong inputs"
        return None

    def _thresholds(self) -> tuple[float, ...]:
        wanted = {t for m in self.metrics for t in getattr(m, "delta_thresholds", ())}
        return tuple(sorted(wanted | set(self.config.param_change_thresholds)))

    def _failed(self, name: str, exc: Exception, warn: bool = True, log_it: bool = True) -> None:
        message = f"{type(exc).__name__}: {exc}"
        self.errors.append({"step": self.step, "metric": name, "error": message})
        if log_it:
            log.warning("nbinspect.track: %s failed at step %d: %s", name, self.step, message)
        if warn:
            warnings.warn(
                f"nbinspect.track: {name} failed at step {self.step}: {message}", TrackingWarning, stacklevel=3
            )

    # ------------------------------------------------------------ what was measured

    @property
    def model(self) -> nn.Module | None:
        """The model last seen (held weakly)."""
        return self._model() if self._model is not None else None

    @property
    def history(self) -> pd.DataFrame:
        """One row per measurement (schema.TRACK_HISTORY columns, then one float64 column per key)."""
        if self._history is None:
            fixed = TRACK_HISTORY.names
            keys = list(dict.fromkeys(k for row in self._rows for k in row if k not in fixed))
            frame = TRACK_HISTORY.build({k: row[k] for k in fixed} for row in self._rows)
            metrics = pd.DataFrame(
                [[row.get(k, math.nan) for k in keys] for row in self._rows], columns=keys, dtype="float64"
            )
            self._history = pd.concat([frame, metrics], axis=1)
        return self._history.copy()

    def metric_keys(self) -> list[str]:
        """Every metric key measured so far, in the order first reported."""
        return [c for c in self.history.columns if c not in TRACK_HISTORY.names]

    def to_json(self, path: str | PathLike | None = None) -> str:
        """The config, the history (one record per measurement; NaN/inf as null) and the
        errors, as JSON; written to `path` when given."""
        records = [
            {k: (v if not isinstance(v, float) or math.isfinite(v) else None) for k, v in r.items()} for r in self._rows
        ]
        text = json.dumps({"config": asdict(self.config), "history": records, "errors": self.errors}, indent=1)
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        return text

    def plot(self, metrics: Sequence[str] | str | None = None, **kwargs: Any):
        """A matplotlib figure of `metrics` (keys or glob patterns) over steps."""
        from .views import plot_history

        return plot_history(self.history, self._aliased(metrics), **kwargs)

    def _aliased(self, metrics: Sequence[str] | str | None) -> Sequence[str] | str | None:
        """Old key names (``.../mean_abs``) read as the current ones (``.../mean_abs_delta``)."""
        if metrics is None:
            return None
        known = set(self.metric_keys())

        def one(key: str) -> str:
            if key in known:
                return key
            head, _, last = key.rpartition("/")
            new = f"{head}/{KEY_ALIASES[last]}" if last in KEY_ALIASES else key
            return new if new in known else key

        return one(metrics) if isinstance(metrics, str) else [one(k) for k in metrics]

    def widget(self, model: nn.Module | None = None, metrics: Sequence[str] | str | None = None):
        """A live view: the module tree coloured by how much each part moved in the last
        interval, and small plots of `metrics` over steps; it updates as training runs."""
        from .views import TrackWidget

        model = model if model is not None else self.model
        if model is None:
            raise ValueError("widget(): no model seen yet: pass the model, widget(model)")
        view = TrackWidget(self, model, self._aliased(metrics))
        self._views.add(view)
        return view

    def __repr__(self) -> str:
        names = ", ".join(m.name for m in self.metrics) or "no metrics"
        done = f"{len(self._rows)} measurements"
        return f"<ModelAnalysisManager step {self.step}, every {self.config.interval}: {names}; {done}>"
