"""PNG files from palette pictures, with the standard library only (zlib, struct): the value
view's last picture of each open heatmap is kept in a saved notebook as an image."""

from __future__ import annotations

import struct
import zlib

import numpy as np

__all__ = ["palette_png"]

MIN_SIDE = 96  # pixels: a 1-row bias or a small matrix is enlarged (whole pixels) to be seen


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _rgba(colour: str) -> tuple[int, int, int, int]:
    c = colour.lstrip("#")
    return int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16), int(c[6:8], 16) if len(c) == 8 else 255


def palette_png(index: np.ndarray, palette: list[str]) -> bytes:
    """An RGBA PNG of `index` (H × W palette indices into `palette`, CSS "#rrggbb[aa]"),
    each side enlarged by a whole factor to at least MIN_SIDE pixels."""
    table = np.array([_rgba(c) for c in palette], np.uint8)
    h, w = index.shape
    fy, fx = -(-MIN_SIDE // h), -(-MIN_SIDE // w)
    image = table[np.repeat(np.repeat(index, fy, axis=0), fx, axis=1)]
    rows = np.concatenate([np.zeros((image.shape[0], 1), np.uint8), image.reshape(image.shape[0], -1)], axis=1)
    header = struct.pack(">IIBBBBB", image.shape[1], image.shape[0], 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
        + _chunk(b"IEND", b"")
    )
