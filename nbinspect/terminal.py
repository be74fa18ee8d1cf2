"""Text that cannot drive a terminal: names and metadata read from files are shown through
these before they reach a terminal (CLI, text summaries, error lines). HTML output escapes
markup on its own."""

from __future__ import annotations

__all__ = ["safe_lines", "safe_text"]

_CONTROLS = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]}
_CONTROLS.update({c: f"\\u{c:04x}" for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F]})


def safe_text(text: object, limit: int | None = None) -> str:
    """`text` as one line that cannot drive a terminal: C0/C1 controls (ESC, BEL, newline),
    DEL, bidi overrides and lone surrogates are shown as escapes; longer than `limit`
    characters, it is cut in the middle."""
    s = text if isinstance(text, str) else str(text)
    if _has_surrogates(s):
        try:
            s = s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a lone surrogate that is not an undecodable byte
            s = s.encode("utf-8", "backslashreplace").decode("utf-8")
    s = s.translate(_CONTROLS)
    if limit is not None and len(s) > limit:
        half = (limit - 1) // 2
        s = f"{s[:half]}\u2026{s[-half:]}"
    return s


def _has_surrogates(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def safe_lines(text: str) -> str:
    """`text` with its line breaks kept and every other control character escaped."""
    return "\n".join(safe_text(line) for line in text.split("\n"))
