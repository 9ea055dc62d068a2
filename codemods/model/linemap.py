"""Which original line each line of a rewritten text came from.

A rewrite changes a few statements of a long file; aligning the two texts with difflib alone costs
time quadratic in the file's length (5.9 s over torch's 152 rewritten files). Lines that occur
once in each text and keep their order anchor the alignment (patience diff); the shared prefix and
suffix of each gap between anchors are matched directly, and only the small rest goes to
difflib. On those 152 files the result is identical line for line, in 0.4 s.
"""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Callable

from codemods.model.imports import split_lines

# a gap between anchors larger than this (old lines x new lines) is mapped as one replaced block
# instead of being aligned by difflib: bounded time on pathological input
_MAX_GAP_PRODUCT = 250_000


def line_map(old: str, new: str) -> Callable[[int], int]:
    """new line number -> the original line it came from; a line the rewrite added maps to the
    original line at that place (1-based both sides)."""
    if old == new:
        return lambda line: line
    a, b = split_lines(old), split_lines(new)
    mapping: dict[int, int] = {}
    a_low = b_low = 0
    for i, j in [*_anchors(a, b), (len(a), len(b))]:
        _align_gap(mapping, a, b, a_low, i, b_low, j)
        if i < len(a):
            mapping[j + 1] = i + 1
        a_low, b_low = i + 1, j + 1
    return lambda line: mapping.get(line, line)


def _anchors(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    """(old index, new index) of lines unique in both texts, the longest chain in order on both
    sides."""
    where_a: dict[str, int] = {}
    for i, line in enumerate(a):
        where_a[line] = -1 if line in where_a else i
    where_b: dict[str, int] = {}
    for j, line in enumerate(b):
        where_b[line] = -1 if line in where_b else j
    # in order of the new index: a dict keeps the order of first insertion
    pairs = [(where_a[line], j) for line, j in where_b.items() if j >= 0 and where_a.get(line, -1) >= 0]
    # the longest run of increasing old indexes, by patience sorting
    tails: list[int] = []  # smallest old index ending a run of each length
    tail_pair: list[int] = []  # the pair (its index in `pairs`) that ends it
    before: list[int | None] = [None] * len(pairs)
    for k, (i, _) in enumerate(pairs):
        at = bisect.bisect_left(tails, i)
        before[k] = tail_pair[at - 1] if at else None
        if at == len(tails):
            tails.append(i)
            tail_pair.append(k)
        else:
            tails[at] = i
            tail_pair[at] = k
    chain: list[tuple[int, int]] = []
    step = tail_pair[-1] if tail_pair else None
    while step is not None:
        chain.append(pairs[step])
        step = before[step]
    return chain[::-1]


def _align_gap(mapping: dict[int, int], a: list[str], b: list[str],
               a_low: int, a_high: int, b_low: int, b_high: int) -> None:
    while a_low < a_high and b_low < b_high and a[a_low] == b[b_low]:
        mapping[b_low + 1] = a_low + 1
        a_low, b_low = a_low + 1, b_low + 1
    while a_low < a_high and b_low < b_high and a[a_high - 1] == b[b_high - 1]:
        mapping[b_high] = a_high
        a_high, b_high = a_high - 1, b_high - 1
    if b_low == b_high:
        return
    if a_low == a_high or (a_high - a_low) * (b_high - b_low) > _MAX_GAP_PRODUCT:
        _map_block(mapping, a_low, a_high, b_low, b_high, equal=False)
        return
    matcher = difflib.SequenceMatcher(None, a[a_low:a_high], b[b_low:b_high], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        _map_block(mapping, a_low + i1, a_low + i2, b_low + j1, b_low + j2, equal=tag == "equal")


def _map_block(mapping: dict[int, int], i1: int, i2: int, j1: int, j2: int, equal: bool) -> None:
    for offset, j in enumerate(range(j1, j2)):
        mapping[j + 1] = (i1 + offset if equal else min(i1 + offset, max(i1, i2 - 1))) + 1
