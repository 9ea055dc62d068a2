"""Build `docs/coverage.md` from the rule data: one row per CUDA-side API or pattern, saying what
npu-migrate does (rewrite / diagnostic / nothing needed, with the rule code) and what Huawei's
runtime migration `transfer_to_npu` does.

    python -m codemods.docgen.coverage            # regenerate docs/coverage.md
    python -m codemods.docgen.coverage --check    # exit 1 when it is stale or the data is inconsistent

Every `codemods/data/*.json` with a top-level `entries` list takes part; `problems()` lists
entries whose rule code is not a registered rule (only `"action": "none"` may go without one).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from codemods.data import tables as data
from npu_migrate.core.tables import DataError

DATA = data.DATA
ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUTPUT = ROOT / "docs" / "coverage.md"
ACTIONS = {"rewrite": "rewrite", "flag": "diagnostic", "none": "nothing needed"}
_IDENTIFIER = re.compile(r"^[\w.*]+(, [\w.*]+)*$")


def data_files() -> list[tuple[Path, dict[str, Any]]]:
    """The tables with an `entries` list (read and schema-checked by `codemods.data.tables`)."""
    return [(path, table) for path, table in data.tables(DATA) if isinstance(table.get("entries"), list)]


def _codes(entry: dict[str, Any]) -> list[str]:
    return [c for c in (entry.get("code"), entry.get("shell_code"), entry.get("config_code")) if c]


def problems(registered: set[str] | None = None) -> list[str]:
    """What the table would misreport: a table off its schema, contradicting entries (both from
    `codemods.data.tables`), an entry that acts without a rule code, or a code no rule has."""
    if registered is None:
        from codemods.api.registry import all_rules

        registered = {rule.code for rule in all_rules(plugins=False)}
    found = data.problems(DATA)
    for path in sorted(DATA.glob("*.json")):
        try:
            table = data.read_table(path)
        except DataError:
            continue  # already reported
        for entry in table.get("entries", ()):
            where = f"{path.name}: {entry['cuda']!r}"
            codes = _codes(entry)
            if not codes and entry["action"] != "none":
                found.append(f"{where}: action {entry['action']!r} without a rule code")
            for code in codes:
                if code not in registered:
                    found.append(f"{where}: code {code} is not a registered rule")
    return found


def cell(value: Any, code: bool = False) -> str:
    """A table cell; `code` puts a bare API name in backticks."""
    if value is None or value == "":
        return "—"
    text = str(value).replace("\n", " ").replace("|", "\\|")
    if code and _IDENTIFIER.match(text):
        return ", ".join(f"`{name}`" for name in text.split(", "))
    return text


def action_cell(entry: dict[str, Any]) -> str:
    label = ACTIONS.get(entry.get("action", ""), str(entry.get("action")))
    if entry.get("assignment") == "remove":
        label += "; a plain assignment is removed"
    codes = [entry["code"]] if entry.get("code") else []
    if entry.get("shell_code") and entry["shell_code"] != entry.get("code"):
        codes.append(f"shell {entry['shell_code']}")
    if entry.get("config_code"):
        codes.append(f"config {entry['config_code']}")
    return f"{label} ({'; '.join(codes)})" if codes else label


def row(entry: dict[str, Any]) -> str:
    """The table row of one data entry (the columns of `HEADER`)."""
    cuda = ", ".join([entry.get("cuda") or "", *entry.get("also", ())])
    note = _as_said(entry, (entry.get("note") or entry.get("message") or "").replace("{name}", entry["cuda"]))
    return "| " + " | ".join([cell(cuda, code=True), cell(entry.get("npu"), code=True), action_cell(entry),
                              cell(entry.get("transfer_to_npu")), cell(note)]) + " |"


def _as_said(entry: dict[str, Any], text: str) -> str:
    """An option entry's message as the rules say it about the entry's own example
    (`optim="paged_adamw_32bit"`), its placeholders filled in."""
    if "{value}" not in text and "{option}" not in text:
        return text
    from codemods.data.catalogue import option_message

    example = re.search(r'(\w+)="([^"]+)"', entry["cuda"])
    name = example.group(1) if example else entry.get("option") or ""
    value = example.group(2) if example else (entry.get("values") or [entry["cuda"].split(" (")[0]])[0]
    return option_message({**entry, "message": text}, name, value)


HEADER = ["| CUDA side | NPU equivalent | npu-migrate | transfer_to_npu | Note |", "|---|---|---|---|---|"]


def _title(path: Path, data: dict[str, Any]) -> str:
    return data.get("title") or path.stem.replace("_", " ").capitalize()


def _order(item: tuple[Path, dict[str, Any]]) -> tuple[str, str]:
    codes = [c for e in item[1]["entries"] if isinstance(e, dict) for c in _codes(e)]
    return (min(codes) if codes else "~", item[0].name)


def render() -> str:
    files = sorted(data_files(), key=_order)
    rows = [e for _, data in files for e in data["entries"] if isinstance(e, dict)]
    counts = {label: sum(1 for e in rows if e.get("action") == key) for key, label in ACTIONS.items()}
    lines = [
        "# Coverage: CUDA-side APIs and what happens to them",
        "",
        "<!-- generated by `python -m codemods.docgen.coverage` from codemods/data/*.json; do not edit -->",
        "",
        "One row per CUDA-side API or pattern. **npu-migrate**: what `npu-migrate apply` does "
        "(rewrite, diagnostic, or nothing needed) and which rule does it (`docs/rules/<CODE>.md`). "
        "**transfer_to_npu**: what Huawei's runtime migration `torch_npu.contrib.transfer_to_npu` does "
        "(alias: the CUDA name is rebound to the NPU object; wrap: device arguments are rewritten; "
        "—: not handled).",
        "",
        f"{len(rows)} rows: " + ", ".join(f"{n} {label}" for label, n in counts.items()) + ".",
        "",
    ]
    for path, table in files:
        lines += [f"## {_title(path, table)}", "", f"From `codemods/data/{path.name}`.", "", *HEADER]
        for entry in table["entries"]:
            if not isinstance(entry, dict):
                continue
            lines.append(row(entry))
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codemods.docgen.coverage",
                                     description="Generate docs/coverage.md from the rule data.")
    parser.add_argument("--check", action="store_true", help="fail when the file is stale or the data inconsistent")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="where the table goes")
    args = parser.parse_args(argv)
    issues = problems()
    for issue in issues:
        print(f"coverage: {issue}", file=sys.stderr)
    try:
        text = render()
    except DataError as exc:
        print(f"coverage: {exc}", file=sys.stderr)
        return 2
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else None
        if current != text:
            print(f"{args.output}: stale; run `python -m codemods.docgen.coverage`", file=sys.stderr)
            return 1
        return 1 if issues else 0
    try:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"{args.output}: cannot write: {exc.strerror}", file=sys.stderr)
        return 2
    print(f"wrote {args.output} ({text.count(chr(10))} lines)")
    return 1 if issues else 0


if __name__ == "__main__":
    sys.exit(main())
