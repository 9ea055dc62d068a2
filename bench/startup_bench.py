"""Start-up costs (issue 24): a warm re-check of a real project and `apply` of one small file,
this checkout against another (`--base`), measured in the same run, alternating.

    python bench/startup_bench.py --project MIRROR [--base /tmp/base] [--repeat 7]

MIRROR is a bare git repository (pytorch/examples in the issue: /work/.mirror/pytorch+examples/repo);
its HEAD is checked out into a temporary git work tree (the files a run reads). Each checkout
gets its own cache folder, filled by one run first; then, alternating between the checkouts:

- **warm re-check**: `apply --check .` with every file served from the cache (CPU seconds of the
  process, user + system, and wall seconds, start-up included);
- **one small file**: `apply FILE` on a 5-line CUDA script, restored before each run, with
  `--no-cache` (everything built in the process) and with a cache folder that a run over another
  file filled before (the rule catalogue stored, the file itself new).

Bytecode is written beforehand (`compileall`), as in an installed package: without `.pyc` files the
figures would time the compiler. The JSON reports of both checkouts are compared (less the cache
counters, which differ by construction). Medians of `--repeat` runs; note the load average.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shard_bench import checkout  # bench scripts run as files: their folder is on the path

REPO = Path(__file__).resolve().parents[1]

SMALL = 'import torch\n\nmodel = torch.nn.Linear(2, 2).cuda()\nx = torch.ones(2, device="cuda")\nprint(model(x))\n'
CACHE_COUNTERS = ("files_parsed", "files_cached")


def timed(command: list[str], cwd: Path, code: Path) -> tuple[float, float, str]:
    """(CPU seconds of the process and its children, wall seconds, stdout) of one run."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(code)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "npu_migrate", *command], cwd=cwd, env=env,
                            capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode not in (0, 1):
        sys.exit(f"{command} failed ({result.returncode}): {result.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall, result.stdout


def report_without_cache_counters(text: str) -> dict:
    report = json.loads(text)
    for key in CACHE_COUNTERS:
        report["summary"].pop(key, None)
    return report


def measure(codes: dict[str, Path], project: Path, work: Path, repeat: int) -> dict:
    samples: dict[str, dict[str, list[float]]] = {label: {} for label in codes}
    reports = {}
    for label, code in codes.items():
        compileall.compile_dir(str(code / "npu_migrate"), quiet=1)
        compileall.compile_dir(str(code / "codemods"), quiet=1)
        tree = work / f"project-{label}"
        shutil.copytree(project, tree, symlinks=True)
        timed(["apply", "--check", "--cache-dir", str(work / f"cache-{label}"), "."], tree, code)
        small = work / f"small-{label}"
        small.mkdir()
        (small / "other.py").write_text(SMALL)
        timed(["apply", "--cache-dir", str(work / f"small-cache-{label}"), "other.py"], small, code)
    for _ in range(repeat):
        for label, code in codes.items():
            tree, small = work / f"project-{label}", work / f"small-{label}"
            cpu, wall, out = timed(["apply", "--check", "--output-format", "json", "--cache-dir",
                                    str(work / f"cache-{label}"), "."], tree, code)
            assert json.loads(out)["summary"]["files_parsed"] == 0, "the warm re-check parsed files"
            reports[label] = report_without_cache_counters(out)
            samples[label].setdefault("warm_cpu_s", []).append(cpu)
            samples[label].setdefault("warm_wall_s", []).append(wall)
            for mode, args in (("small_no_cache", ["--no-cache"]),
                               ("small_catalogue_cached", ["--cache-dir", str(work / "small-cache")])):
                (small / "small.py").write_text(SMALL)
                shutil.rmtree(work / "small-cache", ignore_errors=True)  # the template, less small.py
                shutil.copytree(work / f"small-cache-{label}", work / "small-cache")
                cpu, wall, _ = timed(["apply", *args, "small.py"], small, code)
                assert "npu" in (small / "small.py").read_text()
                samples[label].setdefault(f"{mode}_cpu_s", []).append(cpu)
                samples[label].setdefault(f"{mode}_wall_s", []).append(wall)
    out: dict = {label: {key: statistics.median(values) for key, values in figures.items()}
                 for label, figures in samples.items()}
    if len(reports) == 2:
        out["same_json"] = len({json.dumps(r, sort_keys=True) for r in reports.values()}) == 1
    out["files"] = reports[next(iter(codes))]["summary"]["files_scanned"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--project", required=True, help="bare git repository of a real project")
    parser.add_argument("--base", type=Path, help="another checkout to measure the same way")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    codes = {"this": REPO, **({"base": args.base} if args.base else {})}
    with tempfile.TemporaryDirectory(prefix="npu-migrate-startup-") as work:
        project = Path(work) / "pristine"
        checkout(args.project, project)
        git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
        subprocess.run([*git, "init", "-q"], cwd=project, check=True)
        subprocess.run([*git, "add", "-A"], cwd=project, check=True)
        subprocess.run([*git, "commit", "-qm", "checkout"], cwd=project, check=True)
        record = measure(codes, project, Path(work), args.repeat)
    record["load_average"] = os.getloadavg()
    for label in codes:
        figures = record[label]
        print(f"[{label}] warm re-check of {record['files']} files: {figures['warm_cpu_s']:.3f} CPU s, "
              f"{figures['warm_wall_s']:.3f} s wall; one small file: {figures['small_no_cache_cpu_s']:.3f} CPU s "
              f"(--no-cache), {figures['small_catalogue_cached_cpu_s']:.3f} CPU s (catalogue cached)")
    if "same_json" in record:
        print(f"same JSON report (less the cache counters): {record['same_json']}")
    print(f"load average: {record['load_average']}")
    os.makedirs(REPO / "bench" / "results", exist_ok=True)
    with open(REPO / "bench" / "results" / "startup.json", "w") as handle:
        json.dump(record, handle, indent=2)


if __name__ == "__main__":
    main()
