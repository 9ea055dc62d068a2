"""Shard scaling and project isolation (issue 24): what one `--shard` of ~300 files costs in a
tree of a few projects and in a tree 8 times larger, and whether projects side by side in one
run get what each gets alone.

    python bench/shard_bench.py                     # scaling: small tree, 8x tree, one big project
    python bench/shard_bench.py --base /tmp/base    # ... and the same with another checkout
    python bench/shard_bench.py --isolation MIRROR [MIRROR ...]   # real projects side by side

**Scaling.** The projects are the torch wheel's own sources (installed with the test extras),
cut into four projects of 320-362 files (`torch/distributed`; `torch/_inductor`; `torch/utils`
and `torch/ao`; `torch/nn`, `torch/_dynamo` and `torch/fx`), each in its own folder with a
`pyproject.toml` (a package root). The small tree holds the four; the 8x tree eight copies of
each (32 projects); the one-big-project tree the same 32 folders under a single root. Shard 1 of
4 (small) and 1 of 32 (8x) then each hold one project (the same one, `torch/distributed`, 362
files). Each shard runs `apply --check` in its own process (start-up included) with a fresh
cache folder (cold) and again with the folder it filled (warm, as a later pipeline restoring a
CI cache). Figures are CPU seconds of the process tree (user + system, the workers included):
the machine is shared, and CPU time does not wait for it. Medians of `--repeat` runs.

**Isolation.** Each MIRROR is a bare git repository (as the `fetch` tool leaves them); its HEAD
is checked out into a folder of its own in one temporary tree, migrated there in one run, and
again each alone (from inside its own folder); the files must be identical. Nothing of the
projects is kept.

Trees are built in a temporary folder and removed afterwards.
"""

from __future__ import annotations

import argparse
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

REPO = Path(__file__).resolve().parents[1]
GROUPS = [("distributed",), ("_inductor",), ("utils", "ao"), ("nn", "_dynamo", "fx")]


def torch_root() -> Path:
    import torch

    return Path(torch.__file__).parent


def build_tree(destination: Path, copies: int, one_root: bool) -> int:
    """The projects of the module docstring, `copies` times each; returns the number of files."""
    source = torch_root()
    count = 0
    if one_root:
        (destination / "pyproject.toml").parent.mkdir(parents=True, exist_ok=True)
        (destination / "pyproject.toml").write_text('[project]\nname = "monolith"\n')
    for copy in range(copies):
        for number, packages in enumerate(GROUPS):
            project = destination / f"p{number}_{copy}"
            project.mkdir(parents=True)
            if not one_root:
                (project / "pyproject.toml").write_text(f'[project]\nname = "p{number}-{copy}"\n')
            for package in packages:
                for path in (source / package).rglob("*.py"):
                    target = project / "torch" / package / path.relative_to(source / package)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target)
                    count += 1
    return count


def apply(tree: Path, args: list[str], code: Path, jobs: int) -> tuple[float, float, dict]:
    """(CPU seconds of the process tree, wall seconds, JSON report) of one `apply --check`."""
    command = [sys.executable, "-m", "npu_migrate", "apply", "--check", "--isolated", "--output-format", "json",
               "--jobs", str(jobs), *args, "."]
    env = {**os.environ, "PYTHONPATH": str(code)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode not in (0, 1):
        sys.exit(f"apply failed ({result.returncode}): {result.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, json.loads(result.stdout)


def shard_costs(tree: Path, shard: str, code: Path, jobs: int, repeat: int, scratch: Path) -> dict:
    """Cold and warm CPU of one shard, and how many files it holds."""
    cold, warm, walls, files = [], [], [], 0
    for attempt in range(repeat):
        cache = scratch / f"cache-{attempt}"
        shutil.rmtree(cache, ignore_errors=True)
        args = ["--shard", shard, "--cache-dir", str(cache)]
        cpu, wall, report = apply(tree, args, code, jobs)
        cold.append(cpu)
        walls.append(wall)
        files = report["summary"]["files_scanned"]
        cpu, _, report = apply(tree, args, code, jobs)
        warm.append(cpu)
        assert report["summary"]["files_parsed"] == 0, "a warm run parsed files"
        shutil.rmtree(cache, ignore_errors=True)
    return {"files": files, "cold_cpu_s": statistics.median(cold), "warm_cpu_s": statistics.median(warm),
            "cold_wall_s": statistics.median(walls), "cold_runs": cold, "warm_runs": warm}


def scaling(code: Path, label: str, jobs: int, repeat: int) -> dict:
    results = {}
    with tempfile.TemporaryDirectory(prefix="npu-migrate-shards-") as work:
        root = Path(work)
        for name, copies, one_root, shard in (("small", 1, False, "1/4"), ("8x", 8, False, "1/32"),
                                              ("one big project", 8, True, "1/32")):
            tree = root / name.replace(" ", "-")
            total = build_tree(tree, copies, one_root)
            costs = shard_costs(tree, shard, code, jobs, repeat, root)
            costs["tree_files"] = total
            results[name] = costs
            print(f"[{label}] {name}: tree {total} files, shard {shard} holds {costs['files']}: "
                  f"cold {costs['cold_cpu_s']:.2f} CPU s ({1000 * costs['cold_cpu_s'] / costs['files']:.2f} ms/file), "
                  f"warm {costs['warm_cpu_s']:.2f} CPU s ({1000 * costs['warm_cpu_s'] / costs['files']:.2f} ms/file)",
                  flush=True)
            shutil.rmtree(tree)
    for mode in ("cold", "warm"):
        small = results["small"][f"{mode}_cpu_s"] / results["small"]["files"]
        for name in ("8x", "one big project"):
            ratio = (results[name][f"{mode}_cpu_s"] / results[name]["files"]) / small
            results[f"{name} / small, {mode}"] = ratio
            print(f"[{label}] per-file cost of the shard, {name} / small, {mode}: {ratio:.2f}x")
    return results


def fact_costs(code: Path, jobs: int) -> dict:
    """What the paper estimate needs: per-file costs of migrating, of the facts, of discovery."""
    with tempfile.TemporaryDirectory(prefix="npu-migrate-costs-") as work:
        tree = Path(work) / "tree"
        total = build_tree(tree, 8, True)
        cache = Path(work) / "cache"
        # the facts of the whole root without migrating: a shard holding one file of the root
        # still summarizes all of it (cold), or reads the summaries back (warm)
        listing = subprocess.run([sys.executable, "-m", "npu_migrate", "apply", "--isolated", "--show-files", "."],
                                 cwd=tree, env={**os.environ, "PYTHONPATH": str(code)}, capture_output=True,
                                 text=True, check=True)
        assert len(listing.stdout.splitlines()) == total
        one = ["--cache-dir", str(cache), "--shard", f"1/{total}"]
        discovery, _, _ = apply(tree, ["--select", "NPU101", "--no-cache", "--shard", f"1/{total}"], code, jobs)
        facts_cold, _, _ = apply(tree, one, code, jobs)
        facts_warm, _, _ = apply(tree, one, code, jobs)
    out = {"files": total, "startup_and_discovery_cpu_s": discovery,
           "facts_cold_ms_per_root_file": 1000 * (facts_cold - discovery) / total,
           "facts_warm_ms_per_root_file": 1000 * (facts_warm - discovery) / total}
    print(f"costs: {total} files; start-up + discovery + packing {discovery:.2f} CPU s "
          f"({1000 * discovery / total:.3f} ms/file of the tree); the facts of a root: cold "
          f"{out['facts_cold_ms_per_root_file']:.3f}, warm {out['facts_warm_ms_per_root_file']:.3f} ms per file of the root")
    return out


# what a migration reads or what decides a package root; other files (images, weights) are left out
CHECKED_OUT = (".py", ".sh", ".bash", ".json", ".toml", ".cfg", ".txt", ".yml", ".yaml", ".ipynb", ".cu", ".cuh")


def checkout(mirror: str, target: Path) -> None:
    """HEAD's files of a bare repository that a run reads; blobs the mirror lacks are skipped."""
    listing = subprocess.run(["git", "--git-dir", mirror, "ls-tree", "-r", "-z", "HEAD"], capture_output=True,
                             check=True).stdout.decode("utf-8", "surrogateescape").split("\0")
    entries = []
    for entry in filter(None, listing):
        meta, path = entry.split("\t", 1)
        mode, kind, blob = meta.split()
        if kind == "blob" and mode in ("100644", "100755") and path.endswith(CHECKED_OUT):
            entries.append((blob, path))
    batch = subprocess.run(["git", "--git-dir", mirror, "cat-file", "--batch"], capture_output=True, check=True,
                           input="".join(f"{blob}\n" for blob, _ in entries).encode()).stdout
    offset = 0
    for _, path in entries:
        header_end = batch.index(b"\n", offset)
        header = batch[offset:header_end].split()
        offset = header_end + 1
        if header[-1] == b"missing":
            continue
        size = int(header[2])
        destination = target / path
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(batch[offset:offset + size])
        offset += size + 1


def isolation(mirrors: list[str], code: Path, base: Path | None) -> dict:
    """Real projects side by side: one run over all against each alone; with `base`, also how
    many files the other checkout gets differently."""
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="npu-migrate-side-") as work:
        root = Path(work)
        pristine = root / "pristine"
        for mirror in mirrors:
            name = Path(mirror).parent.name if Path(mirror).name == "repo" else Path(mirror).name
            checkout(mirror, pristine / name)
        for code_dir, label in ((code, "this"), *(((base, "base"),) if base else ())):
            together, alone = root / f"together-{label}", root / f"alone-{label}"
            shutil.copytree(pristine, together, symlinks=True)
            shutil.copytree(pristine, alone, symlinks=True)
            env = {**os.environ, "PYTHONPATH": str(code_dir)}
            command = [sys.executable, "-m", "npu_migrate", "apply", "--isolated", "--no-cache", "--enable",
                       "pin-memory", "."]
            subprocess.run(command, cwd=together, env=env, capture_output=True, check=False)
            for project in sorted(alone.iterdir()):
                subprocess.run(command, cwd=project, env=env, capture_output=True, check=False)
            differ = [str(p.relative_to(together)) for p in sorted(together.rglob("*.py"))
                      if p.is_file() and not p.is_symlink()
                      and p.read_bytes() != (alone / p.relative_to(together)).read_bytes()]
            files = sum(1 for p in together.rglob("*.py"))
            changed = sum(1 for p in together.rglob("*.py") if p.is_file() and not p.is_symlink()
                          and p.read_bytes() != (pristine / p.relative_to(together)).read_bytes())
            out[label] = {"projects": len(mirrors), "python_files": files, "changed_files": changed,
                          "differ_from_alone": differ}
            print(f"[{label}] {len(mirrors)} projects, {files} Python files, {changed} changed by the run; "
                  f"files that differ between one run and each alone: {len(differ)}")
            for path in differ[:20]:
                print(f"    {path}")
        if base is not None:
            differ = [str(p.relative_to(root / "alone-this")) for p in sorted((root / "alone-this").rglob("*.py"))
                      if p.is_file() and not p.is_symlink()
                      and p.read_bytes() != (root / "alone-base" / p.relative_to(root / "alone-this")).read_bytes()]
            out["alone: this vs base"] = differ
            print(f"each project alone, this checkout against the base: {len(differ)} file(s) differ")
            for path in differ[:20]:
                print(f"    {path}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--base", type=Path, help="another checkout to measure the same way (PYTHONPATH)")
    parser.add_argument("--isolation", nargs="+", metavar="MIRROR", help="bare git repositories of real projects")
    args = parser.parse_args()
    record: dict[str, object] = {"jobs": args.jobs, "repeat": args.repeat}
    if args.isolation:
        record["isolation"] = isolation(args.isolation, REPO, args.base)
    else:
        record["this"] = scaling(REPO, "this", args.jobs, args.repeat)
        if args.base:
            record["base"] = scaling(args.base, "base", args.jobs, args.repeat)
        record["costs"] = fact_costs(REPO, args.jobs)
    os.makedirs(REPO / "bench" / "results", exist_ok=True)
    name = "shard_isolation.json" if args.isolation else "shards.json"
    with open(REPO / "bench" / "results" / name, "w") as handle:
        json.dump(record, handle, indent=2)


if __name__ == "__main__":
    main()
