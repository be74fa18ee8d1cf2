"""The columns of every frame nbinspect produces: the one place their names and dtypes live.

Analyzers build frames with :meth:`FrameSchema.build`, which refuses unknown or missing
columns, so a frame can never drift from what is written here. Renderers, the widget,
JSON export and the tests read column names from these frames. The declarations live in
the modules of this package (how a frame is built in ``frame.py``; the core frames of a model
in ``model.py``; the graph, compare and values frames; the totals); this module names them all.
"""

from __future__ import annotations

from .compare import COMPARE, COMPARE_GROUPS, COMPARE_STATUSES, DELTA_HIST, EXPERT_CHANGES, TRACK_HISTORY
from .frame import Column, FrameSchema, unit_of
from .frame import is_missing as is_missing
from .graph import GRAPH, GRAPH_NODES
from .model import (
    BUFFER,
    BY_TYPE,
    ENGINE_COMPONENTS,
    FLOW,
    LAYERS,
    MEMORY,
    MEMORY_COMPONENTS,
    MOE,
    PARAMETER,
    PARAMS,
    TRACE_COLUMNS,
)
from .model import UNKNOWN_TYPE as UNKNOWN_TYPE
from .totals import ENGINE_TOTALS, MOE_TOTALS, STRUCTURE_TOTALS, TOTALS, TRACE_TOTALS
from .values import HEALTH, LOCATE, STATS
from .values import histogram_groups as histogram_groups
from .values import is_array as is_array

__all__ = [
    "BUFFER",
    "BY_TYPE",
    "COMPARE",
    "COMPARE_GROUPS",
    "COMPARE_STATUSES",
    "DELTA_HIST",
    "ENGINE_COMPONENTS",
    "ENGINE_TOTALS",
    "EXPERT_CHANGES",
    "FLOW",
    "FRAMES",
    "FRAME_KEYS",
    "GRAPH",
    "GRAPH_NODES",
    "HEALTH",
    "LAYERS",
    "LOCATE",
    "MEMORY",
    "MEMORY_COMPONENTS",
    "MOE",
    "MOE_TOTALS",
    "PARAMETER",
    "PARAMS",
    "STATS",
    "STRUCTURE_TOTALS",
    "TOTALS",
    "TRACE_COLUMNS",
    "TRACE_TOTALS",
    "TRACK_HISTORY",
    "Column",
    "FrameSchema",
    "unit_of",
]


FRAMES: dict[str, FrameSchema] = {
    f.name: f
    for f in (
        PARAMS,
        LAYERS,
        BY_TYPE,
        FLOW,
        GRAPH,
        GRAPH_NODES,
        MEMORY,
        COMPARE,
        COMPARE_GROUPS,
        STATS,
        HEALTH,
        ENGINE_COMPONENTS,
        MOE,
        EXPERT_CHANGES,
        LOCATE,
    )
}
# The frames an Inspection or Comparison holds, by key, and the schema each follows (a test
# checks every frame any analysis returns against it).
FRAME_KEYS: dict[str, FrameSchema] = {
    **FRAMES,
    "delta_hist": DELTA_HIST,
    "stats_by_module": STATS,
    "stats_a": STATS,
    "stats_b": STATS,
    "components": ENGINE_COMPONENTS,
}
