"""Does `npu-migrate analyze` on an upstream repository name the Ascend tuning that Huawei's
ModelZoo port of it added? (issue 27)

    python bench/tune_modelzoo.py [--mirrors /work/.mirror] [--pairs bench/tune_modelzoo_pairs.json]

For each pair of bench/tune_modelzoo_pairs.json (a ModelZoo port and the upstream commit its
README names), both trees are read from fetched mirrors (`<mirrors>/<owner>+<name>/repo`, bare
git; `fetch github:Ascend/ModelZoo-PyTorch` and the upstreams) into a temporary folder. The port's
Python and shell files are scanned for the five kinds of Ascend tuning (KINDS below); a kind the
port has and the upstream does not is one the port *added*, with its evidence (port file:line).
Then `npu-migrate analyze --format json` runs on the upstream files and a kind counts as *named*
when a finding of that kind (the tune family's ANA034/ANA049, whose messages start with the kind)
points at an upstream file:line: a *rewrite* (high confidence: `apply --enable tune` makes the
change) or a *report* (medium: the rule names the opportunity and why it does not apply it, e.g. an
optimizer built in a helper module away from the training step). Printed: one row per pair, the evidence, and the share named by
kind and in all. A pair whose mirror is missing is skipped and said so.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# the five kinds the issue counts, as they are spelled in a port's code and launch scripts
LAUNCH_VARIABLES = ("TASK_QUEUE_ENABLE", "CPU_AFFINITY_CONF", "PYTORCH_NPU_ALLOC_CONF", "ACL_OP_COMPILER_CACHE_MODE",
                    "ACL_OP_COMPILER_CACHE_DIR", "COMBINED_ENABLE", "PTCOPY_ENABLE", "DYNAMIC_OP", "BMMV2_ENABLE")
KINDS = {  # a kind is added when one of its markers is in the port and not in the upstream
    "fused optimizer": [re.compile(r"\bNpuFused(?:Adam|AdamW|SGD|Adadelta|RMSprop|Lamb)\b")],
    "compile mode": [re.compile(r"\bset_compile_mode\s*\(")],
    "launch environment": [re.compile(rf"\b(?:{'|'.join(LAUNCH_VARIABLES)})\b")],
    "static shapes": [re.compile(r"\bdrop_last\s*=\s*True\b")],
    "transfers": [re.compile(r"\bpin_memory\s*=\s*True\b"), re.compile(r"\bnon_blocking\s*=\s*True\b")],
}
SCANNED = (".py", ".sh")


def extract(mirror: Path, commit: str, paths: list[str], dest: Path) -> None:
    """The files of `paths` at `commit` of a bare mirror, written under `dest` (Python and shell
    only: what analyze and the scan read)."""
    wanted = [] if paths == ["."] else paths
    archive = subprocess.run(["git", f"--git-dir={mirror}", "archive", "--format=tar", commit, "--", *wanted],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(SCANNED)]
        tar.extractall(dest, members=members, filter="data")


def scan(tree: Path) -> dict[tuple[str, int], list[str]]:
    """(kind, marker) -> `file:line: text` for every line with that marker, files in sorted order."""
    found: dict[tuple[str, int], list[str]] = {}
    for path in sorted(p for p in tree.rglob("*") if p.suffix in SCANNED and p.is_file()):
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if line.lstrip().startswith("#"):
                continue
            for kind, markers in KINDS.items():
                for index, marker in enumerate(markers):
                    if marker.search(line):
                        found.setdefault((kind, index), []).append(
                            f"{path.relative_to(tree)}:{number}: {line.strip()[:90]}")
    return found


def added_kinds(port: dict[tuple[str, int], list[str]],
                upstream: dict[tuple[str, int], list[str]]) -> dict[str, list[str]]:
    """kind -> the port's evidence of the markers the upstream lacks."""
    added: dict[str, list[str]] = {}
    for key, evidence in port.items():
        if key not in upstream:
            added.setdefault(key[0], []).extend(evidence)
    return {kind: added[kind] for kind in KINDS if kind in added}


def named(tree: Path) -> dict[str, list[str]]:
    """kind -> `file:line` of the tune findings `npu-migrate analyze` gives on `tree`."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-m", "npu_migrate.cli", "analyze", str(tree), "--format", "json",
                        "-o", out.name], capture_output=True, text=True, env=env, check=False, timeout=1800)
        report = json.loads(Path(out.name).read_text() or "{}")
    found: dict[str, list[str]] = {}
    for item in report.get("findings", []):
        if item.get("code") not in ("ANA034", "ANA049"):
            continue
        kind = next((k for k in KINDS if item["message"].startswith(k)), None)
        if kind is not None:
            where = f"{Path(item['path']).relative_to(tree)}:{item['line']}"
            found.setdefault(kind, []).append(f"{where} ({item.get('confidence', '?')})")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--pairs", type=Path, default=ROOT / "bench" / "tune_modelzoo_pairs.json")
    parser.add_argument("--evidence", action="store_true", help="print every evidence line")
    args = parser.parse_args()
    spec = json.loads(args.pairs.read_text())
    zoo = args.mirrors / spec["modelzoo"]["repo"].replace("/", "+") / "repo"
    added_by_kind: Counter[str] = Counter()
    named_by_kind: Counter[str] = Counter()
    rewritten_by_kind: Counter[str] = Counter()  # named by a rewrite (high), not only a report (medium)
    rows = []
    for pair in spec["pairs"]:
        upstream_mirror = args.mirrors / pair["upstream"].replace("/", "+") / "repo"
        if not zoo.is_dir() or not upstream_mirror.is_dir():
            rows.append(f"| {pair['name']} | skipped: no mirror of {pair['upstream']} or ModelZoo | | | |")
            continue
        with tempfile.TemporaryDirectory() as scratch:
            port, upstream = Path(scratch) / "port", Path(scratch) / "upstream"
            extract(zoo, spec["modelzoo"]["commit"], [pair["port"]], port)
            extract(upstream_mirror, pair["commit"], pair["paths"], upstream)
            started = time.perf_counter()
            in_port, in_upstream, by_analyze = scan(port / pair["port"]), scan(upstream), named(upstream)
            took = time.perf_counter() - started
        added = added_kinds(in_port, in_upstream)
        hits = [k for k in added if k in by_analyze]
        rewrites = [k for k in hits if any(e.endswith("(high)") for e in by_analyze[k])]
        added_by_kind.update(list(added))
        named_by_kind.update(hits)
        rewritten_by_kind.update(rewrites)
        cells = [f"{k}: {('rewrite' if k in rewrites else 'report') if k in hits else 'MISSED'}" for k in added]
        rows.append(f"| {pair['name']} | {pair['upstream']}@{pair['commit'][:7]} | {'; '.join(cells) or '-'} "
                    f"| {len(hits)}/{len(added)} | {took:.1f} s |")
        print(f"{pair['name']}: added {list(added)}, named {hits}", flush=True)
        for kind, evidence in added.items():
            print(f"  {kind}: port {evidence[0]}" + (f" (+{len(evidence) - 1})" if len(evidence) > 1 else ""))
            print(f"  {'':{len(kind)}}  analyze " + (", ".join(by_analyze[kind][:3] if not args.evidence
                                                            else by_analyze[kind]) if kind in by_analyze else "-"))
    print("\n| pair | upstream | kinds the port added: named by analyze on the upstream? | named | time |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    print("\n| kind | added by ports | named | of which by a rewrite | share named |")
    print("|---|---|---|---|---|")
    for kind in KINDS:
        if added_by_kind[kind]:
            print(f"| {kind} | {added_by_kind[kind]} | {named_by_kind[kind]} | {rewritten_by_kind[kind]} | "
                  f"{named_by_kind[kind] / added_by_kind[kind]:.0%} |")
    total, hit = sum(added_by_kind.values()), sum(named_by_kind.values())
    print(f"| all | {total} | {hit} | {sum(rewritten_by_kind.values())} | {hit / total:.0%} |" if total
          else "| all | 0 | 0 | 0 | - |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
