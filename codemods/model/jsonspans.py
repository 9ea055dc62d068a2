"""Where each value of a JSON document is: its key path and character span, so a text rule can
report `file:line:col` and replace one value with every other byte kept.

`json.loads` says what a document means but not where; this small recursive-descent reader
(RFC 8259, strict: no comments, no trailing commas) records, for every value, the path of keys
and indices that leads to it, the span of the value's text and where its key starts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

Path = tuple[str | int, ...]
_WHITESPACE = " \t\n\r"
_MAX_DEPTH = 200


class JsonSpanError(ValueError):
    """Not JSON; `offset` is where the reader stopped."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


@dataclass(frozen=True)
class Span:
    path: Path
    start: int  # the value's first character
    end: int  # one past its last
    key_start: int  # the key's opening quote (the value's start for array items and the root)
    value: Any


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.spans: list[Span] = []

    def skip(self) -> None:
        while self.at < len(self.text) and self.text[self.at] in _WHITESPACE:
            self.at += 1

    def fail(self, message: str) -> JsonSpanError:
        return JsonSpanError(message, self.at)

    def value(self, path: Path, key_start: int, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise self.fail("nested too deeply")
        self.skip()
        start = self.at
        char = self.text[self.at:self.at + 1]
        if char == "{":
            result: Any = self.object(path, depth)
        elif char == "[":
            result = self.array(path, depth)
        elif char == '"':
            result = self.string()
        else:
            result = self.scalar()
        self.spans.append(Span(path, start, self.at, key_start, result))
        return result

    def object(self, path: Path, depth: int) -> dict[str, Any]:
        self.at += 1
        found: dict[str, Any] = {}
        self.skip()
        if self.text[self.at:self.at + 1] == "}":
            self.at += 1
            return found
        while True:
            self.skip()
            if self.text[self.at:self.at + 1] != '"':
                raise self.fail("expected a key")
            key_start = self.at
            key = self.string()
            self.skip()
            if self.text[self.at:self.at + 1] != ":":
                raise self.fail("expected ':'")
            self.at += 1
            found[key] = self.value(path + (key,), key_start, depth + 1)
            self.skip()
            char = self.text[self.at:self.at + 1]
            self.at += 1
            if char == "}":
                return found
            if char != ",":
                self.at -= 1
                raise self.fail("expected ',' or '}'")

    def array(self, path: Path, depth: int) -> list[Any]:
        self.at += 1
        found: list[Any] = []
        self.skip()
        if self.text[self.at:self.at + 1] == "]":
            self.at += 1
            return found
        while True:
            self.skip()
            found.append(self.value(path + (len(found),), self.at, depth + 1))
            self.skip()
            char = self.text[self.at:self.at + 1]
            self.at += 1
            if char == "]":
                return found
            if char != ",":
                self.at -= 1
                raise self.fail("expected ',' or ']'")

    def string(self) -> str:
        start = self.at
        self.at += 1
        while self.at < len(self.text):
            char = self.text[self.at]
            if char == "\\":
                self.at += 2
                continue
            self.at += 1
            if char == '"':
                try:
                    return str(json.loads(self.text[start:self.at]))
                except ValueError:
                    self.at = start
                    raise self.fail("bad string") from None
        self.at = start
        raise self.fail("unterminated string")

    def scalar(self) -> Any:
        start = self.at
        while self.at < len(self.text) and self.text[self.at] not in _WHITESPACE + ",]}":
            self.at += 1
        try:
            return json.loads(self.text[start:self.at])
        except ValueError:
            self.at = start
            raise self.fail("expected a value") from None


def json_spans(text: str) -> tuple[Any, dict[Path, Span]]:
    """The document and `{path: Span}` of every value in it. Raises JsonSpanError."""
    reader = _Reader(text)
    document = reader.value((), 0, 0)
    reader.skip()
    if reader.at != len(text):
        raise reader.fail("extra data after the document")
    return document, {span.path: span for span in reader.spans}


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1
