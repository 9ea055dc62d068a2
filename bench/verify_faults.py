"""Fault benchmark of `npu-migrate verify` script mode.

    python bench/verify_faults.py [--steps 2] [--only ID,ID] [--clean-runs 3] [--exact] [--corpus DIR]
                                  [--max-peak-ratio 1.1]

Models: the real public code where a clone is present in the corpus (`--corpus`, default
/work/corpus; folders `<owner>+<name>`, the commit used is printed): pytorch/examples
word_language_model (main.py, model.py, data.py unmodified; --model LSTM and --model Transformer,
on a small synthetic corpus), and karpathy/minGPT's GPT (mingpt/ unmodified, driven by a short
training script written here, bench/verify_models/mingpt/train.py). Without a clone, and for
mnist always (pytorch/examples mnist needs torchvision and a download), the re-implementations in
bench/verify_models are used instead; the output says which. Each is migrated by `apply`'s engine (the real codemods),
then one migration fault at a time is injected into the migrated tree, and the unmodified script
runs on both sides through `verify_script` (the reference and noise runs are shared per model).

Printed: per case the verdict and the reported line; then caught / located / missed of the faults,
false alarms of the benign changes and of repeated clean runs. "Located" means the finding names
the injected line of the migrated tree: as the diverging op's line, the line that built the module
it ran in, the line of ops only one side runs right before it, or the line that made a CPU tensor.
By default the migrated side runs with --device-precision (HF32 conv, and matmul where allowed), so
clean runs carry device rounding noise and the thresholds have to separate it from the faults.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench_paths import ROOT

from npu_migrate.apply.engine import migrate_source
from npu_migrate.verify.script import ScriptOptions, verify_script

MODELS = ROOT / "bench" / "verify_models"
CORPUS_DEFAULT = os.environ.get("NPU_MIGRATE_CORPUS", "/work/corpus")
WLM_REAL = ("pytorch+examples", "word_language_model")
MINGPT_REAL = ("karpathy+minGPT", "mingpt")

SCRIPTS = {
    "mnist": ("mnist", "main.py", ["--batch-size", "8", "--test-batch-size", "16", "--epochs", "1",
                                   "--log-interval", "1"]),
    "lstm": ("word_language_model", "main.py", ["--cuda", "--model", "LSTM", "--emsize", "32", "--nhid", "32",
                                                "--batch_size", "4", "--bptt", "8", "--epochs", "1",
                                                "--dropout", "0", "--log-interval", "1"]),
    "transformer": ("word_language_model", "main.py", ["--cuda", "--model", "Transformer", "--emsize", "32",
                                                       "--nhid", "32", "--nhead", "2", "--batch_size", "4",
                                                       "--bptt", "8", "--epochs", "1", "--dropout", "0",
                                                       "--log-interval", "1"]),
    "gpt": ("nanogpt", "train.py", ["--iters", "50", "--batch_size", "2"]),
}

# (id, model, file, text in the migrated file, replacement): migration faults, one at a time
FAULTS = [
    ("missing .to(device) on the batch", "mnist", "main.py",
     "data, target = data.to(device), target.to(device)\n        optimizer.zero_grad()",
     "data, target = data, target.to(device)\n        optimizer.zero_grad()"),
    ("different seed", "mnist", "main.py", "torch.manual_seed(args.seed)", "torch.manual_seed(args.seed + 1)"),
    ("loss reduction changed", "mnist", "main.py", "loss = F.nll_loss(output, target)",
     "loss = F.nll_loss(output, target, reduction='sum')"),
    ("dropped op (relu after conv1)", "mnist", "main.py",
     "        x = F.relu(x)\n        x = self.conv2(x)", "        x = self.conv2(x)"),
    ("wrong dtype (float64 log_softmax)", "mnist", "main.py", "output = F.log_softmax(x, dim=1)",
     "output = F.log_softmax(x, dim=1, dtype=torch.float64)"),
    ("bf16 round trip (flatten)", "mnist", "main.py", "x = torch.flatten(x, 1)",
     "x = torch.flatten(x, 1).bfloat16().float()"),
    ("normalisation constant off by 0.25%", "mnist", "main.py", "(self.images[index] - 0.1307) / 0.3081",
     "(self.images[index] - 0.1307) / (0.3081 * 1.0025)"),
    ("changed init (decoder bias)", "lstm", "model.py", "nn.init.zeros_(self.decoder.bias)\n        nn.init.uniform_(self.decoder.weight",
     "nn.init.constant_(self.decoder.bias, 0.01)\n        nn.init.uniform_(self.decoder.weight"),
    ("hidden state left on the CPU", "lstm", "model.py",
     "return (weight.new_zeros(self.nlayers, bsz, self.nhid),",
     "return (torch.zeros(self.nlayers, bsz, self.nhid),"),
    ("gradient clipping changed", "lstm", "main.py", "torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)",
     "torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip * 2)"),
    ("bf16 round trip (embedding)", "lstm", "model.py", "emb = self.drop(self.encoder(input))",
     "emb = self.drop(self.encoder(input).bfloat16().float())"),
    ("dropped op (log_softmax)", "lstm", "model.py", "return F.log_softmax(decoded, dim=1), hidden",
     "return decoded, hidden"),
    ("hidden state not detached", "lstm", "main.py", "            hidden = repackage_hidden(hidden)\n            output, hidden = model(data, hidden)",
     "            output, hidden = model(data, hidden)"),
    ("LayerNorm eps 1e-3", "transformer", "model.py", "num_encoder_layers=nlayers)",
     "num_encoder_layers=nlayers, layer_norm_eps=1e-3)"),
    ("constant baked in a buffer (positional encoding)", "transformer", "model.py",
     "(-math.log(10000.0) / d_model)", "(-math.log(1000.0) / d_model)"),
    ("embedding scale off by 0.25%", "transformer", "model.py", "src = self.input_emb(src) * math.sqrt(self.ninp)",
     "src = self.input_emb(src) * math.sqrt(self.ninp) * 1.0025"),
    ("attention mask flipped", "transformer", "model.py", "torch.log(torch.tril(", "torch.log(torch.triu("),
    ("fp16 round trip (logits)", "transformer", "model.py", "output = self.decoder(output)",
     "output = self.decoder(output).half().float()"),
    ("changed init (normal instead of uniform)", "transformer", "model.py",
     "nn.init.uniform_(self.input_emb.weight, -initrange, initrange)", "nn.init.normal_(self.input_emb.weight, 0, initrange)"),
    ("attention mask left on the CPU", "transformer", "model.py",
     "mask = self._generate_square_subsequent_mask(len(src)).to(device)",
     "mask = self._generate_square_subsequent_mask(len(src))"),
    ("AdamW weight decay dropped", "gpt", "train.py", "lr=1e-3, weight_decay=0.1)", "lr=1e-3)"),
    # issue 26: a mode, a precision region, optimizer state, memory (every command has --max-peak-ratio)
    ("mode: eval() in place of train()", "mnist", "main.py", "    model.train()\n    for batch_idx",
     "    model.eval()\n    for batch_idx"),
    ("precision region: forward under bf16 autocast", "mnist", "main.py",
     "        output = model(data)\n        loss = F.nll_loss(output, target)",
     "        with torch.autocast(\"npu\", dtype=torch.bfloat16):\n            output = model(data)\n"
     "        loss = F.nll_loss(output, target)"),
    ("state: Adadelta rho 0.9 -> 0.95", "mnist", "main.py", "optim.Adadelta(model.parameters(), lr=args.lr)",
     "optim.Adadelta(model.parameters(), lr=args.lr, rho=0.95)"),
    ("memory: forward hooks keep every activation", "mnist", "main.py", "    optimizer = optim.Adadelta(",
     "    for layer in model.modules(): layer.register_forward_hook(lambda m, a, out, kept=[]: kept.append(out))\n"
     "    optimizer = optim.Adadelta("),
    # the three faults msprobe's rule lets through, now with HF32 matmuls on (device noise present)
    ("LayerNorm eps 1e-3, HF32 on", "transformer+hf32", "model.py", "num_encoder_layers=nlayers)",
     "num_encoder_layers=nlayers, layer_norm_eps=1e-3)"),
    ("embedding scale off by 0.25%, HF32 on", "transformer+hf32", "model.py",
     "src = self.input_emb(src) * math.sqrt(self.ninp)", "src = self.input_emb(src) * math.sqrt(self.ninp) * 1.0025"),
    ("bf16 round trip (logits), HF32 on", "transformer+hf32", "model.py", "output = self.decoder(output)",
     "output = self.decoder(output).bfloat16().float()"),
]

HF32_SWITCH = ("main.py", "corpus = data.Corpus(args.data)", "torch.npu.matmul.allow_hf32 = True\ncorpus = data.Corpus(args.data)")

# benign changes: a migration that is right must pass
BENIGN = [
    ("HF32 matmul allowed (torch_npu's switch)", "transformer", *HF32_SWITCH),
    ("fused RMSNorm (torch_npu.npu_rms_norm)", "gpt", "model.py",
     "return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight",
     "return torch_npu.npu_rms_norm(x, self.weight, epsilon=self.eps)[0]"),
    ("fused attention (torch_npu.npu_fusion_attention)", "gpt", "model.py",
     ("        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))\n"
      "        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))\n"
      "        att = F.softmax(att, dim=-1)\n        y = att @ v\n"),
     ("        y = torch_npu.npu_fusion_attention(q, k, v, self.n_head, \"BNSD\", scale=1.0 / math.sqrt(k.size(-1)),\n"
      "                                           atten_mask=self.bias[:, :, :T, :T] == 0)[0]\n")),
    ("renamed layer (c_attn -> qkv_proj)", "gpt", "model.py", "self.c_attn", "self.qkv_proj"),
]


# the same benign changes on minGPT's real model code (mingpt/model.py)
MINGPT_ATTENTION = ("        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))\n"
                    "        att = att.masked_fill(self.bias[:,:,:T,:T] == 0, float('-inf'))\n"
                    "        att = F.softmax(att, dim=-1)\n        att = self.attn_dropout(att)\n"
                    "        y = att @ v # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)\n")
BENIGN_MINGPT = [
    BENIGN[0],
    ("fused GELU (F.gelu tanh) for NewGELU", "gpt", "mingpt/model.py",
     "return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))",
     "return F.gelu(x, approximate='tanh')"),
    ("fused attention (torch_npu.npu_fusion_attention)", "gpt", "mingpt/model.py", MINGPT_ATTENTION,
     ("        y = torch_npu.npu_fusion_attention(q, k, v, self.n_head, \"BNSD\", scale=1.0 / math.sqrt(k.size(-1)),\n"
      "                                           atten_mask=self.bias[:,:,:T,:T] == 0)[0]\n")),
    ("renamed layer (c_attn -> qkv_proj)", "gpt", "mingpt/model.py", "self.c_attn", "self.qkv_proj"),
]


def _commit(repo: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def sources(corpus: Path, work: Path) -> dict[str, tuple[Path, str, list[str], str]]:
    """model -> (source tree, script, arguments, where the code comes from): the real public code
    when its clone is in the corpus, else the re-implementation in bench/verify_models."""
    found: dict[str, tuple[Path, str, list[str], str]] = {}
    wlm = corpus / WLM_REAL[0] / WLM_REAL[1]
    if (wlm / "main.py").is_file() and (wlm / "model.py").is_file() and (wlm / "data.py").is_file():
        tree = work / "source_wlm"
        tree.mkdir()
        for name in ("main.py", "model.py", "data.py"):
            shutil.copy(wlm / name, tree / name)
        shutil.copytree(MODELS / "word_language_model" / "data", tree / "data")
        origin = f"pytorch/examples@{_commit(wlm)} word_language_model (real code)"
        for model in ("lstm", "transformer"):
            args = ["--accel" if a == "--cuda" else a for a in SCRIPTS[model][2]] + ["--data", "./data/synthetic"]
            found[model] = (tree, "main.py", args, origin)
    mingpt = corpus / MINGPT_REAL[0] / MINGPT_REAL[1]
    if (mingpt / "model.py").is_file():
        tree = work / "source_mingpt"
        shutil.copytree(mingpt, tree / "mingpt", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(MODELS / "mingpt" / "train.py", tree / "train.py")
        found["gpt"] = (tree, "train.py", SCRIPTS["gpt"][2], f"karpathy/minGPT@{_commit(mingpt)} mingpt/model.py (real code)")
    for model, (folder, script, args) in SCRIPTS.items():
        found.setdefault(model, (MODELS / folder, script, args, f"bench/verify_models/{folder} (re-implementation)"))
    return found


def migrate(model_dir: Path, dest: Path) -> Path:
    shutil.copytree(model_dir, dest)
    for path in dest.rglob("*.py"):
        path.write_text(migrate_source(path.read_text(), str(path)))
    return dest


def inject(tree: Path, dest: Path, file: str, old: str, new: str) -> str:
    """Copy `tree` to `dest` with `old` replaced by `new` in `file`; returns the migrated tree's
    file:line where the change starts."""
    shutil.copytree(tree, dest)
    path = dest / file
    text = path.read_text()
    if old not in text:
        raise SystemExit(f"{file}: {old!r} not in the migrated text; the fixture or the codemods changed")
    if "torch_npu." in new and "import torch_npu" not in text:
        text = text.replace("import torch\n", "import torch\nimport torch_npu\n", 1)
    position = text.index(old)
    text = text.replace(old, new, -1 if old == "self.c_attn" else 1)
    path.write_text(text)
    return f"{file}:{text[:position].count(chr(10)) + 1}"


def _switch(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if old not in text:
        raise SystemExit(f"{path}: {old!r} not in the migrated text")
    path.write_text(text.replace(old, new, 1))


def run(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="verify-faults-"))
    models = sources(Path(args.corpus), work)
    for name, (_, script, _, origin) in models.items():
        print(f"model {name:<11} {script:<8} {origin}", flush=True)
    migrated = {name: migrate(source, work / f"migrated_{name}") for name, (source, _, _, _) in models.items()}
    cache: dict = {}
    benign = BENIGN_MINGPT if "minGPT" in models["gpt"][3] else BENIGN

    def options(model: str, tree: Path) -> ScriptOptions:
        source, script, script_args, _ = models[model]
        return ScriptOptions(source, tree, script, script_args, steps=args.steps,
                             device_precision=not args.exact, timeout=args.timeout,
                             max_peak_ratio=args.max_peak_ratio)

    only = set(args.only.split(",")) if args.only else None
    rows = []
    started = time.perf_counter()
    for kind, cases in (("fault", FAULTS), ("benign", benign)):
        for index, (label, model, file, old, new) in enumerate(cases):
            case_id = f"{kind[0]}{index + 1}"
            if only and case_id not in only:
                continue
            model, hf32 = model.removesuffix("+hf32"), model.endswith("+hf32")
            tree = work / f"{case_id}_{model}"
            expected = inject(migrated[model], tree, file, old, new)
            if hf32:  # torch_npu's switch, set by the migrated code (a line above the fault's file)
                _switch(tree / HF32_SWITCH[0], *HF32_SWITCH[1:])
            t0 = time.perf_counter()
            outcome = verify_script(options(model, tree), cache)
            located = expected in outcome.sites()
            rows.append((kind, case_id, label, model, outcome, expected, located, time.perf_counter() - t0))
            print(f"{case_id:>4} {kind:<6} {model:<11} {outcome.verdict:<5} {'LOCATED' if located else '':<7} "
                  f"expected {expected:<16} reported {outcome.location or '-':<16} {label}"
                  + ("" if outcome.verdict == "pass" and not args.reasons else f"  [{outcome.reason[:140]}]")
                  + (f"  worst distance/tolerance {outcome.comparison.worst_ratio:.2f}"
                     if args.reasons and outcome.comparison else "")
                  + f"  peak memory ratio {(outcome.data.get('memory') or {}).get('ratio') or float('nan'):.3f}",
                  flush=True)
    clean = []
    if not only or args.clean_runs:
        for repeat in range(3 if args.clean_runs is None else args.clean_runs):
            for model in SCRIPTS:
                outcome = verify_script(options(model, migrated[model]), {} if repeat else cache)
                clean.append((model, outcome))
                ratio = outcome.comparison.worst_ratio if outcome.comparison else float("nan")
                memory = (outcome.data.get("memory") or {}).get("ratio") or float("nan")
                print(f"clean{repeat + 1} {model:<11} {outcome.verdict:<5} {outcome.reason[:120]} "
                      f"(worst distance/tolerance {ratio:.2f}, peak memory ratio {memory:.3f})", flush=True)
    faults = [r for r in rows if r[0] == "fault"]
    caught = [r for r in faults if r[4].verdict == "fail"]
    located = [r for r in caught if r[6]]
    benign_alarms = [r for r in rows if r[0] == "benign" and r[4].verdict != "pass"]
    clean_alarms = [c for c in clean if c[1].verdict != "pass"]
    print(f"\nfaults: {len(faults)}  caught: {len(caught)}/{len(faults)}  located at the injected line: "
          f"{len(located)}/{len(faults)}  missed: {len(faults) - len(caught)}")
    print(f"false alarms: benign {len(benign_alarms)}/{len([r for r in rows if r[0] == 'benign'])}, "
          f"clean runs {len(clean_alarms)}/{len(clean)}")
    print(f"migrated side: {'exact float32' if args.exact else 'device precision (HF32)'}; steps={args.steps}; "
          f"wall {time.perf_counter() - started:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--only", default="", help="case ids, e.g. f1,f14,b2")
    parser.add_argument("--clean-runs", type=int, default=None, help="default 3, none with --only")
    parser.add_argument("--max-peak-ratio", type=float, default=1.1,
                        help="memory budget of every command (migrated/reference peak)")
    parser.add_argument("--exact", action="store_true", help="migrated side in exact float32 (no HF32)")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--reasons", action="store_true", help="print the reason of passing cases too")
    parser.add_argument("--corpus", default=CORPUS_DEFAULT, help="folder of public clones (<owner>+<name>)")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
