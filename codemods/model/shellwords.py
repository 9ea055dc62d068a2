"""A small, conservative lexer for launch scripts: commands, words and their quoted parts, with
exact offsets, so rules can edit a name or a value and leave every other byte alone.

It knows what matters for finding environment assignments and launcher arguments: single and
double quotes, backslash escapes, `\\` line continuations, comments (a `#` that starts a word),
`$(...)`, `${...}` and backticks (kept inside one word), command separators and here-documents
(whose lines are lexed one by one, so an apostrophe in a heredoc cannot swallow the file).
It is not a shell: arrays, `case` patterns and the like are just words to it.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

_BREAK = " \t\r\n;&|()<>"
_HEREDOC = re.compile(r"<<(-?)[ \t]*(['\"]?)([A-Za-z0-9_.-]+)\2")


@dataclass
class Segment:
    """One part of a word: `quote` is "", "'" or '"'; start/end delimit its content."""

    quote: str
    start: int
    end: int


@dataclass
class Word:
    start: int
    end: int
    segments: list[Segment] = field(default_factory=list)

    def literal(self, text: str) -> str | None:
        """The word's value after quote removal, or None when it expands anything."""
        parts = []
        for seg in self.segments:
            content = text[seg.start:seg.end]
            if seg.quote != "'" and any(c in content for c in "$`\\"):
                return None
            parts.append(content)
        return "".join(parts)


def lex(text: str, start: int = 0, end: int | None = None) -> list[list[Word]]:
    """The commands of `text[start:end]`, each a list of words (offsets into `text`)."""
    end = len(text) if end is None else end
    commands: list[list[Word]] = []
    current: list[Word] = []
    heredocs: list[tuple[str, bool]] = []
    i = start
    while i < end:
        c = text[i]
        if c in " \t\r":
            i += 1
        elif c == "\\" and text.startswith(("\n", "\r\n"), i + 1):
            i += 2 if text[i + 1] == "\n" else 3  # line continuation: the command goes on
        elif c == "\n":
            if current:
                commands.append(current)
                current = []
            i += 1
            for delimiter, strip_tabs in heredocs:
                i = _heredoc_body(text, i, end, delimiter, strip_tabs, commands)
            heredocs = []
        elif c == "#":
            newline = text.find("\n", i, end)
            i = end if newline < 0 else newline
        elif c in ";&|()":
            if current:
                commands.append(current)
                current = []
            i += 1
        elif c in "<>":
            match = _HEREDOC.match(text, i, end) if text.startswith("<<", i) else None
            if match and not text.startswith("<<<", i):
                heredocs.append((match.group(3), bool(match.group(1))))
                i = match.end()
            else:
                i += 1
        else:
            word, i = _read_word(text, i, end)
            current.append(word)
    if current:
        commands.append(current)
    return commands


def _heredoc_body(text: str, i: int, end: int, delimiter: str, strip_tabs: bool,
                  commands: list[list[Word]]) -> int:
    """Lex each body line on its own until the delimiter line; return the offset after it."""
    while i < end:
        newline = text.find("\n", i, end)
        line_end = end if newline < 0 else newline
        line = text[i:line_end].rstrip("\r")
        if (line.lstrip("\t") if strip_tabs else line) == delimiter:
            return line_end + 1
        commands.extend(lex(text, i, line_end))
        i = line_end + 1
    return end


def _read_word(text: str, i: int, end: int) -> tuple[Word, int]:
    word = Word(i, i)
    plain = -1  # start of the current unquoted run, -1 when none is open

    def close_plain(at: int) -> None:
        nonlocal plain
        if plain >= 0:
            word.segments.append(Segment("", plain, at))
            plain = -1

    while i < end:
        c = text[i]
        if c in _BREAK:
            break
        if c == "'":
            close_plain(i)
            close = text.find("'", i + 1, end)
            close = end if close < 0 else close
            word.segments.append(Segment("'", i + 1, close))
            i = close + 1
            continue
        if c == '"':
            close_plain(i)
            close = _double_quote_end(text, i + 1, end)
            word.segments.append(Segment('"', i + 1, close))
            i = close + 1
            continue
        if plain < 0:
            plain = i
        if c == "$" and text.startswith("$'", i):  # ANSI-C quoting: backslash escapes inside
            i += 2
            while i < end and text[i] != "'":
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif c == "\\":
            if text.startswith(("\n", "\r\n"), i + 1):
                break
            i += 2
        elif c == "$" and text.startswith(("$(", "${"), i):
            i = skip_substitution(text, i, end)
        elif c == "`":
            close = text.find("`", i + 1, end)
            i = end if close < 0 else close + 1
        else:
            i += 1
    i = min(i, end)
    close_plain(i)
    word.end = i
    return word, i


def _double_quote_end(text: str, i: int, end: int) -> int:
    while i < end and text[i] != '"':
        if text[i] == "\\":
            i += 2
        elif text.startswith(("$(", "${"), i):
            i = skip_substitution(text, i, end)
        elif text[i] == "`":
            close = text.find("`", i + 1, end)
            i = end if close < 0 else close + 1
        else:
            i += 1
    return min(i, end)


def skip_substitution(text: str, i: int, end: int) -> int:
    """From `$(` or `${` at i to just after the matching close (quotes inside are skipped)."""
    opener = text[i + 1]
    closer = ")" if opener == "(" else "}"
    depth = 0
    i += 1
    while i < end:
        c = text[i]
        if c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                return i + 1
        elif c == "'" and opener == "(":
            close = text.find("'", i + 1, end)
            i = end if close < 0 else close
        elif c == '"':
            i = _double_quote_end(text, i + 1, end)
        elif c == "\\":
            i += 1
        i += 1
    return end


class LineIndex:
    """Offset -> (1-based line, 1-based column)."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset) - 1
        return line + 1, offset - self.starts[line] + 1
