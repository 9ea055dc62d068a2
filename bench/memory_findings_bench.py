"""Can the memory findings be trusted? Leak precision/recall, peak error, inefficient blocks
(issues 16 and 28).

    python bench/memory_findings_bench.py [--snapshots /work/shared/snapshots]
                                          [--corpus /work/corpus/snapshots]
                                          [--mirrors /work/.mirror]

Inputs:
* the real snapshots in --snapshots (per device), each labelled with the leak a person finds
  in it (LABELS below, with the reason);
* the real public snapshots listed in bench/memory_snapshots.json (repo, commit, path, what the
  run is, the label and its reason), read from --corpus, or else with `git show` from a fetched
  mirror of the repository in --mirrors; they are not in this repository: an absent one is
  skipped with the command that fetches it;
* the public msMemScope exports of the same manifest (`msmemscope`), whose peaks are checked
  against an independent dict-based replay of their rows, and the `compare` pairs whose
  difference is a known leak (msMemScope's own leak-compare example), plus the generated pairs
  (the example rebuilt in fixtures/memory, a training run with and without a planted leak);
* MEM005 (inefficient blocks): every finding and every flagged block on the real inputs, and
  the generated idle cases (scenarios.idle_cases), printed for review by hand
  (bench/memory_inefficient_review.md holds the verdicts);
* generated leak/no-leak pairs (npu_migrate/memory/scenarios.py): single passes of 32- and
  48-layer models (forward+backward+optimizer, forward+backward, forward only, torch_npu
  shape), 12-step training runs whose step evidence is the optimizer's frames or
  ProfilerStep annotations (also behind the emulation layer, also torch_npu-shaped), and
  inference loops with no step evidence at all (a 4.4 GiB linear leak, no leak, a leak behind
  the emulation layer);
* 40 seeded random runs (random_cases: depth 4-64, 1-80 iterations, widths, leak sizes from
  64 KiB to 8 MiB or none, each kind of evidence, with or without times and the emulation layer);
* peak checks: every input above, a trace that starts with the frees of 512 MiB (true peak
  before its first event), and ring-buffer cuts of a training run at 5 points.

Prints per input the verdict, then: leak precision and recall, false leaks on single passes,
planted leaks found at the right user line, the largest peak error against the independent
dict-based oracle (tests/memory/reference.py) and against the known true peak.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench_paths import ROOT

from reference import load_raw, replay_msmemscope
from reference import replay as reference_replay

import subprocess
import tempfile

from npu_migrate.memory.compare import compare
from npu_migrate.memory.loader import load_snapshot, normalise
from npu_migrate.memory.report import analyze
from npu_migrate.memory.scenarios import (
    cases,
    deep_model,
    idle_cases,
    random_cases,
    starts_with_frees,
)
from npu_migrate.memory.synthetic import truncate

# (file name, device) -> expected leak site, or None; and why a person says so
LABELS = {
    ("snapshot_1768383987920985470.pkl", 0): (None, "allocated at step starts is flat"),
    ("snapshot_expandable.pkl", 0): ("memory_leaks_demo.py:12 (train_one_step)",
                                     "+40 MiB per step, 40 MiB blocks from line 12 never freed"),
    ("snapshot_with_empty_cache.pkl", 0): ("memory_leaks_demo.py:11 (train_one_step)",
                                           "+40 MiB per step from line 11"),
    ("snapshot_with_empty_cache_expandable.pkl", 0): (
        "memory_leaks_demo.py:11 (train_one_step)", "+40 MiB per step from line 11"),
    ("snapshot_with_multi_devices.pkl", 0): ("memory_leaks_demo.py:11 (train_one_step)",
                                             "device 0 is the empty_cache leak demo"),
    ("snapshot_with_multi_devices.pkl", 1): (None, "device 1 is the flat demo"),
    ("small_training_step.pickle", 0): (None, "one training step (single pass)"),
    ("multi_gpu_expandable_oom.pickle", 0): (None, "one training step (single pass)"),
    ("multi_gpu_expandable_oom.pickle", 1): (None, "one forward pass ending in an OOM"),
    ("multi_gpu_expandable_oom.pickle", 2): (None, "one forward pass (activations kept)"),
}
SINGLE_PASS_REAL = {"small_training_step.pickle", "multi_gpu_expandable_oom.pickle"}
MANIFEST = ROOT / "bench" / "memory_snapshots.json"


class Score:
    def __init__(self) -> None:
        self.tp = self.fp = self.fn = 0
        self.single_false = self.single_cases = 0
        self.planted = self.planted_right = 0
        self.clean = self.clean_quiet = 0  # inputs with no leak, and those with no finding
        self.worst_oracle = self.worst_true = 0.0

    def leak(self, name: str, expected: str | None, found: list[str], single: bool) -> str:
        right = expected is not None and expected in found
        self.tp += int(right)
        self.fn += int(expected is not None and not right)
        wrong = [s for s in found if s != expected]
        self.fp += len(wrong)
        if single:
            self.single_cases += 1
            self.single_false += len(found)
        if expected is None:
            self.clean += 1
            self.clean_quiet += int(not found)
        if expected is not None:
            self.planted += 1
            self.planted_right += int(right)
        return "ok" if right or (expected is None and not found) else f"WRONG {found}"

    def peak(self, ours: int, oracle: int, true: int | None = None) -> float:
        error = abs(ours - oracle) / max(oracle, 1)
        self.worst_oracle = max(self.worst_oracle, error)
        if true is not None:
            self.worst_true = max(self.worst_true, abs(ours - true) / max(true, 1))
        return error


def sites(report, device: int) -> list[str]:
    return [f.message.split("possible leak at ", 1)[1].split(": ", 1)[0]
            for f in report.findings if f.code == "MEM001"
            and f.message.startswith(f"device {device}:")]


def judge(path: Path, score: Score, label, single: bool, tag: str, shown: str = "",
          also: Score | None = None) -> None:
    """Analyze one real snapshot and score each device against label(device) -> (site, why);
    `also` is scored the same way (a subset's own tally)."""
    start = time.perf_counter()
    report, contexts = analyze(load_snapshot(path))
    raw = load_raw(path)
    for ctx in contexts:
        expected, why = label(ctx.device)
        oracle = reference_replay(raw, ctx.device)["peak"]
        error = score.peak(ctx.rep.peak_bytes, oracle)
        verdict = score.leak(path.name, expected, sites(report, ctx.device), single)
        if also is not None:
            also.peak(ctx.rep.peak_bytes, oracle)
            also.leak(path.name, expected, sites(report, ctx.device), single)
        print(f"{tag} {(shown or path.name)[:60]:60s} dev {ctx.device}  steps {len(ctx.steps):3d}  "
              f"leak {verdict:5s} ({why})  peak err {error:.2e}  "
              f"{time.perf_counter() - start:.2f} s")


def real(folder: Path, score: Score) -> int:
    files = sorted(p for p in folder.glob("*/*") if p.suffix in (".pkl", ".pickle"))
    for path in files:
        judge(path, score, lambda device, name=path.name: LABELS.get(
            (name, device), (None, "unlabelled")), path.name in SINGLE_PASS_REAL, "real ")
    return len(files)


def materialise(entry: dict, folder: Path, mirrors: Path, scratch: Path) -> Path | None:
    """The manifest entry's file: from the corpus folder, else `git show` from a fetched
    mirror of its repository; None (with the command that fetches it) when neither has it."""
    path = folder / entry["file"]
    if path.is_file():
        return path
    mirror = mirrors / entry["repo"].replace("/", "+") / "repo"
    if mirror.is_dir():
        target = scratch / entry["file"]
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as handle:
            shown = subprocess.run(["git", f"--git-dir={mirror}", "show",
                                    f"{entry['commit']}:{entry['path']}"], stdout=handle,
                                   stderr=subprocess.DEVNULL, check=False)
        if shown.returncode == 0:
            return target
    print(f"skip  {entry['file']}: absent; fetch it with: mkdir -p {path.parent} && "
          f"git clone https://github.com/{entry['repo']} /tmp/r && git -C /tmp/r show "
          f"{entry['commit']}:{entry['path']} > {path}")
    return None


def corpus(folder: Path, mirrors: Path, scratch: Path, score: Score, new: Score
           ) -> tuple[int, set[str]]:
    """The fetched public snapshots of the manifest; (files judged, their projects). Those
    added for issue 28 are also scored apart, in `new`."""
    manifest = json.loads(MANIFEST.read_text())
    judged, projects = 0, set()
    for entry in manifest["snapshots"]:
        path = materialise(entry, folder, mirrors, scratch)
        if path is None:
            continue
        labels = entry["labels"]
        is_new = entry.get("round") == 28
        judge(path, score, lambda device, labels=labels: (
            labels[str(device)]["leak"], labels[str(device)]["why"]) if str(device) in labels
            else (None, "unlabelled"), entry["kind"] == "single-pass",
            "new  " if is_new else "pub  ", f"{entry['repo'].split('/')[0][:14]}/{path.name}",
            new if is_new else None)
        judged += 1
        projects.add(project(entry["repo"]))
    return judged, projects


def msmemscope(folder: Path, mirrors: Path, scratch: Path, score: Score) -> dict[str, Path]:
    """The public msMemScope exports: peaks against the dict-based replay of their rows, leak
    verdicts against the labels. Returns the files by manifest name (for the compare pairs)."""
    found = {}
    for entry in json.loads(MANIFEST.read_text())["msmemscope"]:
        path = materialise(entry, folder, mirrors, scratch)
        if path is None:
            continue
        found[entry["file"]] = path
        report, contexts = analyze(load_snapshot(path))
        oracle = replay_msmemscope(path)
        shown = f"{entry['repo'].split('/')[1][:12]}/{path.name}"
        if not contexts:
            print(f"msm   {shown[:60]:60s} no device rows ({entry['kind']}; oracle: "
                  f"{len(oracle)} devices)")
        for ctx in contexts:
            label = entry["labels"].get(str(ctx.device), {"leak": None, "why": "unlabelled"})
            peak, _ = oracle.get(ctx.device, (0, 0))
            error = score.peak(ctx.rep.peak_bytes, peak)
            verdict = score.leak(path.name, label["leak"], sites(report, ctx.device), False)
            print(f"msm   {shown[:60]:60s} dev {ctx.device}  leak {verdict:5s} ({label['why']})"
                  f"  peak err {error:.2e}")
    return found


def compare_pairs(found: dict[str, Path], score: Score) -> int:
    """Known leaks that show only against a baseline: the public pairs of the manifest, the
    example rebuilt in fixtures/memory, generated training runs with and without a leak."""
    from msmemscope_example import FIXTURES

    pairs = [(found.get(p["a"]), found.get(p["b"]), p["leak"], f"{p['a']} -> {p['b']}")
             for p in json.loads(MANIFEST.read_text())["compare"]]
    pairs.append((FIXTURES / "baseline.csv", FIXTURES / "leaks.csv",
                  "operator aten._to_copy.default", "fixtures/memory/msmemscope_compare"))
    pairs.append((FIXTURES / "leaks.csv", FIXTURES / "baseline.csv", None,
                  "the same pair reversed"))
    made = []
    for leak in (0, 1 << 20):
        data = deep_model(16, 8, leak_bytes=leak)
        data.pop("_facts")
        made.append(normalise(data, f"deep_model leak {leak}"))
    judged = 0
    for a, b, expected, name in pairs + [(made[0], made[1], "train.py:48 (train_step)",
                                          "training run, leak planted in B"),
                                         (made[0], made[0], None, "training run against itself")]:
        if a is None or b is None:
            print(f"cmp   {name}: absent")
            continue
        before = a if not isinstance(a, Path) else load_snapshot(a)
        after = b if not isinstance(b, Path) else load_snapshot(b)
        _, records = compare(before, after)
        leaks = [r["site"] for r in records if r["code"] == "MEM001"]
        verdict = score.leak(name, expected, leaks, False)
        print(f"cmp   {name[:70]:70s} leak {verdict:5s} expected {expected}")
        judged += 1
    return judged


def inefficient(paths: list[Path]) -> int:
    """Every MEM005 finding and flagged block on the real inputs, then the generated idle
    cases, for review by hand (verdicts in bench/memory_inefficient_review.md)."""
    listed = 0
    for path in paths:
        report, contexts = analyze(load_snapshot(path))
        for ctx in contexts:
            flagged = {int(r) for rows in ctx.facts.get("idle_flags", {}).values() for r in rows}
            findings = [f for f in report.findings if f.code == "MEM005"
                        and f.message.startswith(f"device {ctx.device}:")]
            for finding in findings:
                print(f"idle  real {path.name[:40]} dev {ctx.device}: {finding.message[:160]}")
                listed += 1
            blocks = ctx.rep.blocks
            for row in sorted(flagged):
                print(f"idle  real {path.name[:40]} dev {ctx.device}: block {row} "
                      f"({int(blocks.counted[row])} B, alloc {int(blocks.alloc[row])}, freed "
                      f"{int(blocks.free_requested[row])}, peak {ctx.rep.peak_index}) at "
                      f"{ctx.sites.site(int(blocks.stack[row]))}")
                listed += 1
    for name, data in idle_cases():
        facts = data.pop("_facts")
        report, _ = analyze(normalise(data, name))
        found = [f.message for f in report.findings if f.code == "MEM005"]
        expected = facts.get("idle_site")
        right = (expected is None and not found) or (expected is not None and bool(found)
                                                     and f"largest: {expected}" in found[0])
        print(f"idle  gen  {name:55s} expected {expected}: {'ok' if right else 'WRONG'} "
              f"{found[0][:120] if found else '(no finding)'}")
        listed += 1
    return listed


def project(repo: str) -> str:
    """Forks of Stanford CS336's assignment 2 are one project, whoever pushed them."""
    owner_name = repo.lower()
    return "stanford-cs336/assignment2" if ("assignment2" in owner_name
                                            or "cs336" in owner_name) else owner_name


def generated(score: Score) -> int:
    made = cases() + random_cases()
    for name, data in made:
        facts = data.pop("_facts")
        report, (ctx,) = analyze(normalise(data, name))
        ref = reference_replay(data, 0)
        error = score.peak(ctx.rep.peak_bytes, ref["peak"])
        verdict = score.leak(name, facts["leak_site"], sites(report, 0), facts["single_pass"])
        print(f"gen   {name:60s} steps {len(ctx.steps):3d}  leak {verdict:5s}  "
              f"peak err {error:.2e}")
    return len(made)


def peaks(score: Score) -> int:
    cut, true_peak = starts_with_frees()
    cut.pop("_facts")
    _, (ctx,) = analyze(normalise(cut, "cut"))
    error = score.peak(ctx.rep.peak_bytes, reference_replay(cut, 0)["peak"], true_peak)
    print(f"peak  trace starting with the frees of 512 MiB: ours {ctx.rep.peak_bytes} true "
          f"{true_peak} err {error:.2e}")
    full = deep_model(16, 10)
    full.pop("_facts")
    n = len(full["device_traces"][0])
    for keep in (n // 10, n // 4, n // 2, 3 * n // 4, n - 7):
        data = truncate(full, keep)
        _, (ctx,) = analyze(normalise(data, "cut"))
        error = score.peak(ctx.rep.peak_bytes, reference_replay(data, 0)["peak"])
        print(f"peak  training run cut to its last {keep} of {n} events: err {error:.2e}")
    return 6


def summary(title: str, score: Score) -> None:
    # with no leak claimed (or none to find) the ratio is undefined, not 0
    precision = f"{score.tp / (score.tp + score.fp):.3f}" if score.tp + score.fp else "n/a"
    recall = f"{score.tp / (score.tp + score.fn):.3f}" if score.tp + score.fn else "n/a"
    print(f"{title}: leak precision {precision}  recall {recall}  "
          f"(tp {score.tp}, fp {score.fp}, fn {score.fn}); no-leak devices left quiet: "
          f"{score.clean_quiet}/{score.clean}; false leaks on single passes: "
          f"{score.single_false} over {score.single_cases} single-pass devices; labelled leaks "
          f"at the right user line: {score.planted_right}/{score.planted}; largest peak error "
          f"{100 * score.worst_oracle:.4f}% against the oracle"
          + (f", {100 * score.worst_true:.4f}% against the known true peak"
             if title.startswith("generated") else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--snapshots", type=Path, default=ROOT.parent / "shared" / "snapshots")
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "corpus" / "snapshots",
                        help="folder of the public snapshots listed in "
                             "bench/memory_snapshots.json")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"),
                        help="fetched mirrors (OWNER+NAME/repo) to read absent files from")
    args = parser.parse_args()
    shared, fetched, new, made = Score(), Score(), Score(), Score()
    msm, pairs = Score(), Score()
    scratch = Path(tempfile.mkdtemp(prefix="memory_findings_"))
    n_shared = real(args.snapshots, shared) if args.snapshots.is_dir() else 0
    n_fetched, projects = corpus(args.corpus, args.mirrors, scratch, fetched, new)
    exports = msmemscope(args.corpus, args.mirrors, scratch, msm)
    n_pairs = compare_pairs(exports, pairs)
    real_paths = sorted(p for p in args.snapshots.glob("*/*") if p.suffix in (".pkl", ".pickle")
                        ) if args.snapshots.is_dir() else []
    real_paths += sorted(p for p in scratch.rglob("*") if p.is_file())
    n_idle = inefficient(real_paths)
    n_gen = generated(made)
    n_peak = peaks(made)
    if n_shared:
        projects |= {"ascend/msinsight", "stanford-cs336/assignment2"}
    both = Score()
    for part in (shared, fetched):
        for field in vars(both):
            merge = max if field.startswith("worst") else int.__add__
            setattr(both, field, merge(getattr(both, field), getattr(part, field)))
    print()
    print(f"real snapshots: {n_shared} shared + {n_fetched} fetched = {n_shared + n_fetched} "
          f"from {len(projects)} projects ({', '.join(sorted(projects))})")
    summary(f"real, shared ({n_shared})", shared)
    summary(f"real, fetched ({n_fetched})", fetched)
    summary(f"real, fetched, new in issue 28 ({new.clean + new.planted} devices)", new)
    summary(f"real, all ({n_shared + n_fetched})", both)
    summary(f"msMemScope exports ({len(exports)})", msm)
    summary(f"compare pairs ({n_pairs})", pairs)
    summary(f"generated ({n_gen} runs + {n_peak} peak cases)", made)
    print(f"inefficient blocks listed for review: {n_idle} (verdicts: "
          "bench/memory_inefficient_review.md)")


if __name__ == "__main__":
    main()
