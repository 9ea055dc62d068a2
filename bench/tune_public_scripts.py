"""`apply --enable tune` on public training scripts, the tuned scripts run under the emulation, and
`npu-migrate verify` original vs tuned (issue 27).

    python bench/tune_public_scripts.py [--mirrors /work/.mirror] [--only llama2c,mnist] [--steps 2]

Needs, beside npu-migrate, what the scripts import: torchvision (with the torch it was built for:
`pip install torch==2.14.1 torchvision==0.29.1` on x86_64; PyPI's torchvision does not import beside
torch 2.13.0), tqdm, numpy, requests, sentencepiece, transformers and datasets.

Each project is read at the pinned commit of its fetched mirror (`<mirrors>/<owner>+<name>/repo`,
bare git; `fetch github:<owner>/<name>`) into a temporary folder; no third-party code is kept in
this repository. Small stand-in data is written where the script reads its data set (tokenised
shards, MNIST's idx files, a JSONL of chat turns: synthetic, no download), with tiny model sizes
given on the command line (or, where a script hard-codes a size, replaced in the original before
`apply`, so that both sides run it: minDiffusion's batch of 128 becomes 4). Then, for each:

1. `npu-migrate apply ORIG --enable tune --output-dir TUNED --output-format json`: the tune rules'
   records counted per rule (rewrites, and reports: a rule declining, with its reason);
2. `python -m npu_migrate.emulation bench/tune_steps.py STEPS SCRIPT ARGS` in TUNED: the tuned
   script runs STEPS training steps on the emulated NPU;
3. `npu-migrate verify --original ORIG --migrated TUNED --steps STEPS --format json -- SCRIPT ARGS`:
   script mode, the original on the CPU reference against the tuned program on the emulated NPU.

Printed: one row per project with the counts, whether the emulated run finished its steps, the
verify verdict (with its reason when not PASS) and the wall times. A project whose mirror is
missing is skipped and said so.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TUNE = ("NPU410", "NPU600", "NPU601", "NPU602", "NPU610", "NPU611", "NPU612", "NPU613", "NPU620", "NPU621")


# -- stand-in data (synthetic; each function writes under the project's work folder) -----------

def llama2c_shards(work: Path) -> None:
    """Two shards of uint16 tokens (vocabulary 64) in `data/tok64/`: tinystories.py trains on
    every shard but the first and validates on the first."""
    import numpy as np

    folder = work / "original" / "data" / "tok64"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for index in range(2):
        rng.integers(1, 64, 4096, dtype=np.uint16).tofile(folder / f"data{index:02d}.bin")


def _mnist_idx(raw: Path, count_train: int, count_test: int) -> None:
    """MNIST's four idx files, uncompressed (torchvision checks that they exist, not their hash)."""
    rng = random.Random(0)
    raw.mkdir(parents=True)
    for prefix, count in (("train", count_train), ("t10k", count_test)):
        pixels = bytes(rng.randrange(256) for _ in range(count * 28 * 28))
        labels = bytes(rng.randrange(10) for _ in range(count))
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(struct.pack(">IIII", 0x803, count, 28, 28) + pixels)
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(struct.pack(">II", 0x801, count) + labels)


def mnist_beside(work: Path) -> None:
    """pytorch/examples' mnist reads `../data` (from its working directory: the tree's parent)."""
    _mnist_idx(work / "data" / "MNIST" / "raw", 48, 32)


def mnist_inside(work: Path) -> None:
    """minDiffusion reads `./data`; 30 images: 7 full batches of 4 and a last one of 2, which
    NPU602's `drop_last=True` drops."""
    _mnist_idx(work / "original" / "data" / "MNIST" / "raw", 30, 16)


def minimind_chat(work: Path) -> None:
    """A JSONL of short chat turns, and the repository's own tokenizer files where train_lora.py
    reads them (`../model`, relative to its working directory: the tree's parent)."""
    turns = [("hi", "hello there"), ("what is two plus two", "four"), ("name a colour", "blue"),
             ("say yes", "yes"), ("count to three", "one two three"), ("a fruit", "an apple"),
             ("the sky", "it is blue"), ("bye", "goodbye")]
    lines = [json.dumps({"conversations": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]})
             for q, a in turns]
    (work / "chat.jsonl").write_text("\n".join(lines) + "\n")
    shutil.copytree(work / "original" / "model", work / "model",
                    ignore=shutil.ignore_patterns("*.py"))


@dataclass
class Project:
    name: str
    repo: str  # owner/name
    commit: str
    subtree: str  # the folder of the repository that is the tree ("" = all of it)
    kind: str
    script: str
    args: list[str]
    data: Callable[[Path], None]
    paths: tuple[str, ...] = ()  # the folders read from the mirror (default: the subtree, or all)
    # (file, text, replacement): sizes a script hard-codes, made small in the original before
    # `apply` (both sides run them); each text must occur exactly once
    resize: tuple[tuple[str, str, str], ...] = ()


PROJECTS = [
    Project("llama2c", "karpathy/llama2.c", "350e04fe35433e6d2941dce5a1f53308f87058eb", "",
            "transformer LM (train.py + model.py)", "train.py",
            ["--compile=False", "--dtype=float32", "--vocab_source=custom", "--vocab_size=64", "--batch_size=2",
             "--max_seq_len=32", "--dim=32", "--n_layers=2", "--n_heads=2", "--n_kv_heads=2", "--multiple_of=8",
             "--gradient_accumulation_steps=1", "--max_iters=3", "--eval_interval=1000", "--eval_iters=1",
             "--warmup_iters=0", "--log_interval=1"],
            llama2c_shards),
    Project("mnist", "pytorch/examples", "37a1866d0e0118875d52071756f76b9b3e46c565", "mnist",
            "CNN (mnist/main.py)", "main.py",
            ["--epochs", "1", "--batch-size", "16", "--test-batch-size", "16", "--log-interval", "1"],
            mnist_beside),
    Project("mindiffusion", "cloneofsimo/minDiffusion", "00a3c8066d25a34d3d472ef6c87c7b6b238ea444", "",
            "diffusion (superminddpm.py, DDPM on MNIST)", "superminddpm.py", [], mnist_inside,
            # seven 7x7 convolutions at 28x28 (up to 512 channels): ~10 TFLOP a step at batch 128
            resize=(("superminddpm.py", "batch_size=128", "batch_size=4"),)),
    Project("minimind-lora", "jingyaogong/minimind", "d65ef2c00ebc6082f9df11541e1b191655eddb00", "",
            "LoRA fine-tuning (trainer/train_lora.py, bf16 AMP)", "trainer/train_lora.py",
            ["--hidden_size", "64", "--num_hidden_layers", "2", "--from_weight", "none", "--batch_size", "2",
             "--max_seq_len", "96", "--epochs", "1", "--num_workers", "0", "--save_dir", "out",
             "--save_interval", "100000", "--log_interval", "1", "--data_path", "{work}/chat.jsonl"],
            minimind_chat, ("model", "trainer", "dataset")),
]


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


def materialise(mirror: Path, project: Project, dest: Path) -> None:
    """The project's tree at its commit (git archive of a bare mirror), its subtree as `dest`."""
    paths = project.paths or ((project.subtree,) if project.subtree else ())
    archive = subprocess.run(["git", f"--git-dir={mirror}", "archive", "--format=tar", project.commit, *paths],
                             capture_output=True, check=True).stdout
    unpacked = dest.parent / "unpacked"
    unpacked.mkdir()
    subprocess.run(["tar", "-x", "-C", str(unpacked)], input=archive, check=True)
    shutil.move(unpacked / project.subtree if project.subtree else unpacked, dest)
    shutil.rmtree(unpacked, ignore_errors=True)


def resize(tree: Path, project: Project) -> None:
    for name, text, replacement in project.resize:
        path = tree / name
        source = path.read_text()
        if source.count(text) != 1:
            raise SystemExit(f"{path}: `{text}` occurs {source.count(text)} times, not once")
        path.write_text(source.replace(text, replacement))


def run(command: list[str], cwd: Path | None = None, timeout: float = 1800) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout, check=False)
    return done, time.perf_counter() - started


def copy_missing(original: Path, tuned: Path) -> None:
    """Data and other files `apply --output-dir` does not write (it writes the files it reads)."""
    for path in original.rglob("*"):
        target = tuned / path.relative_to(original)
        if path.is_file() and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def bench(project: Project, mirrors: Path, work: Path, steps: int) -> str:
    mirror = mirrors / project.repo.replace("/", "+") / "repo"
    if not mirror.is_dir():
        return f"| {project.repo} | {project.commit[:7]} | {project.kind} | skipped: no mirror at {mirror} | | | | |"
    original, tuned = work / "original", work / "tuned"
    materialise(mirror, project, original)
    resize(original, project)
    project.data(work)
    args = [a.replace("{work}", str(work)) for a in project.args]
    applied, apply_s = run([sys.executable, "-m", "npu_migrate.cli", "apply", str(original), "--enable", "tune",
                            "--output-dir", str(tuned), "--output-format", "json", "--exit-zero"])
    found = counts(json.loads(applied.stdout or "[]"))
    copy_missing(original, tuned)
    rewrites = ", ".join(f"{k.split()[0]} {n}" for k, n in sorted(found.items()) if k.endswith("rewrite"))
    reports = ", ".join(f"{k.split()[0]} {n}" for k, n in sorted(found.items()) if k.endswith("report"))
    emulated, emulated_s = run([sys.executable, "-m", "npu_migrate.emulation", str(ROOT / "bench" / "tune_steps.py"),
                                str(steps), project.script, *args], cwd=tuned)
    ran = last_line(emulated.stdout) if emulated.returncode == 0 else f"FAILED: {last_line(emulated.stderr)}"
    verified, verify_s = run([sys.executable, "-m", "npu_migrate.cli", "verify", "--original", str(original),
                              "--migrated", str(tuned), "--steps", str(steps), "--format", "json", "--",
                              project.script, *args])
    try:
        outcome = json.loads(verified.stdout)
        verdict = str(outcome.get("verdict", "?")).upper()
        if verdict != "PASS":
            verdict += f" ({outcome.get('reason', '')[:300]})"
    except json.JSONDecodeError:
        verdict = f"ERROR exit {verified.returncode}: {last_line(verified.stderr or verified.stdout)}"
    print(f"{project.name}: apply {apply_s:.1f} s; emulated {ran} {emulated_s:.1f} s; verify {verdict} "
          f"{verify_s:.1f} s", flush=True)
    return (f"| {project.repo}@{project.commit[:7]} | {project.kind} | {rewrites or '-'} | {reports or '-'} "
            f"| {ran.replace('tune_steps: ', '')} ({emulated_s:.0f} s) | {verdict} ({verify_s:.0f} s) "
            f"| {apply_s:.1f} s |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--only", help="comma-separated project names: " + ",".join(p.name for p in PROJECTS))
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the work folders (printed)")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    rows = []
    for project in PROJECTS:
        if only and project.name not in only:
            continue
        work = Path(tempfile.mkdtemp(prefix=f"tune-{project.name}-"))
        try:
            rows.append(bench(project, args.mirrors, work, args.steps))
        finally:
            if args.keep:
                print(f"  kept {work}")
            else:
                shutil.rmtree(work, ignore_errors=True)
    print("\n| project | kind | rewrites per rule | reports per rule | emulated run (steps) | verify | apply time |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
