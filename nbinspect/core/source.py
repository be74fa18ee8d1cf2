"""What every source provides: a module tree and named tensors.

A live torch module, a state_dict, a checkpoint file or an MLX model all become a
:class:`ModelSource`; the analyzers only ever see this shape.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar, overload

from . import overlap


# Entries are values: never changed after they are made (dataclasses.replace makes a changed
# copy). Not frozen=True, which costs 1.4 us more per entry (6x the rest of its making),
# and a model has one entry per tensor and module path.
@dataclass(slots=True)
class TensorEntry:
    """One parameter or buffer at one path."""

    name: str  # dotted path
    module: str  # owning module path, "" for the root
    kind: str  # schema.PARAMETER or schema.BUFFER
    shape: tuple[int, ...] | None  # None when not materialised (lazy parameter)
    dtype: str
    device: str
    numel: int
    nbytes: int
    requires_grad: bool
    storage_key: Hashable  # equal keys mean the same elements in memory
    tensor: Any = field(default=None, repr=False, compare=False)  # a tensor, or a loader for one
    release_hook: Any = field(default=None, repr=False, compare=False)  # drops file pages, if mapped
    # (i0, i1) -> the tensor's slice [i0:i1] along its first axis, reading only those bytes:
    # a file source's way to show a zoomed region without reading the whole tensor.
    rows: Any = field(default=None, repr=False, compare=False)

    def values(self) -> Any:
        """The tensor's values: the tensor itself, or loaded on demand by a lazy source."""
        return self.tensor() if callable(self.tensor) else self.tensor

    def release(self) -> None:
        """Done with the values for now: a memory-mapped file source gives their pages back to
        the OS (they are read from the file again if needed). A no-op for in-memory tensors.
        Streaming loops call it after each tensor so resident memory stays bounded."""
        if self.release_hook is not None:
            self.release_hook()


@dataclass(slots=True)
class ModuleEntry:
    """One module at one path."""

    name: str
    type: str
    is_leaf: bool
    training: bool | None
    attrs: dict[str, Any]
    alias_of: str | None = None  # first path of the same module object
    parent: str | None = None  # the parent's path, where the dotted name does not say it (a child named "a.b")


_Entry = TypeVar("_Entry", ModuleEntry, TensorEntry)


@dataclass(frozen=True)
class Columns(Generic[_Entry]):
    """Entries of one class given as the columns of their first fields (in the class's field
    order, each column a sequence of one value per entry). A backend's walk gathers these at a
    tuple per entry; the structure frames read them as they are, and the entries are made only
    when something reads them (an entry is a Python object: a module's walk makes several)."""

    entry: type[_Entry]
    fields: dict[str, Sequence[Any]]

    def __len__(self) -> int:
        return len(next(iter(self.fields.values())))

    def entries(self) -> tuple[_Entry, ...]:
        return tuple(map(self.entry, *self.fields.values()))


class _Entries(Generic[_Entry]):
    """A field of :class:`ModelSource` given as entries or as :class:`Columns`, and read as
    entries: made from the columns on first read, then kept."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, source: None, owner: Any = None) -> _Entries[_Entry]: ...
    @overload
    def __get__(self, source: ModelSource, owner: Any = None) -> tuple[_Entry, ...]: ...
    def __get__(self, source: ModelSource | None, owner: Any = None) -> Any:
        if source is None:  # the class's own: a field without a default (dataclasses asks)
            raise AttributeError(self.name)
        given = source.__dict__[self.name]
        if type(given) is Columns:
            given = source.__dict__[self.name] = given.entries()
        return given

    def __set__(self, source: ModelSource, value: tuple[_Entry, ...] | Columns[_Entry]) -> None:
        source.__dict__[self.name] = value


# the fields the column views hold (a backend's columns hold at least these, in this order)
_MODULE_FIELDS = ("name", "type", "is_leaf", "training", "attrs", "alias_of", "parent")
_TENSOR_FIELDS = (
    "name",
    "module",
    "kind",
    "shape",
    "dtype",
    "device",
    "numel",
    "nbytes",
    "requires_grad",
    "storage_key",
)


@dataclass(frozen=True)
class ModelSource:
    name: str
    framework: str
    # Either may be given as Columns (see there); reading them gives the entries.
    modules: _Entries[ModuleEntry] = _Entries()  # pre-order, root first
    tensors: _Entries[TensorEntry] = _Entries()  # every path, so shared storage appears more than once
    model: Any = field(default=None, repr=False, compare=False)  # live model, if there is one
    # What a file held besides the weights (epoch, optimizer summary, load report, ...).
    metadata: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # What the backend gathered of the live model while walking it, for a trace that follows
    # at once (nbinspect.trace): the model is walked once, not again by the trace's set-up.
    walk: Any = field(default=None, repr=False, compare=False)
    # Set by sources spread over processes (core/collective.py): how analyzers combine ranks.
    collective: ClassVar[Any] = None

    @functools.cached_property
    def derived(self) -> dict[str, Any]:
        """What analyzers derive from this source and share, each under its own key: a source
        never changes, so one pass over its tensors can serve several frames. A backend may
        put there, under "spans", the byte spans its walk read: the starts and the ends of the
        tensors' memory, two lists in the order of `tensors` (only when it read every tensor's)."""
        return {}

    @functools.cached_property
    def _apart(self) -> bool:
        """Whether the backend's spans prove every tensor's memory apart from every other's
        (no tie, no overlap: most live models), without indexing the storage keys."""
        spans = self.derived.get("spans")
        return spans is not None and len(spans[0]) == len(self.__dict__["tensors"]) and overlap.apart(*spans)

    @functools.cached_property
    def module_columns(self) -> Mapping[str, Sequence[Any]]:
        """The modules' fields as columns (name, type, is_leaf, training, attrs, alias_of,
        parent), without making entries where the backend gave columns."""
        given = self.__dict__["modules"]
        if type(given) is Columns:
            return given.fields
        return {name: [getattr(m, name) for m in given] for name in _MODULE_FIELDS}

    @functools.cached_property
    def tensor_columns(self) -> Mapping[str, Sequence[Any]]:
        """The tensors' fields as columns (name, module, kind, shape, dtype, device, numel,
        nbytes, requires_grad, storage_key), without making entries where the backend gave
        columns. A comprehension reads a field in half the instructions of map(attrgetter)."""
        given = self.__dict__["tensors"]
        if type(given) is Columns:
            return given.fields
        return {
            "name": [t.name for t in given],
            "module": [t.module for t in given],
            "kind": [t.kind for t in given],
            "shape": [t.shape for t in given],
            "dtype": [t.dtype for t in given],
            "device": [t.device for t in given],
            "numel": [t.numel for t in given],
            "nbytes": [t.nbytes for t in given],
            "requires_grad": [t.requires_grad for t in given],
            "storage_key": [t.storage_key for t in given],
        }

    @functools.cached_property
    def _parents(self) -> dict[str, str]:
        columns = self.module_columns
        return {name: up for name, up in zip(columns["name"], columns["parent"]) if up is not None}

    def parent(self, path: str) -> str | None:
        """The parent module's path ('' for a child of the root, None for the root)."""
        found = self._parents.get(path)
        return found if found is not None else parent_path(path)

    def ancestors(self, path: str) -> list[str]:
        """Module paths from the root down to `path` itself, following the real parents
        (a module named with a dot is one step, not two)."""
        if not self._parents:
            return ancestors(path)
        chain = [path]
        while (up := self.parent(chain[-1])) is not None:
            chain.append(up)
        return chain[::-1]

    def unique_tensors(self, kind: str | None = None) -> dict[Hashable, TensorEntry]:
        """Each distinct storage once, at the first path that holds it (tied weights count
        once), optionally only parameters or only buffers; in the order of `tensors`."""
        if kind is None:
            return dict(self._unique)  # a copy: callers may change theirs
        out: dict[Hashable, TensorEntry] = {}
        for t in self.tensors:
            if t.kind == kind:
                out.setdefault(t.storage_key, t)
        return out

    @functools.cached_property
    def _unique(self) -> dict[Hashable, TensorEntry]:
        out: dict[Hashable, TensorEntry] = {}
        for t in self.tensors:
            out.setdefault(t.storage_key, t)
        return out

    def subtree_tensors(self, kind: str | None = None) -> dict[str, dict[Hashable, TensorEntry]]:
        """For every module path, the distinct storages held in its subtree (the module and
        everything below it): the basis of every per-module roll-up."""
        out: dict[str, dict[Hashable, TensorEntry]] = {m.name: {} for m in self.modules}
        chains: dict[str, list[str]] = {}  # a module's tensors share its chain of ancestors
        for t in self.tensors:
            if kind is None or t.kind == kind:
                chain = chains.get(t.module)
                if chain is None:
                    chain = chains[t.module] = self.ancestors(t.module)
                for path in chain:
                    below = out.get(path)  # not setdefault(path, {}): a new dict per call
                    if below is None:
                        below = out[path] = {}
                    below.setdefault(t.storage_key, t)
        return out

    @functools.cached_property
    def overlap_groups(self) -> dict[Hashable, int]:
        """Storage key -> group for the keys whose memory meets another key's (partially
        overlapping views, see :mod:`.overlap`); empty for almost every model."""
        if self._apart:
            return {}
        return overlap.groups(self.unique_tensors())

    @functools.cached_property
    def _repeated_cache(self) -> dict[tuple[Hashable, ...], tuple[list[int], str | None]]:
        return {}

    def _repeated(self, keys: tuple[Hashable, ...]) -> tuple[list[int], str | None]:
        found = self._repeated_cache.get(keys)
        if found is None:
            found = self._repeated_cache[keys] = overlap.repeated(keys)
        return found

    def _overlapping(self, keys: Iterable[Hashable]) -> list[list[Hashable]]:
        """`keys` that fall in one overlap group, group by group, in their order; [] at once
        in the normal case."""
        if not self.overlap_groups:
            return []
        by_group: dict[int, list[Hashable]] = {}
        for key in keys:
            group = self.overlap_groups.get(key)
            if group is not None:
                by_group.setdefault(group, []).append(key)
        return [group for group in by_group.values() if len(group) > 1]

    def repeated_elements(self, entries: Iterable[Hashable]) -> dict[Hashable, int]:
        """For distinct storage keys in counting order (e.g. `unique_tensors()` or one
        module's `subtree_tensors()`): how many elements of each an earlier key already
        covers. Partially overlapping views share some elements; subtracting these counts each
        distinct element once, at the first path that holds it. Empty in the normal case."""
        out = {}
        for group in self._overlapping(entries):
            for key, n in zip(group, self._repeated(tuple(group))[0]):
                if n:
                    out[key] = n
        return out

    def overlaps(self) -> dict[str, str]:
        """Each first path of a storage that shares some (not all) of its elements with
        earlier storages -> those storages' first paths, compared pair by pair in groups of
        up to `overlap.MAX_PAIRWISE` views (past it, how many elements were seen before), or
        why the elements could not be compared exactly."""
        if not self.overlap_groups:
            return {}
        unique = self.unique_tensors()
        out = {}
        for group in self._overlapping(unique):
            repeated, note = self._repeated(tuple(group))
            for i, key in enumerate(group[1:], 1):
                if note:
                    out[unique[key].name] = f"{', '.join(unique[k].name for k in group[:i])} ({note})"
                elif repeated[i] and len(group) > overlap.MAX_PAIRWISE:
                    out[unique[key].name] = f"{repeated[i]:,} elements held by earlier views (one of {len(group):,})"
                elif repeated[i]:
                    earlier = [k for k in group[:i] if self._repeated((k, key))[0][1]]
                    out[unique[key].name] = ", ".join(unique[k].name for k in earlier)
        return out

    def tied(self) -> dict[str, str]:
        """Each path whose storage an earlier path already holds (a tied weight) -> that
        first path. Totals skip these paths; they are the same elements again."""
        if self._apart or len(self._unique) == len(self.tensors):  # every storage at one path (most models): none
            return {}
        first: dict[Hashable, str] = {}
        out = {}
        for t in self.tensors:
            owner = first.setdefault(t.storage_key, t.name)
            if owner != t.name:
                out[t.name] = owner
        return out


def preorder(paths: Iterable[str], parent: Callable[[str], str | None] | None = None) -> list[str]:
    """The module tree the paths span (each with its ancestors, the root "" first) in
    pre-order; siblings keep the order in which they first appear. `parent` gives a
    path's parent (default: what its dots say; a source's own ``parent`` knows that a
    child registered as "a.b" hangs from the root)."""
    up = parent or parent_path
    children: dict[str, list[str]] = {"": []}
    for path in paths:
        new, node = [], path
        while node not in children:  # climb to the first known ancestor
            new.append(node)
            node = up(node) or ""
        for child in reversed(new):
            children[node].append(child)
            children[child] = []
            node = child
    order: list[str] = []
    stack = [""]
    while stack:
        path = stack.pop()
        order.append(path)
        stack.extend(reversed(children[path]))
    return order


def parent_path(path: str) -> str | None:
    """'a.b.c' -> 'a.b', 'a' -> '', '' -> None."""
    if path == "":
        return None
    return path.rpartition(".")[0]


def ancestors(path: str) -> list[str]:
    """Module paths from the root down to `path` itself: 'a.b' -> ['', 'a', 'a.b']."""
    if path == "":
        return [""]
    parts = path.split(".")
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]
