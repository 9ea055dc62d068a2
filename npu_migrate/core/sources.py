"""Reading and writing source files without losing anything: PEP 263 encoding, BOM, newline
style and permissions are kept; writes are atomic (temp file in the same folder + rename)."""

from __future__ import annotations

import codecs
import io
import os
import tempfile
import tokenize
from dataclasses import dataclass


class SourceError(Exception):
    """A file that cannot be read as Python source; the message names the file."""


@dataclass(frozen=True)
class SourceText:
    text: str
    encoding: str
    bom: bool

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return codecs.BOM_UTF8 + data if self.bom else data


def decode_source(data: bytes, path: str) -> SourceText:
    bom = data.startswith(codecs.BOM_UTF8)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise SourceError(f"{path}:1:1: cannot decode: {exc}") from None
    if bom:
        data = data[len(codecs.BOM_UTF8):]
        encoding = "utf-8"
    elif encoding == "utf-8-sig":
        encoding = "utf-8"
    try:
        # newline='' semantics: keep \r\n and \r exactly as they are
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise SourceError(f"{path}:1:1: cannot decode as {encoding}: {exc}") from None
    return SourceText(text, encoding, bom)


def read_source(path: str) -> SourceText:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise SourceError(f"{path}:0:0: cannot read: {exc.strerror}") from None
    return decode_source(data, path)


def write_atomic(path: str, data: bytes) -> None:
    """Replace `path` with `data` in one rename, keeping its permission bits. An interrupt
    leaves either the old file or the new one, never half of either."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644 & ~_umask()
    fd, temp = tempfile.mkstemp(prefix=".npu-migrate-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
