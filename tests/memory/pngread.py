"""A tiny PNG reader (8-bit RGB/RGBA, non-interlaced) to inspect browser screenshots."""

from __future__ import annotations

import struct
import zlib

import numpy as np


def _sequential(line: np.ndarray, previous: np.ndarray, channels: int, kind: int) -> np.ndarray:
    out = bytearray(line.tobytes())
    up = previous.tobytes()
    for x in range(len(out)):
        left = out[x - channels] if x >= channels else 0
        corner = up[x - channels] if x >= channels else 0
        if kind == 3:
            out[x] = (out[x] + (left + up[x]) // 2) & 255
        else:
            p = left + up[x] - corner
            pa, pb, pc = abs(p - left), abs(p - up[x]), abs(p - corner)
            pred = left if pa <= pb and pa <= pc else up[x] if pb <= pc else corner
            out[x] = (out[x] + pred) & 255
    return np.frombuffer(bytes(out), np.uint8)


def read_png(path) -> tuple[int, int, int, list[bytes]]:
    """(width, height, channels, rows of raw pixel bytes)."""
    with open(path, "rb") as handle:
        data = handle.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, header
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], np.zeros(stride, np.uint8)
    for y in range(height):
        start = y * (stride + 1)
        kind = raw[start]
        line = np.frombuffer(raw, np.uint8, stride, start + 1).copy()
        if kind == 1:  # sub: running sum per channel
            line = (np.cumsum(line.reshape(-1, channels), axis=0) & 255).astype(np.uint8).ravel()
        elif kind == 2:  # up
            line = line + previous
        elif kind in (3, 4):  # average / Paeth depend on the reconstructed left byte
            line = _sequential(line, previous, channels, kind)
        rows.append(line.tobytes())
        previous = line
    return width, height, channels, rows


def colours(path, step: int = 3) -> dict[tuple[int, int, int], int]:
    """Distinct RGB colours (sampled every `step` pixels) and their counts."""
    width, height, channels, rows = read_png(path)
    seen: dict[tuple[int, int, int], int] = {}
    for y in range(0, height, step):
        row = rows[y]
        for x in range(0, width * channels, channels * step):
            key = (row[x], row[x + 1], row[x + 2])
            seen[key] = seen.get(key, 0) + 1
    return seen
