"""The apply wing's own diagnostic codes (not rules): their doc pages, printed by
`npu-migrate rules CODE` and rendered to docs/rules/CODE.md by the doc generator."""

from __future__ import annotations

CODES: dict[str, str] = {
    "NPU000": """# NPU000 file failed

## What it means
The file could not be migrated and was left exactly as it was: it could not be read or decoded,
it does not parse (for Python, neither by this interpreter nor by LibCST's grammar), or the
rewrite would not have parsed.

## Why
`apply` never writes a file it cannot rewrite completely and correctly; one bad file costs
that file only, the rest of the run goes on.

## Evidence
The message names the file, the line and column where known, and the reason.

## What to do
Fix the syntax or encoding problem it names and run again. If the message says "please report
this as a bug", the file is fine and npu-migrate is not: please report it with the file.
""",
    "NPU001": """# NPU001 unknown code in a suppression comment

## What it means
A `# npu-migrate: ignore[CODE]` comment names a code that no rule has (nor is a prefix of one),
so the comment silences nothing (like ruff's RUF100).

## Why
A typo (`NPU1O1` for `NPU101`) leaves the diagnostic it was meant to silence in place, or
hides that a rule was removed or renamed.

## Evidence
The line and column of the code in the comment; a close known code when there is one.

## What to do
Correct the code (`npu-migrate rules` lists them) or remove the comment. Codes in `# noqa:`
comments are not checked: they may belong to other linters.
""",
    "NPU002": """# NPU002 malformed suppression comment

## What it means
A `# npu-migrate: ignore` comment is not written as `ignore[CODE, ...]` or a bare `ignore`: its
`[` is not closed (`ignore[NPU101,,`), its list is empty (`ignore[]`), an item is not a code
(`ignore[NPU-101]`), or text follows `ignore` directly (`ignore NPU101`, `ignore: NPU101`). Such a
comment silences nothing.

## Why
Read leniently, `ignore[NPU101,,` would be a bare `ignore` and silence every code on its line,
errors included, and `ignore[]` would silence nothing without saying so: either way the comment
would not do what its author asked.

## Evidence
The line and column of the comment's fault, and what is wrong with it.

## What to do
Write `# npu-migrate: ignore[NPU101]` (codes separated by commas or spaces), or a bare
`# npu-migrate: ignore` to silence every code on the line; a reason goes after a second `#`
(`# npu-migrate: ignore[NPU101]  # kept on CUDA on purpose`).
""",
}
