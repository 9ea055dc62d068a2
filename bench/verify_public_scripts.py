"""Script mode on real, unmodified public training scripts (issues 17 and 26).

    python bench/verify_public_scripts.py [--corpus /work/corpus] [--mirror /work/.mirror] [--only adder,gat]
                                          [--steps 2] [--clean-runs 3]

For each script below, the public repository's files are copied from a local clone (the corpus,
`<owner>+<name>` folders; the pinned commit is printed; get them with
`git clone https://github.com/<owner>/<name> && git checkout <commit>`), or, where the corpus has
none, taken at the pinned commit from a bare mirror (`<mirror>/<owner>+<name>/repo`, as the
search tool's `fetch` leaves it) with `git archive`; nothing of theirs is kept here. Small data files are
written next to it where the script reads a data set (synthetic text or tokens: no download), the
copy is migrated with `npu-migrate apply --output-dir`, and then

    npu-migrate verify --device-precision --original ORIG --migrated MIG --format json -- SCRIPT ARGS

runs the unmodified script on both sides (no entry code). Then, one at a time, a migration fault
is injected into the migrated copy and the same command must fail with the first divergence (or
the placement error) at the injected `path.py:LINE`. Printed: one row per run with the verdict,
the exit code, the expected and reported lines, whether the injected line is among the lines the
finding names, and the wall time of the command.

Models and data are tiny (a few layers, batch 2-4, 2 steps) so that each command takes seconds.
Repositories missing from the corpus and the mirror are skipped and said so.

Every command shares one reference store (`--reference-store`, in the bench's work folder): the
clean migration computes each script's reference and noise runs, the faults and benign changes
reuse them, so their wall time is what one more case costs. `--clean-runs N` repeats the clean
migration N-1 more times with `--no-reference-store` (a fresh reference each time) to count false
alarms. karpathy/makemore (issue 26; needs tensorboard installed, which it imports) carries
state, mode, precision-region and memory faults and benign changes, with `--max-peak-ratio 1.5` on
every one of its commands. pytorch/examples' GCN (sparse adjacency built on the CPU) reads a
synthetic graph in Cora's format through an offline `requests` written beside it. pytorch/examples'
DCGAN (the GAN script of issue 26) needs torchvision, whose wheels here are CUDA builds: make a
folder with `python bench/torchvision_site.py DIR` and run the bench with PYTHONPATH=DIR (see that
file), else it is skipped.
"""

from __future__ import annotations

import argparse
import importlib.util
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


_OFFLINE_REQUESTS = '''"""Offline stand-in for `requests.get` (the bench has no network): serves the local cora.tgz."""
import os


class _Response:
    def __init__(self):
        self.raw = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cora.tgz"), "rb")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.raw.close()


def get(url, stream=False):
    return _Response()
'''


def _cora(tree: Path) -> None:
    """A synthetic graph in Cora's file format (1700 papers, 40 binary features, 7 classes, 3000
    citations) as the cora.tgz the GCN script downloads, and an offline `requests` serving it."""
    import io
    import tarfile

    rng = random.Random(0)
    ids = rng.sample(range(10000, 99999), 1700)
    content = "".join(f"{i}\t" + "\t".join(str(int(rng.random() < 0.1)) for _ in range(40))
                      + f"\tclass{rng.randrange(7)}\n" for i in ids)
    cites = "".join(f"{rng.choice(ids)}\t{rng.choice(ids)}\n" for _ in range(3000))
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        for name, text in (("cora/cora.content", content), ("cora/cora.cites", cites)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (tree / "cora.tgz").write_bytes(archive.getvalue())
    (tree / "requests.py").write_text(_OFFLINE_REQUESTS)


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
    commit: str = ""  # taken from the mirror at this commit when the corpus has no clone
    benign: list[tuple[str, str, str, str]] = field(default_factory=list)  # changes that must pass
    options: list[str] = field(default_factory=list)  # more `verify` options for every command
    needs: str = ""  # a module the script imports that may be missing here: the script is skipped without it
    steps: int | None = None  # backward() calls to compare, when the script needs more than --steps


MAKEMORE_FORWARD = "        # feed into the model\n        logits, loss = model(X, Y)\n"
MAKEMORE_MOVE = "    model.to(args.device)\n"
MAKEMORE_ARGS = ["-i", "names.txt", "-o", "out", "--type", "transformer", "--max-steps", "3", "--n-layer", "2",
                 "--n-head", "2", "--n-embd", "16", "--n-embd2", "16", "--batch-size", "32", "--seed", "3407"]
MAKEMORE = Script(
    "makemore", "karpathy+makemore", "", "makemore.py", MAKEMORE_ARGS,
    [("mode: an eval() never undone", "makemore.py", MAKEMORE_MOVE, MAKEMORE_MOVE + "    model.eval()\n"),
     ("precision region: forward under bf16 autocast", "makemore.py", MAKEMORE_FORWARD,
      "        # feed into the model\n        with torch.autocast(device_type=\"cpu\", dtype=torch.bfloat16):\n"
      "            logits, loss = model(X, Y)\n"),
     ("state: AdamW betas (0.9, 0.99) -> (0.9, 0.999)", "makemore.py", "betas=(0.9, 0.99)", "betas=(0.9, 0.999)"),
     ("memory: forward hooks keep every activation (and its graph)", "makemore.py", MAKEMORE_MOVE,
      MAKEMORE_MOVE + "    for layer in model.modules(): layer.register_forward_hook("
      "lambda m, a, out: KEPT.append(out))\n")],
    commit="988aa59e4d8f",
    benign=[("autocast region, disabled", "makemore.py", MAKEMORE_FORWARD,
             "        # feed into the model\n        with torch.autocast(device_type=\"cpu\", enabled=False):\n"
             "            logits, loss = model(X, Y)\n"),
            ("redundant train() before the forward", "makemore.py", MAKEMORE_FORWARD,
             MAKEMORE_FORWARD.replace("        logits", "        model.train()\n        logits")),
            ("logging hook keeping a float per call", "makemore.py", MAKEMORE_MOVE,
             MAKEMORE_MOVE + "    for layer in model.modules(): layer.register_forward_hook("
             "lambda m, a, out: KEPT.append(float(out[0].detach().abs().mean()) if isinstance(out, tuple) "
             "else float(out.detach().abs().mean())))\n")],
    options=["--max-peak-ratio", "1.5"])

GCN_LOAD_RETURN = "return features.to_sparse().to(device), labels.to(device), adj_mat.to_sparse().to(device)"
GCN = Script(  # portable code (torch.accelerator): apply changes nothing, the faults go into the copy
    "gcn", "pytorch+examples", "gcn", "main.py", ["--epochs", "3", "--val-every", "1"],
    [("sparse adjacency left on the CPU", "main.py", GCN_LOAD_RETURN,
      GCN_LOAD_RETURN.replace("adj_mat.to_sparse().to(device)", "adj_mat.to_sparse()")),
     ("renormalisation without the square root", "main.py", "degree_mat = torch.sqrt(1 / degree_mat)",
      "degree_mat = 1 / degree_mat"),
     ("dropout halved", "main.py", "self.dropout = nn.Dropout(dropout_p)", "self.dropout = nn.Dropout(dropout_p / 2)"),
     ("state: Adam without weight decay", "main.py", "Adam(gcn.parameters(), lr=args.lr, weight_decay=args.l2)",
      "Adam(gcn.parameters(), lr=args.lr)")],
    data=_cora, commit="77f55b912142",
    benign=[("adjacency dense on the device", "main.py", GCN_LOAD_RETURN,
             GCN_LOAD_RETURN.replace("adj_mat.to_sparse().to(device)", "adj_mat.to(device)"))],
    options=["--max-peak-ratio", "1.5"])

DCGAN_D_FORWARD = "        output = netD(real_cpu)\n"
DCGAN_D_BUILT = "netD.apply(weights_init)\n"
DCGAN = Script(  # torchvision's FakeData: no download; torchvision must import beside this torch
    "dcgan", "pytorch+examples", "dcgan", "main.py",
    ["--dataset", "fake", "--accel", "--ngf", "8", "--ndf", "8", "--nz", "16", "--batchSize", "4", "--workers", "0",
     "--manualSeed", "1", "--dry-run", "--outf", "out"],
    [("state: Adam betas of D (0.5 -> 0.9)", "main.py",
      "optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))",
      "optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(0.9, 0.999))"),
     ("state: BatchNorm momentum in D", "main.py", "nn.BatchNorm2d(ndf * 2),", "nn.BatchNorm2d(ndf * 2, momentum=0.01),"),
     ("LeakyReLU slope 0.2 -> 0.02 (first layer of D)", "main.py", "nn.LeakyReLU(0.2, inplace=True),",
      "nn.LeakyReLU(0.02, inplace=True),"),
     ("fake batch not detached for D's step", "main.py", "output = netD(fake.detach())", "output = netD(fake)"),
     ("noise left on the CPU", "main.py", "noise = torch.randn(batch_size, nz, 1, 1, device=device)",
      "noise = torch.randn(batch_size, nz, 1, 1)"),
     ("mode: D switched to eval() after its init", "main.py", DCGAN_D_BUILT, DCGAN_D_BUILT + "netD.eval()\n"),
     ("precision region: D's real forward under bf16 autocast", "main.py", DCGAN_D_FORWARD,
      "        with torch.autocast(\"npu\", dtype=torch.bfloat16):\n    " + DCGAN_D_FORWARD),
     # (hooks on D alone keep 1.36x the clean peak of one dry-run iteration: under --max-peak-ratio 1.5)
     ("memory: forward hooks keep every output of G and D", "main.py", DCGAN_D_BUILT,
      DCGAN_D_BUILT + "for layer in [*netG.modules(), *netD.modules()]: "
                      "layer.register_forward_hook(lambda m, a, out: KEPT.append(out))\n")],
    commit="77f55b912142",
    benign=[("D's real forward under a disabled autocast region", "main.py", DCGAN_D_FORWARD,
             "        with torch.autocast(\"npu\", enabled=False):\n    " + DCGAN_D_FORWARD),
            ("redundant netG.train() before the G step", "main.py", "        netG.zero_grad()\n",
             "        netG.train()\n        netG.zero_grad()\n")],
    options=["--max-peak-ratio", "1.5"], needs="torchvision",
    steps=3)  # one iteration: D on real, D on fake, G

NANOGPT_ARGS = ["--dataset=tiny", "--batch_size=2", "--block_size=32", "--n_layer=2", "--n_head=2", "--n_embd=32",
                "--max_iters=3", "--eval_interval=1000", "--eval_iters=1", "--compile=False", "--log_interval=1"]

SCRIPTS = [
    Script("adder", "karpathy+minGPT", "", "projects/adder/adder.py",
           ["--trainer.max_iters=5", "--data.ndigit=1", "--trainer.num_workers=0"],
           [("batch left on the CPU", "mingpt/trainer.py", "batch = [t.to(self.device) for t in batch]",
             "batch = [t for t in batch]"),
            ("GELU constant off (0.044715 -> 0.0447)", "mingpt/model.py", "x + 0.044715 * torch.pow(x, 3.0)",
             "x + 0.0447 * torch.pow(x, 3.0)")],
           commit="37baab71b9ab"),
    Script("word_language_model", "pytorch+examples", "word_language_model", "main.py",
           ["--accel", "--epochs", "1", "--emsize", "32", "--nhid", "32", "--batch_size", "4", "--bptt", "8",
            "--log-interval", "1"],
           [("bf16 round trip (embedding)", "model.py", "emb = self.drop(self.encoder(input))",
             "emb = self.drop(self.encoder(input).bfloat16().float())"),
            ("hidden state not detached", "main.py",
             "            hidden = repackage_hidden(hidden)\n            output, hidden = model(data, hidden)",
             "            output, hidden = model(data, hidden)")],
           data=_wikitext, commit="77f55b912142"),
    Script("nanogpt", "karpathy+nanoGPT", "", "train.py", [*NANOGPT_ARGS, "--dtype=float32"],
           [("LayerNorm eps 1e-5 -> 1e-3", "model.py", "self.weight, self.bias, 1e-5)",
             "self.weight, self.bias, 1e-3)"),
            ("batch x left on the CPU", "train.py", "x, y = x.pin_memory().to(device, non_blocking=True), ",
             "x, y = x.pin_memory(), ")],
           data=_tokens, commit="3adf61e154c3"),
    Script("nanogpt-amp", "karpathy+nanoGPT", "", "train.py", NANOGPT_ARGS,  # dtype bfloat16: torch.amp.autocast
           [("LayerNorm input rounded to bf16 (AMP)", "model.py", "return F.layer_norm(input, self.weight.shape",
             "return F.layer_norm(input.bfloat16(), self.weight.shape")],
           data=_tokens, commit="3adf61e154c3"),
    MAKEMORE,
    GCN,
    DCGAN,
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
    """Copy `tree` to `dest` with `old` replaced by `new` in `file`; returns the file:line the
    finding must name: the first line the replacement changes (a `with` line, a hook's line)."""
    shutil.copytree(tree, dest)
    path = dest / file
    text = path.read_text()
    if old not in text:
        raise SystemExit(f"{path}: {old!r} not in the migrated text (another commit of the corpus?)")
    if "KEPT." in new and "\nKEPT = []" not in text:  # the hooks' list, at module level
        text = text.replace("\nimport torch\n", "\nimport torch\nKEPT = []\n", 1)
        if "\nKEPT = []" not in text:
            raise SystemExit(f"{path}: no 'import torch' line to put the hooks' list after")
    position = text.index(old)
    common = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
    path.write_text(text.replace(old, new, 1))
    return f"{file}:{text[:position + common].count(chr(10)) + 1}"


def source_tree(script: Script, corpus: Path, mirror: Path, dest: Path) -> str | None:
    """Copy the script's files to `dest` from the corpus clone or, at the pinned commit, from the
    fetched mirror; returns where they came from (None: neither has them)."""
    repo = corpus / script.repo
    if (repo / script.subtree / script.script).is_file():
        copy_tree(repo / script.subtree if script.subtree else repo, dest)
        return f"{script.repo} @ {pinned(repo)} (corpus)"
    git_dir = mirror / script.repo / "repo"
    if not (script.commit and git_dir.is_dir()):
        return None
    dest.mkdir(parents=True)
    # data folders are left out as copy_tree leaves them (a mirror may lack their large blobs)
    archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", script.commit, script.subtree or ".",
                              ":(exclude,glob)**/data/**"], capture_output=True, check=False)
    if archive.returncode:
        return None
    subprocess.run(["tar", "-x", "-C", str(dest), *(["--strip-components", str(script.subtree.count("/") + 1)]
                                                     if script.subtree else [])],
                   input=archive.stdout, check=True)
    return f"{script.repo} @ {script.commit} (mirror {git_dir})"


def verify(script: Script, original: Path, migrated: Path, steps: int, store: list[str]) -> tuple[dict, int, float]:
    started = time.perf_counter()
    proc = cli("verify", "--device-precision", "--steps", str(script.steps or steps), "--original", str(original), "--migrated",
               str(migrated), "--format", "json", *store, *script.options, "--", script.script, *script.args,
               env=script.env)
    wall = time.perf_counter() - started
    try:
        return json.loads(proc.stdout), proc.returncode, wall
    except json.JSONDecodeError:
        return {"verdict": "error", "reason": (proc.stderr or proc.stdout).strip()[-300:]}, proc.returncode, wall


def run(args: argparse.Namespace) -> int:
    corpus, mirror = Path(args.corpus), Path(args.mirror)
    only = set(args.only.split(",")) if args.only else None
    work = Path(tempfile.mkdtemp(prefix="verify-public-"))
    store = ["--reference-store", str(work / "store")]
    rows = []
    for script in SCRIPTS:
        if only and script.name not in only:
            continue
        if script.needs and importlib.util.find_spec(script.needs) is None:
            print(f"{script.name}: needs {script.needs}, which this Python cannot import; skipped", flush=True)
            continue
        original, migrated = work / f"{script.name}_original", work / f"{script.name}_migrated"
        origin = source_tree(script, corpus, mirror, original)
        if origin is None:
            print(f"{script.name}: {script.repo} in neither {corpus} nor {mirror}; skipped", flush=True)
            continue
        if script.data:
            script.data(original)
        applied = cli("apply", str(original), "--output-dir", str(migrated))
        if applied.returncode not in (0, 1) or not migrated.is_dir():
            print(f"{script.name}: apply failed: {applied.stderr.strip()[-300:]}")
            continue
        for item in ("data", "input.txt", "names.txt", "cora.tgz"):  # data the migration does not copy (not code)
            if (original / item).exists() and not (migrated / item).exists():
                (shutil.copytree if (original / item).is_dir() else shutil.copy)(original / item, migrated / item)
        print(f"{script.name}: {origin}: {script.script} {' '.join(script.args)}", flush=True)
        cases = [("clean migration", None, migrated, store)]
        for kind, changes in (("fault", script.faults), ("benign", script.benign)):
            for index, (label, file, old, new) in enumerate(changes):
                tree = work / f"{script.name}_{kind}{index + 1}"
                expected = inject(migrated, tree, file, old, new)
                cases.append((f"{kind}: {label}", expected if kind == "fault" else None, tree, store))
        cases += [(f"clean migration, fresh reference {n + 2}", None, migrated, ["--no-reference-store"])
                  for n in range(args.clean_runs - 1)]
        for label, expected, tree, store_options in cases:
            outcome, code, wall = verify(script, original, tree, args.steps, store_options)
            reported = outcome.get("location") or "-"
            if expected is None:
                ok = outcome.get("verdict") == "pass"
            else:
                ok = outcome.get("verdict") == "fail" and expected in outcome.get("sites", [])
            reused = ",".join((outcome.get("reference_store") or {}).get("reused", [])) or "-"
            rows.append((script.name, label, outcome.get("verdict"), code, expected or "-", reported, ok, wall, reused))
            print(f"  {label:<58} {outcome.get('verdict', '?'):<5} exit {code}  expected {expected or '-':<14} "
                  f"reported {reported:<14} {'OK' if ok else 'WRONG'}  {wall:5.1f} s  reused {reused}"
                  + ("" if ok else f"  [{outcome.get('reason', '')[:200]}]"), flush=True)
    print("\n| script | run | verdict | exit | injected at | reported at | right | wall s | reference reused |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, label, verdict, code, expected, reported, ok, wall, reused in rows:
        print(f"| {name} | {label} | {verdict} | {code} | {expected} | {reported} | {'yes' if ok else 'NO'} | "
              f"{wall:.1f} | {reused} |")
    right = sum(1 for row in rows if row[6])
    reused_walls = sorted(row[7] for row in rows if row[8] == "reference,noise")
    if reused_walls:
        print(f"\nper-case wall with a reused reference: median {reused_walls[len(reused_walls) // 2]:.1f} s, "
              f"max {reused_walls[-1]:.1f} s over {len(reused_walls)} cases")
    print(f"{right}/{len(rows)} runs right (clean runs and benign changes pass, faults fail at the injected line); "
          f"steps={args.steps}")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if right == len(rows) else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=os.environ.get("NPU_MIGRATE_CORPUS", "/work/corpus"))
    parser.add_argument("--mirror", default=os.environ.get("NPU_MIGRATE_MIRROR", "/work/.mirror"),
                        help="folder of fetched bare mirrors, <owner>+<name>/repo")
    parser.add_argument("--clean-runs", type=int, default=1, help="clean migrations per script (fresh reference each)")
    parser.add_argument("--only", default="", help="script names, e.g. adder,nanogpt")
    parser.add_argument("--steps", type=int, default=2)
    sys.exit(run(parser.parse_args()))


if __name__ == "__main__":
    main()
