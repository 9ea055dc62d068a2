"""Does `npu-migrate apply` make the CUDA-line changes Huawei's engineers made by hand? (issue 25)

    python bench/modelzoo_recall.py [--mirrors /work/.mirror] [--pairs bench/modelzoo_recall.json]
                                    [--lines] [--review bench/modelzoo_recall_review.md]

Pairs: bench/modelzoo_recall.json, ModelZoo ports (Ascend/ModelZoo-PyTorch, pinned) beside the
upstream commit each port's README names, read from fetched bare mirrors
(`<mirrors>/<owner>+<name>/repo`) into a temporary folder; none of them is one of the ten pairs of
bench/tune_modelzoo_pairs.json.

The human's CUDA-line changes. For every Python or shell file present at the same path in both
trees, upstream and port are aligned line by line (difflib, trailing blanks ignored); every upstream
line inside a replaced or deleted block is a line the port changed. It counts when it is a CUDA line
(CUDA_LINE_DEFINITION, printed by the script): outside comments it has
  - an attribute or call `.cuda(`, `torch.cuda`, `.is_cuda`, `cudnn` (name or attribute), or
  - a string literal that is a device or backend string: `cuda`, `cuda:N`, a `cuda:` prefix
    (`'cuda:' + str(i)`, f`cuda:{i}`), `nccl`, a `torch.cuda.*Tensor` type name, or a `CUDA_*`
    environment variable name; in shell files any `cuda`/`CUDA_*`/`nccl` word.
Lines the port changed that are not CUDA lines (an added `NpuFusedAdam`, `TASK_QUEUE_ENABLE`,
`drop_last=True`, a changed learning rate) are Ascend tuning or the engineer's own edits, not the
migration, and are left out by this definition (bench/tune_modelzoo.py measures the tuning).

Our answer. `npu-migrate apply --target npu --output-dir` runs on the upstream copy (JSON output
for the diagnostics); upstream and our output are aligned the same way. Each human CUDA line is
  - matched: we changed it and our line equals the port's after `equivalent()` (whitespace, quotes
    and comments dropped; `torch_npu.npu.` = `torch.npu.`; `"npu:0"` = `"npu"`; `.to("npu")` =
    `.npu()`; `import torch_npu` lines we add are not compared), or both deleted it;
  - different, right / wrong: we changed it otherwise; the reviewer's verdict in the JSON file
    (`verdicts`, keyed by the upstream line and our line) says whether it keeps the NPU meaning;
    an unreviewed one is printed as such and counted as wrong until reviewed;
  - reported: we left it and a diagnostic points at its line;
  - missed: we left it, no diagnostic.
Recall = (matched + different-right) / human CUDA lines; reported lines are not counted as made.
Lines we changed beyond the human's CUDA-line changes (same files: lines the port kept, or changed
for another reason) are listed with their verdict: right, or wrong when the change breaks the
program or changes its meaning (unreviewed counts as wrong). A change that only renames
`torch.cuda.X`/`.cuda(` to `torch.npu.X`/`.npu(` (`api_rename`) is right wherever it stands; the
others carry the reviewer's verdict and reason.
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import re
import subprocess
import sys
import tempfile
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = (".py", ".sh")

CUDA_LINE_DEFINITION = (
    "a CUDA line: outside comments, `.cuda(`, `torch.cuda`, `.is_cuda` or a `cudnn` name, or a string "
    "literal that is a device/backend string (`cuda`, `cuda:N`, a `cuda:` prefix, `nccl`, "
    "`torch.cuda.*Tensor`, a `CUDA_*` variable name); in shell files a `cuda`, `CUDA_*` or `nccl` word")
CODE_MARKERS = re.compile(r"\.cuda\s*\(|\btorch\.cuda\b|\.is_cuda\b|\bcudnn\b")
DEVICE_STRING = re.compile(r"^(?:cuda(?::\d*)?|cuda:\{.*\}|nccl|torch\.cuda\.\w*Tensor|CUDA_[A-Z0-9_]+)$")
SHELL_MARKERS = re.compile(r"\bcuda\b|\bCUDA_[A-Z0-9_]+|\bnccl\b", re.IGNORECASE)


def string_value(token: str) -> str | None:
    """The text of a string literal token, prefixes and quotes dropped (f-string braces kept)."""
    match = re.match(r"^[rbufRBUF]*('''|\"\"\"|'|\")(.*)\1$", token, re.DOTALL)
    return match.group(2) if match else None


def cuda_lines(path: Path) -> set[int]:
    """1-based numbers of the CUDA lines of a file (CUDA_LINE_DEFINITION)."""
    text = path.read_text(errors="replace")
    if path.suffix == ".sh":
        return {n for n, line in enumerate(text.splitlines(), 1)
                if SHELL_MARKERS.search(line.split("#", 1)[0])}
    found: set[int] = set()
    code_by_line: dict[int, list[str]] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                continue
            code_by_line.setdefault(token.start[0], []).append(token.string)
            value = string_value(token.string) if token.type == tokenize.STRING else None
            if value is not None and DEVICE_STRING.match(value.strip()):
                found.add(token.start[0])
    except (tokenize.TokenError, IndentationError, SyntaxError):  # Python 2 files: line text, comments cut
        code_by_line = {n: [line.split("#", 1)[0]] for n, line in enumerate(text.splitlines(), 1)}
        found |= {n for n, parts in code_by_line.items()
                  if any(DEVICE_STRING.match(v) for v in re.findall(r"['\"]([^'\"]*)['\"]", parts[0]))}
    found |= {n for n, parts in code_by_line.items() if CODE_MARKERS.search(" ".join(parts).replace(" . ", "."))}
    return found


def without_comment(line: str) -> str:
    """The line up to a `#` that is outside quotes."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote and line[index - 1] != "\\" else quote
        elif char in "'\"":
            quote = char
        elif char == "#":
            return line[:index]
    return line


def equivalent(line: str) -> str:
    """A line reduced to what the NPU sees: no whitespace, comments or quote style; the spellings
    of one NPU call or device unified."""
    text = re.sub(r"\s+", "", without_comment(line)).replace("'", '"')
    text = text.replace("torch_npu.npu.", "torch.npu.").replace('"npu:0"', '"npu"')
    text = re.sub(r'\.to\("npu"\)', ".npu()", text)
    return re.sub(r'\.to\(device="npu"\)', ".npu()", text)


def closest(line: str, candidates: list[tuple[int, str]]) -> int | None:
    """The index of the candidate most like `line` (difflib ratio of the stripped texts, >= 0.55)."""
    scored = [(difflib.SequenceMatcher(None, line.strip(), text.strip()).ratio(), index) for index, text in candidates]
    best = max(scored, default=(0.0, None))
    return best[1] if best[0] >= 0.55 else None


def counterparts(old: list[str], new: list[str]) -> dict[int, int | None]:
    """0-based old line -> its 0-based line in `new` (None: deleted) for every old line that changed.

    A line of a replaced block is paired with the most similar code line of that block; a line left
    without one (deleted, or the block rewritten) with the most similar code line `new` added
    anywhere in the file (code moved up or down). A line whose text comes back unchanged (moved, or
    wrapped in a new `if`) did not change. Comment lines and the `import torch_npu` lines a tool adds
    are never counterparts."""
    matcher = difflib.SequenceMatcher(None, [s.rstrip() for s in old], [s.rstrip() for s in new], autojunk=False)
    opcodes = [op for op in matcher.get_opcodes() if op[0] != "equal"]

    def code(j1: int, j2: int) -> list[tuple[int, str]]:
        return [(j, new[j]) for j in range(j1, j2)
                if new[j].strip() and not new[j].lstrip().startswith("#") and "import torch_npu" not in new[j]]
    added = [pair for _, _, _, j1, j2 in opcodes for pair in code(j1, j2)]
    changed: dict[int, int | None] = {}
    for _, i1, i2, j1, j2 in opcodes:
        block = code(j1, j2)
        for i in range(i1, i2):
            match = closest(old[i], block)
            match = closest(old[i], added) if match is None else match
            if match is None or equivalent(new[match]) != equivalent(old[i]):
                changed[i] = match
    return changed


@dataclass
class Tally:
    """One pair's counts and the evidence lines behind them."""
    human: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    extra: Counter[str] = field(default_factory=Counter)
    evidence: list[str] = field(default_factory=list)


def archive(mirror: Path, commit: str, paths: list[str], dest: Path) -> None:
    """The Python and shell files of `paths` at `commit` of a bare mirror, under `dest` (read blob by
    blob: a mirror may lack its largest files, which `git archive` would stop at)."""
    listing = subprocess.run(["git", f"--git-dir={mirror}", "ls-tree", "-r", commit, "--", *paths],
                             capture_output=True, text=True, check=True).stdout
    wanted = [(fields[2], name) for fields, name in
              ((row.split("\t", 1)[0].split(), row.split("\t", 1)[1]) for row in listing.splitlines())
              if fields[1] == "blob" and name.endswith(SCANNED)]
    batch = subprocess.run(["git", f"--git-dir={mirror}", "cat-file", "--batch"], check=True, capture_output=True,
                           input="".join(f"{sha}\n" for sha, _ in wanted).encode()).stdout
    offset = 0
    for _, name in wanted:
        header_end = batch.index(b"\n", offset)
        size = int(batch[offset:header_end].split()[2])
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(batch[header_end + 1:header_end + 1 + size])
        offset = header_end + 2 + size


def git_dir(mirrors: Path, repo: str) -> Path:
    base = mirrors / repo.replace("/", "+") / "repo"
    return base / ".git" if (base / ".git").is_dir() else base


def migrate(upstream: Path, out: Path) -> dict[str, dict[int, list[str]]]:
    """Run apply on `upstream` into `out`; relative file -> line -> diagnostic codes."""
    result = subprocess.run([sys.executable, "-m", "npu_migrate.cli", "apply", str(upstream), "--target", "npu",
                             "--output-dir", str(out), "--output-format", "json", "--exit-zero", "--isolated"],
                            capture_output=True, text=True, cwd=ROOT, check=False, timeout=1800)
    report = json.loads(result.stdout)
    diagnostics: dict[str, dict[int, list[str]]] = {}
    for item in report["files"]:
        relative = str(Path(item["path"]).resolve().relative_to(upstream.resolve()))
        for diagnostic in item.get("diagnostics") or []:
            diagnostics.setdefault(relative, {}).setdefault(diagnostic["line"], []).append(diagnostic["code"])
    return diagnostics


def verdict_key(upstream_line: str, ours: str) -> str:
    return f"{''.join(upstream_line.split())} => {''.join(ours.split())}"


def api_rename(upstream_line: str, ours: str) -> bool:
    """Whether our line is the upstream line with `torch.cuda.X` / `.cuda(` spelled `torch.npu.X` /
    `.npu(` and nothing else: the names torch_npu has under the same name (the rules' tables), right
    wherever they stand."""
    renamed = re.sub(r"\btorch\.cuda\.", "torch.npu.", upstream_line).replace(".cuda(", ".npu(")
    return renamed != upstream_line and equivalent(renamed) == equivalent(ours)


def verdict(verdicts: dict[str, dict[str, str]], upstream_line: str, ours: str) -> tuple[str, str]:
    """(right / wrong / unreviewed, why): an API rename is right; else the reviewed table's word."""
    if api_rename(upstream_line, ours):
        return "right", "API rename: torch_npu has the name under torch.npu"
    found = verdicts.get(verdict_key(upstream_line, ours), {})
    return found.get("verdict", "unreviewed"), found.get("why", "")


def compare_file(name: str, relative: str, trees: dict[str, Path], diagnostics: dict[int, list[str]],
                 verdicts: dict[str, dict[str, str]], tally: Tally) -> None:
    """Classify the human's CUDA-line changes of one file and the changes we made beyond them."""
    paths = {k: tree / relative if (tree / relative).exists() else trees["upstream"] / relative
             for k, tree in trees.items()}
    upstream, port, ours = (paths[k].read_text(errors="replace").splitlines() for k in ("upstream", "port", "ours"))
    human, mine = counterparts(upstream, port), counterparts(upstream, ours)
    cuda, port_cuda = cuda_lines(paths["upstream"]), cuda_lines(paths["port"])
    counted: set[int] = set()
    for index in sorted(human):
        theirs_at = human[index]
        if index + 1 not in cuda or (theirs_at is not None and theirs_at + 1 in port_cuda):
            continue  # not a CUDA line, or the port's line is still one: not a migration change
        tally.human += 1
        counted.add(index)
        theirs = "<deleted>" if theirs_at is None else port[theirs_at]
        ours_at = mine.get(index, index)
        our = "<deleted>" if ours_at is None else (ours if index in mine else upstream)[ours_at]
        if index in mine and equivalent(our) == equivalent(theirs):
            outcome, why = "matched", ""
        elif index in mine:
            judged, why = verdict(verdicts, upstream[index], our)
            outcome = {"right": "different-right", "wrong": "wrong"}.get(judged, "different-unreviewed")
        elif index + 1 in diagnostics:
            why = "a diagnostic on the line: " + ", ".join(diagnostics[index + 1])
            outcome = "reported"
        else:
            outcome, why = "missed", ""
        tally.outcomes[outcome] += 1
        tally.evidence.append(f"| {name} | {relative}:{index + 1} | {outcome} | `{upstream[index].strip()}` | "
                              f"`{theirs.strip()}` | `{our.strip()}` | {why} |")
    for index in sorted(set(mine) - counted):  # ours beyond the human's CUDA-line changes
        at = mine[index]
        our = "<deleted>" if at is None else ours[at]
        judged, why = verdict(verdicts, upstream[index], our)
        tally.extra[judged] += 1
        tally.evidence.append(f"| {name} | {relative}:{index + 1} | ours only: {judged} | `{upstream[index].strip()}` "
                              f"| (unchanged) | `{our.strip()}` | {why} |")


def run_pair(pair: dict, spec: dict, mirrors: Path, verdicts: dict[str, dict[str, str]]) -> Tally | str:
    zoo, upstream_git = git_dir(mirrors, spec["modelzoo"]["repo"]), git_dir(mirrors, pair["upstream"])
    if not zoo.is_dir() or not upstream_git.is_dir():
        return f"skipped: no mirror of {pair['upstream']} or ModelZoo (fetch github:{pair['upstream']})"
    tally = Tally()
    with tempfile.TemporaryDirectory() as scratch:
        trees = {"port": Path(scratch) / "port", "upstream": Path(scratch) / "upstream", "ours": Path(scratch) / "ours"}
        root = pair["port"] + ("/" + pair["port_root"] if pair.get("port_root") else "")
        archive(zoo, spec["modelzoo"]["commit"], [root], Path(scratch) / "zoo")
        (Path(scratch) / "zoo" / root).rename(trees["port"])
        archive(upstream_git, pair["commit"], pair.get("paths", []), trees["upstream"])
        diagnostics = migrate(trees["upstream"], trees["ours"])
        shared = sorted(str(p.relative_to(trees["upstream"])) for p in trees["upstream"].rglob("*")
                        if p.is_file() and (trees["port"] / p.relative_to(trees["upstream"])).is_file())
        for relative in shared:
            compare_file(pair["name"], relative, trees, diagnostics.get(relative, {}), verdicts, tally)
    return tally


OUTCOMES = ("matched", "different-right", "reported", "missed", "wrong", "different-unreviewed")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--pairs", type=Path, default=ROOT / "bench" / "modelzoo_recall.json")
    parser.add_argument("--lines", action="store_true", help="print every evidence line (a Markdown table)")
    args = parser.parse_args()
    spec = json.loads(args.pairs.read_text())
    verdicts = {v["key"]: {**v, "why": spec["reasons"][v["why"]]} for v in spec.get("verdicts", [])}
    print(f"Counted: {CUDA_LINE_DEFINITION}.\n")
    totals: Counter[str] = Counter()
    extra_totals: Counter[str] = Counter()
    rows: list[str] = []
    evidence: list[str] = []
    for pair in spec["pairs"]:
        tally = run_pair(pair, spec, args.mirrors, verdicts)
        if isinstance(tally, str):
            rows.append(f"| {pair['name']} | {pair['kind']} | {tally} |")
            continue
        totals["human"] += tally.human
        totals.update(tally.outcomes)
        extra_totals.update(tally.extra)
        evidence += tally.evidence
        rows.append(f"| {pair['name']} | {pair['kind']} | {pair['upstream']}@{pair['commit'][:7]} | {tally.human} | "
                    + " | ".join(str(tally.outcomes[o]) for o in OUTCOMES)
                    + f" | {sum(tally.extra.values())} ({tally.extra['right']} right, {tally.extra['wrong']} wrong) |")
        print(f"{pair['name']}: {tally.human} human CUDA lines, {dict(tally.outcomes)}, ours only {dict(tally.extra)}",
              flush=True)
    print("\n| pair | kind | upstream | human CUDA lines | " + " | ".join(OUTCOMES) + " | ours only |")
    print("|---|---|---|---|" + "---|" * len(OUTCOMES) + "---|")
    print("\n".join(rows))
    made = totals["matched"] + totals["different-right"]
    wrong = totals["wrong"] + totals["different-unreviewed"] + extra_totals["wrong"] + extra_totals["unreviewed"]
    print(f"| all | | | {totals['human']} | " + " | ".join(str(totals[o]) for o in OUTCOMES)
          + f" | {sum(extra_totals.values())} ({extra_totals['right']} right, {extra_totals['wrong']} wrong,"
            f" {extra_totals['unreviewed']} unreviewed) |")
    if totals["human"]:
        print(f"\nrecall {made}/{totals['human']} = {made / totals['human']:.1%}; reported only {totals['reported']};"
              f" missed {totals['missed']}; wrong (ours, both kinds, unreviewed included) {wrong}")
    if args.lines:
        print("\n| pair | where | outcome | upstream | port | ours | verdict's reason |\n|---|---|---|---|---|---|---|")
        print("\n".join(evidence))
    return 0


if __name__ == "__main__":
    sys.exit(main())
