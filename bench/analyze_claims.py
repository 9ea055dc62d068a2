"""Re-run `npu-migrate analyze` on real public projects and compare it with a reviewed set of its
claims (bench/analyze_claims.json): each claim was checked by a person reading the code and
marked right or wrong with the reason.

    python bench/analyze_claims.py               # check: flag every claim whose verdict changed
    python bench/analyze_claims.py --propose REPO [--limit N]   # print candidate claims to review

A claim is a finding (code, file, line, and a text its message must contain), an absence (no
finding with that code on that line: advice that must not appear), or a table cell (table
title, file, line, column, expected text). "Verdict changed" means: a claim reviewed as
right that analyze no longer makes (a regression), or a claim reviewed as wrong that it no
longer makes (a fix: update the set). The run also counts CUDA-location rows that contradict
`apply` (the text `apply` writes, diffed line by line): the goal is 0.

The projects are not part of this repository: clone them under CORPUS (default /work/corpus,
as OWNER+NAME); a missing one is skipped with a message. Each claim records the commit it was
reviewed at; a different checkout is reported, since line numbers may have moved.
Exit status: 0 no verdict changed and no contradiction; 1 otherwise; 2 bad usage.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from bench_paths import ROOT

from npu_migrate.analyze import analyze
from npu_migrate.apply.engine import migrate_source

HERE = str(ROOT / "bench")
CLAIMS = os.path.join(HERE, "analyze_claims.json")
CORPUS = os.environ.get("NPU_MIGRATE_CORPUS", "/work/corpus")


def head_commit(path: str) -> str | None:
    try:
        return subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def run_analyze(root: str):
    return analyze([root], jobs=2)


def finding_claims(result, root: str) -> list[dict[str, Any]]:
    return [{"kind": "finding", "code": d.code, "file": os.path.relpath(d.path, root), "line": d.line,
             "message": d.message} for d in result.findings]


def table_cells(result, root: str) -> dict[tuple[str, str, int], list[str]]:
    cells = {}
    for tables in result.sections.values():
        for table in tables:
            for row in table.rows:
                first = str(row[0])
                if first.startswith(root) and first.count(":") >= 1:
                    parts = first.rsplit(":", 2) if first.count(":") >= 2 else first.rsplit(":", 1)
                    try:
                        cells[(table.title, os.path.relpath(parts[0], root), int(parts[1]))] = [str(c) for c in row]
                    except ValueError:
                        continue
    return cells


def still_made(claim: dict[str, Any], findings: list[dict[str, Any]], cells) -> bool:
    """Whether analyze still makes the claim. An `absent` claim is that analyze says nothing
    with this code on this line (advice that must not appear)."""
    if claim["kind"] in ("finding", "absent"):
        made = any(f["code"] == claim["code"] and f["file"] == claim["file"] and f["line"] == claim["line"]
                   and claim.get("says", "") in f["message"] for f in findings)
        return made if claim["kind"] == "finding" else not made
    row = cells.get((claim["table"], claim["file"], claim["line"]))
    return row is not None and claim["says"] in row[claim["column"]]


def contradictions(result, root: str) -> list[str]:
    """CUDA-location rows whose status disagrees with the lines `apply` changes."""
    table = next((t for t in result.sections.get("architecture", []) if t.title == "CUDA code locations"), None)
    rows: dict[str, list[tuple[int, str]]] = {}
    for row in (table.rows if table else []):
        path, line, _ = row[0].rsplit(":", 2)
        rows.setdefault(path, []).append((int(line), row[2]))
    found = []
    for path, located in rows.items():
        if not path.endswith(".py"):
            continue
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        try:
            new = migrate_source(text, path)
            tree = ast.parse(text)
        except (ValueError, SyntaxError):
            continue
        spans = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt) and not hasattr(node, "body"):
                for number in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                    spans.setdefault(number, (node.lineno, node.end_lineno))
        changed = set()
        matcher = difflib.SequenceMatcher(None, text.splitlines(), new.splitlines(), autojunk=False)
        for tag, i1, i2, _, _ in matcher.get_opcodes():
            if tag in ("replace", "delete"):
                changed.update(spans.get(n, (n, n)) for n in range(i1 + 1, i2 + 1))
        for line, status in located:
            if (status == "rewritten by apply") != (spans.get(line, (line, line)) in changed):
                found.append(f"{os.path.relpath(path, root)}:{line}: row says {status!r}")
    return found


def check() -> int:
    data = json.loads(Path(CLAIMS).read_text(encoding="utf-8"))
    by_repo: dict[str, list[dict[str, Any]]] = {}
    for claim in data["claims"]:
        by_repo.setdefault(claim["repo"], []).append(claim)
    verdicts: Counter[str] = Counter()
    changed, contradicting, skipped = [], [], []
    for repo, claims in sorted(by_repo.items()):
        root = os.path.join(CORPUS, repo.replace("/", "+"))
        if not os.path.isdir(root):
            skipped.append(repo)
            print(f"skip {repo}: not cloned at {root} (git clone https://github.com/{repo} {root}; "
                  f"git -C {root} checkout {claims[0]['commit']})")
            continue
        commit = head_commit(root)
        if commit != claims[0]["commit"]:
            print(f"note {repo}: checkout is {commit}, claims were reviewed at {claims[0]['commit']}")
        result = run_analyze(root)
        findings, cells = finding_claims(result, root), table_cells(result, root)
        for claim in claims:
            verdicts[claim["verdict"]] += 1
            if not still_made(claim, findings, cells):
                changed.append(f"{repo} {claim['id']}: reviewed {claim['verdict']}, no longer made "
                               f"({claim['file']}:{claim['line']} {claim.get('code') or claim.get('table')})")
        contradicting += [f"{repo} {c}" for c in contradictions(result, root)]
    reviewed = verdicts["right"] + verdicts["wrong"]
    share = verdicts["right"] / reviewed if reviewed else 0.0
    print(f"claims checked: {reviewed} from {len(by_repo) - len(skipped)} projects "
          f"({len(skipped)} skipped); right: {verdicts['right']} ({share:.1%}), wrong: {verdicts['wrong']}")
    print(f"verdicts changed: {len(changed)}")
    for line in changed:
        print("  " + line)
    print(f"rows contradicting apply: {len(contradicting)}")
    for line in contradicting:
        print("  " + line)
    return 1 if changed or contradicting else 0


def propose(repo: str, limit: int) -> int:
    root = os.path.join(CORPUS, repo.replace("/", "+"))
    if not os.path.isdir(root):
        print(f"{root}: not cloned", file=sys.stderr)
        return 2
    result = run_analyze(root)
    per_code: Counter[str] = Counter()
    for claim in finding_claims(result, root):
        if per_code[claim["code"]] >= limit:
            continue
        per_code[claim["code"]] += 1
        lines = Path(root, claim["file"]).read_text(encoding="utf-8", errors="replace").splitlines() \
            if claim["line"] else []
        context = lines[max(0, claim["line"] - 3):claim["line"] + 2]
        print(json.dumps({**claim, "context": context}, ensure_ascii=False))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--propose", metavar="OWNER/NAME")
    parser.add_argument("--limit", type=int, default=6)
    args = parser.parse_args()
    return propose(args.propose, args.limit) if args.propose else check()


if __name__ == "__main__":
    sys.exit(main())
