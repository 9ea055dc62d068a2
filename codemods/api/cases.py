"""A rule's documentation and examples live with the rule (as Fixit has it).

The rule class's docstring is its page: markdown sections "What it does", "Why", "Example",
"Fix safety", "Targets" (one `- **target**: behaviour` line per target). The rule's module
lists its examples in `CASES`: `Valid` sources the rule must leave alone without a word, and
`Invalid` sources with the text the rule makes of them and the codes it records. One harness
(tests/rules/test_rule_cases.py) turns every case into a test; the doc generator renders
them into the rule's page, so the page shows what the tests check.
"""

from __future__ import annotations

import inspect
import re
import sys
from dataclasses import dataclass
from typing import Any

SECTIONS = ("What it does", "Why", "Example", "Fix safety", "Targets")
TARGETS = ("npu", "portable")
_SECTION = re.compile(r"^## (.+)$", re.M)
_TARGET = re.compile(r"^- \*\*([\w-]+)\*\*: (.+)$", re.M)


def unindent(text: str) -> str:
    """A case's text without the indentation common to its non-blank lines. Case texts may be
    indented to sit inside the CASES list, so that no line of an example reads as a top-level
    statement of the rule module (an example's `import torch_npu` is not an import of ours)."""
    lines = text.splitlines(keepends=True)
    cut = min((len(line) - len(line.lstrip(" ")) for line in lines if line.strip()), default=0)
    return "".join(line[min(cut, len(line) - len(line.lstrip(" "))):] for line in lines)


@dataclass(frozen=True)
class Valid:
    """Source the rule must leave unchanged, with no edit and no diagnostic of its code."""

    source: str
    path: str = "example.py"  # the suffix picks the language: `.sh` for shell rules
    with_rules: tuple[str, ...] = ()  # other rules to run alongside (NPU100 acts on their edits)
    options: tuple[tuple[str, str], ...] = ()  # rule options, e.g. (("target", "portable"),)

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", unindent(self.source))


@dataclass(frozen=True)
class Invalid:
    """Source the rule acts on: `after` is the text it makes of it (None: the text stays and the
    rule only reports), `codes` what the run records, edits and diagnostics (default: the
    rule's own code), `lines` where the rule reports (the lines of its code's diagnostics, in
    order; not checked when empty)."""

    source: str
    after: str | None = None
    codes: tuple[str, ...] = ()
    path: str = "example.py"
    with_rules: tuple[str, ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    lines: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", unindent(self.source))
        if self.after is not None:
            object.__setattr__(self, "after", unindent(self.after))


def cases_of(rule: type[Any]) -> list[Valid | Invalid]:
    """The cases listed in the rule's module (`CASES`)."""
    module = sys.modules.get(rule.__module__)
    return list(getattr(module, "CASES", ()))


def doc_of(rule: type[Any]) -> str:
    """The rule's own docstring (not a base class's), dedented; "" without one."""
    own = rule.__dict__.get("__doc__")
    return inspect.cleandoc(own) if own else ""


def sections(doc: str) -> dict[str, str]:
    """`## Title` sections of a docstring, in order: title -> body (stripped)."""
    found: dict[str, str] = {}
    matches = list(_SECTION.finditer(doc))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(doc)
        found[match.group(1).strip()] = doc[match.end():end].strip()
    return found


def targets_of(rule: type[Any]) -> dict[str, str]:
    """Target -> what the rule does there, from the docstring's Targets section."""
    return dict(_TARGET.findall(sections(doc_of(rule)).get("Targets", "")))
