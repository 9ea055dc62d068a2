"""Rule prefilters that skip most text without running the regex.

A prefilter is a regex that every text a rule can act on matches. `re` scans fast only for a
pattern that opens with a literal; an alternation, a `\\b` or a lookbehind at the front makes it try
the pattern at every position (NPU130's `autocast|GradScaler|custom_[fb]wd|\\bamp\\b` cost 1.1 s over
torch's 46 MB, the 58 python prefilters 15 s in all). But each prefilter names plain words that
any match must contain (`cuda.`, `autocast`, ...), and `str.__contains__` finds a word at memory
speed. A `Prefilter` derives those words from the parsed pattern and runs the regex only on a
text that holds one of them: the same answer, sooner.
"""

from __future__ import annotations

import functools
import keyword
import re
from collections.abc import Iterable, MutableMapping
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

# a word shorter than this, or a keyword, is in nearly every text: no use as a gate
_MIN_WORD = 3
_COMMON = frozenset(keyword.kwlist) | {"self", "None", "True", "False", "print", "return", "torch"}
_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", sre.MAX_REPEAT))
# what a set of words is worth: fewer words first, then longer shortest word
Words = frozenset[str]


class Prefilter:
    """A compiled prefilter, cut at its top-level `|` into parts, each with its gate: `words` (every
    match of the part contains one of them; empty: the part can never match), or None where no
    useful words could be derived. Cutting matters: `import ... (?:mark|range)` alone opens with a
    literal, which `re` scans for fast, and `\\.(?:(?<=nvtx\\.)mark)` alone is gated by `nvtx.`."""

    def __init__(self, pattern: str, parts: list[tuple[Words | None, re.Pattern[str]]] | None = None) -> None:
        self.pattern = pattern
        self.parts = parts if parts is not None else [
            (required_words(part), re.compile(literal_first(part))) for part in _top_level_alternatives(pattern)]
        # all parts' words at once: a text with none of them (most statements the engine cuts a
        # file into) is answered by one short loop
        gated = len(self.parts) > 1 and all(words is not None for words, _ in self.parts)
        self.words = _minimal(frozenset().union(*(w for w, _ in self.parts if w))) if gated else None

    @classmethod
    def union(cls, prefilters: Iterable[Prefilter | None]) -> Prefilter | None:
        """One prefilter matching where any of them does; None where one of them is None (matches
        every text)."""
        parts: list[tuple[Words | None, re.Pattern[str]]] = []
        patterns = []
        for prefilter in prefilters:
            if prefilter is None:
                return None
            parts += prefilter.parts
            patterns.append(f"(?:{prefilter.pattern})")
        return cls("|".join(patterns) or r"(?!)", parts)

    def search(self, text: str, seen: MutableMapping[str, bool] | TextWords | None = None) -> bool:
        """Whether the pattern matches somewhere in `text`. `seen`: word -> present (or the text's
        `TextWords`), shared by the prefilters run over one text, so each word is looked for once."""
        if self.words is not None and not _any_word(self.words, text, seen):
            return False
        for words, regex in self.parts:
            if words is None or _any_word(words, text, seen):
                whole = _WHOLE_IDENTIFIER.fullmatch(regex.pattern)
                if whole is not None and isinstance(seen, TextWords) and seen.indexed:
                    if seen.has_identifier(whole.group(1)):  # `\bamp\b`: a set lookup, no scan
                        return True
                elif regex.search(text) is not None:
                    return True
        return False

    def __repr__(self) -> str:
        return f"Prefilter({self.pattern!r})"


def _top_level_alternatives(pattern: str) -> list[str]:
    """`pattern` cut at each `|` outside groups and character classes; the whole pattern where a
    part does not compile alone (a back-reference to another part's group) or flags apply to all."""
    parts, depth, start, i, in_class = [], 0, 0, 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            i += 1 + (pattern[i + 1:i + 2] == "^")
            i += pattern[i:i + 1] == "]"  # a `]` right after `[` or `[^` is a member
            continue
        elif char in "()":
            depth += 1 if char == "(" else -1
        elif char == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    parts.append(pattern[start:])
    if len(parts) == 1 or _global_flags(pattern) != 0:
        return [pattern]
    try:
        for part in parts:
            re.compile(part)
    except re.error:
        return [pattern]
    return parts


# `\bword`: a leading word boundary, then a word of letters, digits and `_`
_LEADING_WORD = re.compile(r"\\b([A-Za-z_]\w*)")


def literal_first(pattern: str) -> str:
    r"""`pattern` with a leading `\bword` spelled `word(?<!\wword)`: the same matches, but the
    pattern opens with a literal, which `re` scans for fast, where a leading `\b` is tried at
    every character (25x slower over torch's sources). A quantifier after the word keeps its last
    letter out of the literal (`\bcudas?`)."""
    found = _LEADING_WORD.match(pattern)
    if found is None:
        return pattern
    word = found.group(1)
    rest = pattern[found.end():]
    if rest[:1] in ("*", "+", "?", "{"):
        word, rest = word[:-1], word[-1] + rest
    if not word or word[0].isdigit():
        return pattern
    return f"{word}(?<!\\w{word}){rest}"


def _global_flags(pattern: str) -> int:
    try:
        flags: int = sre_parse.parse(pattern).state.flags
        return flags & ~int(sre.SRE_FLAG_UNICODE)
    except re.error:
        return -1


def _any_word(words: Words, text: str, seen: MutableMapping[str, bool] | TextWords | None) -> bool:
    if isinstance(seen, TextWords):
        return any(map(seen.has, words))
    for word in words:
        if seen is None:
            if word in text:
                return True
            continue
        present = seen.get(word)
        if present is None:
            present = seen[word] = word in text
        if present:
            return True
    return False


_IDENTIFIER_RUN = re.compile(r"\w+")
_WHOLE_IDENTIFIER = re.compile(r"\\b(\w+)\\b")  # a pattern `\bword\b`: a whole identifier
# below this size a text is scanned word by word; above it, its distinct identifiers first
_INDEXED_SIZE = 16_384


@functools.cache
def _longest_run(word: str) -> tuple[str, bool]:
    """The longest identifier run of a gate word, and whether it is the whole word."""
    runs = _IDENTIFIER_RUN.findall(word)
    longest = max(runs, key=len, default="")
    return longest, longest == word


class TextWords:
    """Which gate words one text holds, each looked for once. A large text is first reduced to its
    distinct identifiers, joined by newlines: ten to a hundred times shorter than the text, and
    searched instead of it. Exact: an identifier-only word is in the text iff it is inside one of
    its identifiers, and a word with punctuation (`cuda.`) is in it only if its longest identifier
    run is; only those that pass are looked for in the text itself. Two hundred gate words over
    torch's 46 MB cost 4.4 s scanned one by one."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.known: dict[str, bool] = {}
        self.indexed = len(text) > _INDEXED_SIZE
        self._identifiers: str | None = None if self.indexed else ""
        self._identifier_set: set[str] = set()

    def has_identifier(self, word: str) -> bool:
        """Whether `word` is one whole identifier of the (indexed) text: `\bword\b` matches."""
        if self._identifiers is None:
            self._index()
        return word in self._identifier_set

    def _index(self) -> None:
        self._identifier_set = set(_IDENTIFIER_RUN.findall(self.text))
        self._identifiers = "\n".join(self._identifier_set)

    def has(self, word: str) -> bool:
        present = self.known.get(word)
        if present is None:
            present = self.known[word] = self._look(word)
        return present

    def _look(self, word: str) -> bool:
        if self._identifiers == "":
            return word in self.text
        if self._identifiers is None:
            self._index()
        assert self._identifiers is not None
        run, whole = _longest_run(word)
        if whole:
            return word in self._identifiers
        if run and run not in self._identifiers:
            return False
        return word in self.text


def required_words(pattern: str) -> Words | None:
    """Words one of which every match of `pattern` contains; frozenset() if it cannot match; None
    if no useful set could be derived (case-insensitive parts, only short words, a group reference)."""
    try:
        parsed = sre_parse.parse(pattern)
    except re.error:
        return None
    if parsed.state.flags & (sre.SRE_FLAG_IGNORECASE | sre.SRE_FLAG_VERBOSE):
        return None
    return _best(_candidates(list(parsed), ignore_case=False))


def _best(candidates: list[Words]) -> Words | None:
    useful = [_minimal(c) for c in candidates if all(_useful(word) for word in c)]
    if not useful:
        return None
    return min(useful, key=lambda c: (len(c), -min(map(len, c), default=0), sorted(c)))


def _minimal(words: Words) -> Words:
    """Without the words that contain another one: where `nvtx.` is, `nvtx` is too."""
    return frozenset(w for w in words if not any(v != w and v in w for v in words))


def _useful(word: str) -> bool:
    return len(word) >= _MIN_WORD and word not in _COMMON


def _candidates(items: list[tuple[Any, Any]], ignore_case: bool) -> list[Words]:
    """Every set of words that a match of this sequence must contain one of."""
    found: list[Words] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            found.append(frozenset({"".join(run)}))
            run.clear()

    for op, value in items:
        if op is sre.LITERAL and not ignore_case:
            run.append(chr(value))
            continue
        flush()
        if op is sre.SUBPATTERN:
            _, add, remove, inner = value
            inner_ignore = (ignore_case or bool(add & sre.SRE_FLAG_IGNORECASE)) and not remove & sre.SRE_FLAG_IGNORECASE
            found += _nested(list(inner), inner_ignore)
        elif op is sre.ATOMIC_GROUP:
            found += _nested(list(value), ignore_case)
        elif op is sre.BRANCH:
            branch = _branch([_candidates(list(b), ignore_case) for b in value[1]])
            if branch is not None:
                found.append(branch)
        elif op in _REPEATS and value[0] >= 1:
            found += _nested(list(value[2]), ignore_case)
        elif op is sre.ASSERT:
            found += _nested(list(value[1]), ignore_case)  # a lookaround's text is in the text too
        elif op is sre.ASSERT_NOT and not list(value[1]):
            found.append(frozenset())  # `(?!)`: matches nowhere
        elif op is sre.GROUPREF:
            continue
    flush()
    return found


def _nested(items: list[tuple[Any, Any]], ignore_case: bool) -> list[Words]:
    best = _best(_candidates(items, ignore_case))
    return [best] if best is not None else []


def _branch(alternatives: list[list[Words]]) -> Words | None:
    """Words for `A|B|...`: each alternative must give some. Words that several alternatives share
    are chosen first (`(?<=cuda\\.)x|(?<=cuda\\.)y|(?<=memory\\.)z` gives `cuda.`, `memory.`), so the
    gate stays short."""
    open_ = [i for i, c in enumerate(alternatives) if frozenset() not in c]  # `(?!)` alternatives add nothing
    if any(_best(alternatives[i]) is None for i in open_):
        return None
    singles = {i: {next(iter(c)) for c in alternatives[i] if len(c) == 1 and _useful(next(iter(c)))}
               for i in open_}
    chosen: set[str] = set()
    left = set(open_)
    while left:
        counts: dict[str, int] = {}
        for i in left:
            for word in singles[i]:
                counts[word] = counts.get(word, 0) + 1
        if not counts:
            break
        word = max(counts, key=lambda w: (counts[w], len(w), w))
        chosen.add(word)
        left = {i for i in left if word not in singles[i]}
    for i in sorted(left):
        chosen |= _best(alternatives[i]) or set()
    return _minimal(frozenset(chosen))
