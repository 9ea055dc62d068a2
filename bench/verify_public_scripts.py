"""Script mode on real, unmodified public training scripts (issue 17).

    python bench/verify_public_scripts.py [--corpus /work/corpus] [--only adder,nanogpt] [--steps 2]

For each script below, the public repository's files are copied from a local clone (the corpus,
`<owner>+<name>` folders; the pinned commit is printed; get them with
`git clone https://github.com/<owner>/<name> && git checkout <commit>`), small data files are
written next to it where the script reads a data set (synthetic text or tokens: no download), the
copy is migrated with `npu-migrate apply --output-dir`, and then

    npu-migrate verify --device-precision --original ORIG --migrated MIG --format json -- SCRIPT ARGS

runs the unmodified script on both sides (no entry code). Then, one at a time, a migration fault
is injected into the migrated copy and the same command must fail with the first divergence (or
the placement error) at the injected `path.py:LINE`. Printed: one row per run with the verdict,
the exit code, the expected and reported lines, whether the injected line is among the lines the
finding names, and the wall time of the command.

Models and data are tiny (a few layers, batch 2-4, 2 steps) so that each command takes seconds.
Repositories missing from the corpus are skipped and said so.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _words(count: int, seed: int) -> str:
    """Deterministic English-looking text: a small vocabulary, lines of 8-16 words."""
    vocabulary = ("the of and to in a is that for it as was with be by on not he i this are or his from at "
                  "which but have an they you were her she there one all we can their has been if more when "
                  "will would who so no time only new some could")
    words = vocabulary.split(" ")
    rng = random.Random(seed)
    lines, left = [], count
    while left > 0:
        n = min(left, rng.randint(8, 16))
        lines.append(" ".join(rng.choice(words) for _ in range(n)))
        left -= n
    return "\n".join(lines) + "\n"


def _wikitext(tree: Path) -> None:
    folder = tree / "data" / "wikitext-2"
    folder.mkdir(parents=True, exist_ok=True)
    for name, count, seed in (("train", 600, 1), ("valid", 300, 2), ("test", 300, 3)):
        (folder / f"{name}.txt").write_text(_words(count, seed))


def _tokens(tree: Path) -> None:
    import pickle

    import numpy as np

    folder = tree / "data" / "tiny"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    rng.integers(0, 65, 4000, dtype=np.uint16).tofile(folder / "train.bin")
    rng.integers(0, 65, 1000, dtype=np.uint16).tofile(folder / "val.bin")
    (folder / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": 65}))


@dataclass
class Script:
    name: str
    repo: str  # corpus folder <owner>+<name>
    subtree: str  # folder of the repo to copy ("" = all of it)
    script: str
    args: list[str]
    faults: list[tuple[str, str, str, str]]  # (label, file, text in the migrated file, replacement)
    data: Callable[[Path], None] | None = None
    env: dict[str, str] = field(default_factory=dict)


NANOGPT_ARGS = ["--dataset=tiny", "--batch_size=2", "--block_size=32", "--n_layer=2", "--n_head=2", "--n_embd=32",
                "--max_iters=3", "--eval_interval=1000", "--eval_iters=1", "--compile=False", "--log_interval=1"]

SCRIPTS = [
    Script("adder", "karpathy+minGPT", "", "projects/adder/adder.py",
           ["--trainer.max_iters=5", "--data.ndigit=1", "--trainer.num_workers=0"],
           [("batch left on the CPU", "mingpt/trainer.py", "batch = [t.to(self.device) for t in batch]",
             "batch = [t for t in batch]"),
            ("GELU constant off (0.044715 -> 0.0447)", "mingpt/model.py", "x + 0.044715 * torch.pow(x, 3.0)",
             "x + 0.0447 * torch.pow(x, 3.0)")]),
    Script("word_language_model", "pytorch+examples", "word_language_model", "main.py",
           ["--accel", "--epochs", "1", "--emsize", "32", "--nhid", "32", "--batch_size", "4", "--bptt", "8",
            "--log-interval", "1"],
           [("bf16 round trip (embedding)", "model.py", "emb = self.drop(self.encoder(input))",
             "emb = self.drop(self.encoder(input).bfloat16().float())"),
            ("hidden state not detached", "main.py",
             "            hidden = repackage_hidden(hidden)\n            output, hidden = model(data, hidden)",
             "            output, hidden = model(data, hidden)")],
           data=_wikitext),
    Script("nanogpt", "karpathy+nanoGPT", "", "train.py", [*NANOGPT_ARGS, "--dtype=float32"],
           [("LayerNorm eps 1e-5 -> 1e-3", "model.py", "self.weight, self.bias, 1e-5)",
             "self.weight, self.bias, 1e-3)"),
            ("batch x left on the CPU", "train.py", "x, y = x.pin_memory().to(device, non_blocking=True), ",
             "x, y = x.pin_memory(), ")],
           data=_tokens),
    Script("nanogpt-amp", "karpathy+nanoGPT", "", "train.py", NANOGPT_ARGS,  # dtype bfloat16: torch.amp.autocast
           [("LayerNorm input rounded to bf16 (AMP)", "model.py", "return F.layer_norm(input, self.weight.shape",
             "return F.layer_norm(input.bfloat16(), self.weight.shape")],
           data=_tokens),
]


def pinned(repo: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def copy_tree(source: Path, dest: Path) -> None:
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(".git", "__pycache__", "data", "*.ipynb"))


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                                              if p), **(env or {})}
    return subprocess.run([sys.executable, "-m", "npu_migrate.cli", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, check=False)


def inject(tree: Path, dest: Path, file: str, old: str, new: str) -> str:
    shutil.copytree(tree, dest)
    path = dest / file
    text = path.read_text()
    if old not in text:
        raise SystemExit(f"{path}: {old!r} not in the migrated text (another commit of the corpus?)")
    position = text.index(old)
    path.write_text(text.replace(old, new, 1))
    return f"{file}:{text[:position].count(chr(10)) + 1}"


def verify(script: Script, original: Path, migrated: Path, steps: int) -> tuple[dict, int, float]:
    started = time.perf_counter()
    proc = cli("verify", "--device-precision", "--steps", str(steps), "--original", str(original), "--migrated",
               str(migrated), "--format", "json", "--", script.script, *script.args, env=script.env)
    wall = time.perf_counter() - started
    try:
        return json.loads(proc.stdout), proc.returncode, wall
    except json.JSONDecodeError:
        return {"verdict": "error", "reason": (proc.stderr or proc.stdout).strip()[-300:]}, proc.returncode, wall


def run(args: argparse.Namespace) -> int:
    corpus = Path(args.corpus)
    only = set(args.only.split(",")) if args.only else None
    work = Path(tempfile.mkdtemp(prefix="verify-public-"))
    rows = []
    for script in SCRIPTS:
        if only and script.name not in only:
            continue
        repo = corpus / script.repo
        if not (repo / script.subtree / script.script).is_file():
            print(f"{script.name}: {repo / script.subtree / script.script} not found; skipped", flush=True)
            continue
        original, migrated = work / f"{script.name}_original", work / f"{script.name}_migrated"
        copy_tree(repo / script.subtree if script.subtree else repo, original)
        if script.data:
            script.data(original)
        applied = cli("apply", str(original), "--output-dir", str(migrated))
        if applied.returncode not in (0, 1) or not migrated.is_dir():
            print(f"{script.name}: apply failed: {applied.stderr.strip()[-300:]}")
            continue
        for item in ("data", "input.txt"):  # data the migration does not copy (not code)
            if (original / item).exists() and not (migrated / item).exists():
                (shutil.copytree if (original / item).is_dir() else shutil.copy)(original / item, migrated / item)
        print(f"{script.name}: {script.repo} @ {pinned(repo)}: {script.script} {' '.join(script.args)}", flush=True)
        cases = [("clean migration", None, migrated)]
        for index, (label, file, old, new) in enumerate(script.faults):
            tree = work / f"{script.name}_fault{index + 1}"
            cases.append((label, inject(migrated, tree, file, old, new), tree))
        for label, expected, tree in cases:
            outcome, code, wall = verify(script, original, tree, args.steps)
            reported = outcome.get("location") or "-"
            if expected is None:
                ok = outcome.get("verdict") == "pass"
            else:
                ok = outcome.get("verdict") == "fail" and expected in outcome.get("sites", [])
            rows.append((script.name, label, outcome.get("verdict"), code, expected or "-", reported, ok, wall))
            print(f"  {label:<40} {outcome.get('verdict', '?'):<5} exit {code}  expected {expected or '-':<22} "
                  f"reported {reported:<22} {'OK' if ok else 'WRONG'}  {wall:5.1f} s"
                  + ("" if ok else f"  [{outcome.get('reason', '')[:200]}]"), flush=True)
    print("\n| script | run | verdict | exit | injected at | reported at | right | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, label, verdict, code, expected, reported, ok, wall in rows:
        print(f"| {name} | {label} | {verdict} | {code} | {expected} | {reported} | {'yes' if ok else 'NO'} | "
              f"{wall:.1f} |")
    right = sum(1 for row in rows if row[6])
    print(f"\n{right}/{len(rows)} runs right (clean runs pass, faults fail at the injected line); steps={args.steps}")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if right == len(rows) else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=os.environ.get("NPU_MIGRATE_CORPUS", "/work/corpus"))
    parser.add_argument("--only", default="", help="script names, e.g. adder,nanogpt")
    parser.add_argument("--steps", type=int, default=2)
    sys.exit(run(parser.parse_args()))


if __name__ == "__main__":
    main()
