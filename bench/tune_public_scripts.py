"""`apply --enable tune` on public training scripts nobody here used before (issue 27).

    python bench/tune_public_scripts.py [--corpus /work/corpus]

Each repository is read from a clone under the corpus (`<owner>+<name>`, at the commit in
PROJECTS; get it with `git clone https://github.com/<owner>/<name> && git checkout <commit>`),
migrated and tuned with `npu-migrate apply --enable tune --output-dir` into a temporary folder,
and the tune rules' records are counted per rule (rewrites, and reports: what a rule declined
and why). Printed: one row per project with the counts and the wall time of the command.
A clone missing from the corpus is skipped and said so. The third-party code is never copied
into this repository.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECTS = [  # (clone folder, commit, kind)
    ("karpathy+llama2.c", "350e04f", "transformer LM (train.py + model.py)"),
    ("kuangliu+pytorch-cifar", "49b7aa9", "CNN (main.py + models/)"),
    ("cloneofsimo+minDiffusion", "00a3c80", "diffusion (DDPM/DDIM scripts)"),
]
TUNE = ("NPU410", "NPU600", "NPU601", "NPU602", "NPU610", "NPU611", "NPU612", "NPU613", "NPU620", "NPU621")


def counts(report: object) -> collections.Counter[str]:
    found: collections.Counter[str] = collections.Counter()
    stack = [report]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            code = str(item.get("code", ""))
            if code in TUNE:
                found[f"{code} {'report' if item.get('severity') else 'rewrite'}"] += 1
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="/work/corpus")
    args = parser.parse_args()
    print("| project | commit | kind | rewrites per rule | reports per rule | apply time |")
    print("|---|---|---|---|---|---|")
    for folder, commit, kind in PROJECTS:
        clone = Path(args.corpus) / folder
        if not clone.is_dir():
            print(f"| {folder} | {commit} | {kind} | skipped: no clone at {clone} | | |")
            continue
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "npu_migrate", "apply", str(clone), "--enable", "tune",
                                   "--output-dir", out, "--output-format", "json", "--exit-zero"],
                                  capture_output=True, text=True, check=False)
            took = time.perf_counter() - start
        found = counts(json.loads(done.stdout or "[]"))
        rewrites = ", ".join(f"{k.split()[0]} {n}" for k, n in sorted(found.items()) if k.endswith("rewrite"))
        reports = ", ".join(f"{k.split()[0]} {n}" for k, n in sorted(found.items()) if k.endswith("report"))
        print(f"| {folder.replace('+', '/')} | {commit} | {kind} | {rewrites or '-'} | {reports or '-'} | {took:.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
