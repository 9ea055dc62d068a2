"""The line map NPU599 uses to report on original lines: the same alignment as difflib's, without
its quadratic cost."""

from __future__ import annotations

import difflib
import random

from codemods.model.imports import split_lines
from codemods.model.linemap import line_map


def _difflib_map(old: str, new: str) -> dict[int, int]:
    mapping = {}
    matcher = difflib.SequenceMatcher(None, split_lines(old), split_lines(new), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for offset, j in enumerate(range(j1, j2)):
            mapping[j + 1] = (i1 + offset if tag == "equal" else min(i1 + offset, max(i1, i2 - 1))) + 1
    return mapping


def _rewrite(rng: random.Random, lines: list[str]) -> list[str]:
    """What the engine does to a file: imports added at the top, some lines rewritten in place,
    a statement split over more lines or joined into fewer."""
    out = ["import torch_npu\n"] if rng.random() < 0.5 else []
    for line in lines:
        roll = rng.random()
        if roll < 0.05:
            out.append(line.replace("cuda", "npu") + "  # changed\n")
        elif roll < 0.07:
            out += [line, "    extra = 1\n"]
        elif roll > 0.98:
            continue
        else:
            out.append(line)
    return out


def _kept(mapping: dict[int, int], old_lines: list[str], new_lines: list[str]) -> int:
    """New lines mapped to an original line with the same text."""
    return sum(1 for n, o in mapping.items() if o <= len(old_lines) and old_lines[o - 1] == new_lines[n - 1])


def test_identical_texts_map_to_themselves() -> None:
    to_old = line_map("a\nb\n", "a\nb\n")
    assert [to_old(n) for n in (1, 2, 7)] == [1, 2, 7]


def test_added_import_shifts_every_later_line() -> None:
    old = "import torch\nx = 1\ny = torch.cuda.synchronize()\n"
    new = "import torch\nimport torch_npu\nx = 1\ny = torch.npu.synchronize()\n"
    to_old = line_map(old, new)
    assert [to_old(n) for n in (1, 2, 3, 4)] == [1, 2, 2, 3]


def test_as_good_an_alignment_as_difflib_on_files_with_repeated_lines() -> None:
    """Where repeated lines make the alignment ambiguous the two may pick different copies; ours
    never keeps fewer lines on an identical original line, and never goes backwards."""
    rng = random.Random(20261125)
    # blank lines, `pass`, `return x` repeat: what makes difflib slow and anchoring ambiguous
    vocabulary = ["\n", "    pass\n", "    return x\n", "x = y.cuda()\n", "    # note\n"]
    identical_maps = 0
    for _ in range(60):
        lines = [rng.choice(vocabulary) if rng.random() < 0.4 else f"v{rng.randrange(10**6)} = {rng.randrange(99)}\n"
                 for _ in range(rng.randrange(5, 300))]
        old, new = "".join(lines), "".join(_rewrite(rng, lines))
        old_lines, new_lines = split_lines(old), split_lines(new)
        to_old = line_map(old, new)
        expected = _difflib_map(old, new)
        ours = {n: to_old(n) for n in expected}

        assert _kept(ours, old_lines, new_lines) >= _kept(expected, old_lines, new_lines)
        assert all(ours[n] <= ours[n + 1] for n in range(1, len(new_lines)))
        identical_maps += ours == expected
    assert identical_maps >= 40  # and mostly the very same choice


def test_a_huge_unaligned_gap_is_mapped_as_one_block() -> None:
    old = "".join(f"a{i}\n" for i in range(1000)) + "same\n" * 2
    new = "".join(f"b{i}\n" for i in range(1000)) + "same\n" * 2
    to_old = line_map(old, new)
    assert to_old(1) == 1 and to_old(1000) == 1000 and to_old(1001) == 1001
