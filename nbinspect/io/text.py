"""JSON and YAML from untrusted files, within the limits of ``core/limits.py``.

Read with a size cap before parsing; integers of more than ``MAX_INT_DIGITS`` digits,
over-long floats, duplicate keys and nesting deeper than ``MAX_DEPTH`` are refused; YAML
aliases are counted on the composed node graph (each shared node once, memoised) before
anything is constructed, so a 700-byte billion-laughs document costs a few hundred steps.
Every problem is one :class:`CheckpointError` line naming the file.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.limits import MAX_DEPTH, MAX_INT_DIGITS, MAX_YAML_NODES, shown
from ..errors import CheckpointError, first_line
from .files import FileHandle

__all__ = ["depth_of", "load_json", "load_yaml", "parse_json", "read_text"]


def read_text(handle: FileHandle, cap: int, what: str = "file") -> str:
    if handle.size > cap:
        raise CheckpointError(f"{handle.where}: {what} of {handle.size:,} bytes is over the limit of {cap:,}")
    data = handle.pread(0, handle.size)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{handle.where}: {what} is not UTF-8 text ({first_line(exc)})") from None


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-')):,} digits, over the limit of {MAX_INT_DIGITS}")
    return int(text)


def _float(text: str) -> float:
    if len(text) > 40:
        raise ValueError(f"a number of {len(text):,} characters, over the limit of 40")
    return float(text)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"key {shown(dup, 80)!r} appears twice")
    return out


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def depth_of(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of plain JSON data, walked without recursion (stops past `limit`)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, d = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, d)
            if deepest > limit:
                return deepest
            stack.extend((v, d + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def parse_json(text: str | bytes, where: str, what: str = "JSON", allow_nan: bool = False) -> Any:
    """`text` as JSON within the limits, or one error line naming `where`."""
    try:
        if allow_nan:
            value = json.loads(text, parse_int=_int, parse_float=_float, object_pairs_hook=_pairs)
        else:
            value = json.loads(
                text, parse_int=_int, parse_float=_float, object_pairs_hook=_pairs, parse_constant=_no_constant
            )
    except RecursionError:
        raise CheckpointError(f"{where}: corrupt {what} (JSON nested too deeply)") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{where}: corrupt {what} ({shown(first_line(exc), 160)})") from None
    if depth_of(value) > MAX_DEPTH:
        raise CheckpointError(f"{where}: corrupt {what} (JSON nested too deeply: over {MAX_DEPTH} levels)")
    return value


def load_json(handle: FileHandle, cap: int, what: str = "JSON", allow_nan: bool = False) -> Any:
    return parse_json(read_text(handle, cap, what), handle.where, what, allow_nan)


def load_yaml(text: str, where: str) -> Any:
    """A YAML document of plain data, aliases counted before construction."""
    import yaml

    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            sizes: dict[int, int] = {}
            stack: list[tuple[Any, int, bool]] = [(node, 0, False)]
            while stack:
                item, depth, done = stack.pop()
                if depth > MAX_DEPTH:
                    raise CheckpointError(f"{where}: YAML nested more than {MAX_DEPTH} levels deep; refused")
                kids = _children(item)
                if not done:
                    if id(item) in sizes:
                        continue
                    stack.append((item, depth, True))
                    stack.extend((k, depth + 1, False) for k in kids if id(k) not in sizes)
                    continue
                sizes[id(item)] = min(1 + sum(sizes.get(id(k), 1) for k in kids), MAX_YAML_NODES + 1)
            if sizes.get(id(node), 1) > MAX_YAML_NODES:
                raise CheckpointError(
                    f"{where}: YAML expands to over {MAX_YAML_NODES:,} nodes through its aliases; refused"
                )
            _check_ints(node, where)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except CheckpointError:
        raise
    except RecursionError:
        raise CheckpointError(f"{where}: YAML nested too deeply") from None
    except Exception as exc:  # yaml.YAMLError, and ValueError of a constructor
        raise CheckpointError(f"{where}: not valid YAML ({shown(first_line(exc), 160)})") from None


def _children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    return []


def _check_ints(node: Any, where: str) -> None:
    import yaml

    stack, seen = [node], set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, yaml.ScalarNode) and item.tag.endswith(":int"):
            digits = sum(c.isdigit() for c in str(item.value))
            if digits > MAX_INT_DIGITS:
                raise CheckpointError(f"{where}: an integer of {digits:,} digits, over the limit of {MAX_INT_DIGITS}")
        stack.extend(_children(item))
