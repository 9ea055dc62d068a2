"""Does it run (issue 25): migrate real public projects and run one step of an entry point.

For each project below (a repository and a pinned commit, read from a bare mirror under --mirrors,
`OWNER+NAME/repo`, as the `fetch` tool leaves it; blobs the mirror lacks are left out and named):

1. the counts of bench/no_silent_miss.py on the checkout (its own scanner, the wide definition):
   CUDA sites, rewritten, reported, silent, guards into CUDA-only code and those sent to the NPU;
2. `npu-migrate apply` on a copy of the checkout;
3. one entry point, on tiny synthetic inputs the project's `prepare` snippet writes into each copy:
   the original with plain CPU torch (`python bench/one_step.py SCRIPT ARGS`), the migrated copy
   under the emulation (`python -m npu_migrate.emulation bench/one_step.py SCRIPT ARGS`), each
   stopped after its first optimizer step (inference entries run to their end), each under
   --timeout seconds. The verdict is the driver's last line: ran, or the exception and where.

Projects whose entry point cannot run here (weights or data from the network, 8 GPUs and NCCL)
carry the reason instead of an entry. The packages their entry points need are installed by hand
into the interpreter given by --python (CPU torch 2.13 from the local wheel; never torch_npu):

    python -m venv /tmp/rb/venv && /tmp/rb/venv/bin/pip install torch==2.13.0 'torchvision<0.29.1' \\
        timm einops einx jaxtyping local-attention rotary-embedding-torch tqdm wandb sentencepiece \\
        opencv-python-headless lmdb scikit-image pyyaml addict yapf scipy
    python bench/runs_bench.py --python /tmp/rb/venv/bin/python [--only NAME] [--hunks-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from no_silent_miss import Tally, run_project

REPO = Path(__file__).resolve().parent.parent
DRIVER = Path(__file__).resolve().parent / "one_step.py"


@dataclass(frozen=True)
class Entry:
    """One entry point: the script, its arguments for the original (CPU) and the migrated run
    (None: the same), and a Python snippet run in each copy first to write synthetic inputs
    (`SIDE` is "original" or "migrated" in it)."""

    script: str
    args: tuple[str, ...]
    prepare: str = ""
    migrated_args: tuple[str, ...] | None = None
    trains: bool = True  # a training entry must reach an optimizer step; an inference one its end


@dataclass(frozen=True)
class Project:
    repo: str
    commit: str
    why: str
    entry: Entry | None = None
    no_run: str = ""  # why no entry point runs here


# synthetic inputs -------------------------------------------------------------------------------
_ENWIK8 = """
import gzip, os, random
os.makedirs('data', exist_ok=True)
rng = random.Random(0)
with gzip.open('data/enwik8.gz', 'wb') as f:
    f.write(bytes(rng.randrange(32, 127) for _ in range(200_000)))
"""

# BasicSR: four 32x32 ground-truth images and their 8x8 inputs, a two-block MSRResNet, one iteration;
# the original runs in the project's documented CPU mode (`num_gpu: 0`), the migrated on one NPU
_BASICSR = """
import os, numpy as np, cv2
rng = np.random.default_rng(0)
for folder, size in (('datasets/tiny/gt', 32), ('datasets/tiny/lq', 8)):
    os.makedirs(folder, exist_ok=True)
    for i in range(4):
        cv2.imwrite(f'{folder}/{i:04d}.png', rng.integers(0, 255, (size, size, 3), dtype=np.uint8))
open('basicsr/version.py', 'w').write("__version__ = '1.4.2'\\n__gitsha__ = 'unknown'\\nversion_info = (1, 4, 2)\\n")
config = '''name: tiny_MSRResNet
model_type: SRModel
scale: 4
num_gpu: NUM_GPU
manual_seed: 0
datasets:
  train:
    name: tiny
    type: PairedImageDataset
    dataroot_gt: datasets/tiny/gt
    dataroot_lq: datasets/tiny/lq
    filename_tmpl: '{}'
    io_backend:
      type: disk
    gt_size: 16
    use_hflip: true
    use_rot: true
    num_worker_per_gpu: 0
    batch_size_per_gpu: 2
    dataset_enlarge_ratio: 1
    prefetch_mode: ~
network_g:
  type: MSRResNet
  num_in_ch: 3
  num_out_ch: 3
  num_feat: 8
  num_block: 2
  upscale: 4
path:
  pretrain_network_g: ~
  strict_load_g: true
  resume_state: ~
train:
  ema_decay: 0
  optim_g:
    type: Adam
    lr: !!float 2e-4
    weight_decay: 0
    betas: [0.9, 0.99]
  scheduler:
    type: CosineAnnealingRestartLR
    periods: [10]
    restart_weights: [1]
    eta_min: !!float 1e-7
  total_iter: 1
  warmup_iter: -1
  pixel_opt:
    type: L1Loss
    loss_weight: 1.0
    reduction: mean
logger:
  print_freq: 1
  save_checkpoint_freq: !!float 5e3
  use_tb_logger: false
  wandb:
    project: ~
    resume_id: ~
dist_params:
  backend: nccl
  port: 29500
'''
open('tiny.yml', 'w').write(config.replace('NUM_GPU', '0' if SIDE == 'original' else '1'))
"""

# gpt-fast: a randomly initialised stories15M checkpoint and a SentencePiece model with its
# 32000 ids (user-defined pieces), so that decoding any generated id works
_GPT_FAST = """
import os, random, torch, sentencepiece as spm
from model import Transformer
os.makedirs('checkpoints/stories15M', exist_ok=True)
torch.manual_seed(0)
model = Transformer.from_name('stories15M')
torch.save(model.state_dict(), 'checkpoints/stories15M/model.pth')
rng = random.Random(0)
words = [''.join(rng.choice('abcdefgh') for _ in range(5)) for _ in range(400)]
open('corpus.txt', 'w').write('\\n'.join(' '.join(rng.choice(words) for _ in range(12)) for _ in range(300)))
spm.SentencePieceTrainer.train(input='corpus.txt', model_prefix='checkpoints/stories15M/tokenizer', vocab_size=32000,
                               model_type='char', user_defined_symbols=[f'<u{i}>' for i in range(31980)],
                               minloglevel=2)
"""

_MOCO = """
import os, numpy as np
from PIL import Image
rng = np.random.default_rng(0)
for c in ('a', 'b'):
    os.makedirs(f'data/train/{c}', exist_ok=True)
    for i in range(2):
        Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(f'data/train/{c}/{i}.png')
"""

PROJECTS = [
    Project("XPixelGroup/BasicSR", "8d56e3a045f9fb3e1d8872f92ee4a4f07f886b0a",
            "super-resolution trainer: custom CUDA ops (JIT or prebuilt) with PyTorch fallbacks, YAML configs",
            Entry("basicsr/train.py", ("-opt", "tiny.yml"), _BASICSR)),
    Project("pytorch-labs/gpt-fast", "32971d3129541c5bfb4f715abc33d1c5f408d204",
            "LLM inference: torch.compile/Inductor (Triton), int8/int4 weight-only quantisation, tensor parallel",
            Entry("generate.py", ("--checkpoint_path", "checkpoints/stories15M/model.pth", "--prompt", "4",
                                  "--num_samples", "1", "--max_new_tokens", "3", "--device", "cpu"), _GPT_FAST,
                  migrated_args=("--checkpoint_path", "checkpoints/stories15M/model.pth", "--prompt", "4",
                                 "--num_samples", "1", "--max_new_tokens", "3"), trains=False)),
    Project("lucidrains/native-sparse-attention-pytorch", "83fa271c21a0db35ef10d38d1d50aba8a09d3c69",
            "sparse attention: a Triton kernel chosen by a flag, flex attention, .cuda() trainer",
            Entry("train.py", (), _ENWIK8)),
    Project("facebookresearch/moco-v3", "c349e6e24f40d3fedb22d973f92defa4cedf37a7",
            "self-supervised ViT/ResNet: DDP or one GPU only, AMP GradScaler, LARS",
            # its documented launch (one GPU alone raises "Only DistributedDataParallel is supported")
            Entry("main_moco.py", ("-a", "resnet18", "-b", "2", "--epochs", "1", "--workers", "0", "--moco-dim", "16",
                                   "--moco-mlp-dim", "32", "--multiprocessing-distributed", "--world-size", "1",
                                   "--rank", "0", "--dist-url", "tcp://127.0.0.1:29517", "data"), _MOCO)),
    Project("openai/improved-diffusion", "1bc7bbbdc414d83d4abf2ad8cc1446dc36c4e4d5",
            "diffusion trainer: MPI + NCCL process groups, fp16 master weights",
            no_run="dist_util.setup_dist() needs mpi4py and an MPI library (not on this machine), before and after"),
    Project("karpathy/llm.c", "f1e2ace651495b74ae22d45d1723443fd00ecd3a",
            "GPT-2 reference trainer beside CUDA C kernels, launch scripts, TF32/flash flags",
            no_run="train_gpt2.py downloads tiktoken's GPT-2 encoding at start-up (no network here), before and after"),
    Project("huggingface/alignment-handbook", "925acdfe4b2b4e38c3dabd1851bc418f0b656351",
            "Hugging Face fine-tuning: TRL SFT/DPO/ORPO recipes (YAML), accelerate/DeepSpeed launch configs",
            no_run="the recipes fine-tune Hub models on Hub datasets (no network here); entry points need trl"),
    Project("KellerJordan/modded-nanogpt", "f411b3d346aa52d3504324ca93c230fd84c6c07f",
            "speedrun GPT trainer: NCCL on 8 GPUs, FP8 matmuls, Triton kernels, FlexAttention",
            no_run="train_gpt.py asserts 8 CUDA GPUs and an NCCL process group (torchrun), before and after"),
]


def checkout(mirrors: Path, repo: str, commit: str, dest: Path) -> list[str] | None:
    """Write the tree of `commit` from the bare mirror into `dest`; the paths whose blobs the mirror
    lacks (large files) are returned, None when there is no mirror or no such commit."""
    git_dir = mirrors / repo.replace("/", "+") / "repo"
    listing = subprocess.run(["git", f"--git-dir={git_dir}", "ls-tree", "-r", "-z", commit],
                             capture_output=True, check=False)
    if listing.returncode != 0:
        return None
    blobs: list[tuple[bytes, str]] = []
    for item in listing.stdout.split(b"\0"):
        if item:
            meta, name = item.split(b"\t", 1)
            mode, kind, sha = meta.split()
            if kind == b"blob" and mode != b"120000":  # symbolic links are left out
                blobs.append((sha, name.decode()))
    missing: list[str] = []
    with subprocess.Popen(["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE) as batch:
        assert batch.stdin is not None and batch.stdout is not None
        for sha, path in blobs:
            batch.stdin.write(sha + b"\n")
            batch.stdin.flush()
            header = batch.stdout.readline().split()
            if header[-1] == b"missing":
                missing.append(path)
                continue
            data = batch.stdout.read(int(header[2]))
            batch.stdout.read(1)
            target = dest / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        batch.stdin.close()
    return missing


def migrate(original: Path, copy: Path) -> None:
    shutil.copytree(original, copy)
    result = subprocess.run([sys.executable, "-m", "npu_migrate", "apply", "--no-cache", "--isolated", "--quiet", "."],
                            cwd=copy, capture_output=True, text=True, check=False,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    if result.returncode not in (0, 1):
        raise SystemExit(f"{original.name}: apply failed ({result.returncode}): {result.stderr[-1500:]}")


def run_entry(python: str, folder: Path, entry: Entry, side: str, timeout: float) -> dict:
    """Prepare the synthetic inputs in `folder`, then run the entry for one step: the original
    with plain python, the migrated under the emulation."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1", "WANDB_MODE": "disabled",
           "HF_HUB_OFFLINE": "1", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    if entry.prepare:
        prepared = subprocess.run([python, "-c", f"SIDE = {side!r}\n{entry.prepare}"], cwd=folder, env=env,
                                  capture_output=True, text=True, timeout=timeout, check=False)
        if prepared.returncode != 0:
            return {"status": "failed", "type": "prepare", "message": prepared.stderr.strip()[-300:]}
    args = entry.migrated_args if side == "migrated" and entry.migrated_args is not None else entry.args
    command = [python] + (["-m", "npu_migrate.emulation"] if side == "migrated" else []) \
        + [str(DRIVER), entry.script, *args]
    start = time.perf_counter()
    try:
        result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout,
                                check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"status": "failed", "type": "Timeout", "message": f"no step after {timeout:.0f} s"}
    seconds = time.perf_counter() - start
    for line in reversed(result.stdout.splitlines()):
        if line.startswith("{"):
            try:
                return {**json.loads(line), "seconds": seconds}
            except ValueError:
                break
    return {"status": "failed", "type": f"exit {result.returncode}", "message": result.stderr.strip()[-300:],
            "seconds": seconds}


def ran(result: dict | None, trains: bool) -> bool:
    """Whether a run did what its entry is for: a training step, or an inference run to its end."""
    return result is not None and result["status"] == "ok" and bool(result.get("steps") or not trains)


def verdict(result: dict | None, trains: bool = True) -> str:
    if result is None:
        return "-"
    if ran(result, trains):
        return f"ran ({result.get('steps', 0)} step{'s' if result.get('steps') != 1 else ''}" \
            + (f", {result['device']}" if result.get("device") else "") + ")"
    if result["status"] == "ok":
        return "no: ended without a training step"
    where = f" at {result['where']}" if result.get("where") else ""
    return f"no: {result.get('type')}{where}"


@dataclass
class Row:
    project: Project
    tally: Tally
    missing: list[str]
    before: dict | None = None
    after: dict | None = None
    hunks: list[tuple[str, str]] = field(default_factory=list)


def bench_project(project: Project, mirrors: Path, python: str, timeout: float, scratch: Path) -> Row | None:
    name = project.repo.replace("/", "+")
    original = scratch / "src" / name
    missing = checkout(mirrors, project.repo, project.commit, original)
    if missing is None:
        print(f"skipped {project.repo}: no mirror with commit {project.commit} under {mirrors} (fetch it first)")
        return None
    hunks: list[tuple[str, str]] = []
    tally, _seconds, _base, _imports = run_project(original, 1, hunks)
    row = Row(project, tally, missing, hunks=hunks)
    if project.entry is None:
        return row
    clean = scratch / "clean" / name
    shutil.copytree(original, clean)  # the original, left as fetched, for the CPU run
    migrated = scratch / "migrated" / name
    migrate(original, migrated)
    row.before = run_entry(python, clean, project.entry, "original", timeout)
    row.after = run_entry(python, migrated, project.entry, "migrated", timeout)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mirrors", default="/work/.mirror", help="folder of the bare mirrors (OWNER+NAME/repo)")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter with the entry points' packages (CPU torch) for the runs")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run of an entry point")
    parser.add_argument("--only", action="append", default=[], help="only projects whose name contains this")
    parser.add_argument("--hunks-out", help="write every changed hunk here (for the review list)")
    parser.add_argument("--list", action="store_true", help="print silent sites, sent guards and run errors")
    args = parser.parse_args(argv)
    rows: list[Row] = []
    print("| project | commit | files | changed | CUDA sites | rewritten | reported | silent | CUDA-only guards "
          "| sent to NPU | entry point | ran before (CPU) | ran after (emulated NPU) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="runs-") as scratch:
        for project in PROJECTS:
            if args.only and not any(o in project.repo for o in args.only):
                continue
            row = bench_project(project, Path(args.mirrors), args.python, args.timeout, Path(scratch))
            if row is None:
                continue
            rows.append(row)
            t = row.tally
            entry = project.entry.script if project.entry else f"not run: {project.no_run}"
            trains = project.entry.trains if project.entry else True
            print(f"| {project.repo} | {project.commit[:7]} | {t.files} | {t.changed} | {t.sites} | {t.rewritten} "
                  f"| {t.reported} | **{t.silent}** | {t.guards} | **{t.sent}** | {entry} | {verdict(row.before, trains)} "
                  f"| {verdict(row.after, trains)} |", flush=True)
    total = {name: sum(getattr(r.tally, name) for r in rows) for name in ("sites", "rewritten", "reported", "silent",
                                                                          "guards", "sent")}
    runs = [(r, r.project.entry.trains) for r in rows if r.project.entry is not None]
    print(f"| **total** | | | | {total['sites']} | {total['rewritten']} | {total['reported']} | **{total['silent']}** "
          f"| {total['guards']} | **{total['sent']}** | {len(runs)} run | {sum(ran(r.before, t) for r, t in runs)} "
          f"| {sum(ran(r.after, t) for r, t in runs)} |")
    for row in rows:
        if row.missing:
            print(f"absent from the mirror: {row.project.repo}: {len(row.missing)} file(s), e.g. {row.missing[0]}")
        if args.list:
            for site in row.tally.silent_sites:
                print(f"silent: {row.project.repo}: {site}")
            for site in row.tally.sent_sites:
                print(f"sent to the NPU: {row.project.repo}: {site}")
            for side, result in (("before", row.before), ("after", row.after)):
                if result and result["status"] != "ok":
                    print(f"run {side}: {row.project.repo}: {result.get('type')}: {result.get('message', '')[:300]} "
                          f"({result.get('where', '?')})")
    if args.hunks_out:
        hunks = [h for r in rows for h in r.hunks]
        Path(args.hunks_out).write_text("\n\n".join(f"### {i + 1}. {p}\n```diff\n{h}\n```" for i, (p, h)
                                                   in enumerate(hunks)) + "\n", encoding="utf-8")
        print(f"{len(hunks)} changed hunks written to {args.hunks_out}")
    broken = [r for r, trains in runs if ran(r.before, trains) and not ran(r.after, trains)]
    return 1 if total["silent"] or total["sent"] or broken else 0


if __name__ == "__main__":
    sys.exit(main())
