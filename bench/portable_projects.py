"""No silent miss under `--target portable`, on the real projects of bench/no_silent_miss.py.

For each project (a clone at the pinned commit under --corpus, as bench/no_silent_miss.py
lists them; an absent or moved clone is skipped with a line saying so) this copies the project
twice into a scratch folder, runs `python -m npu_migrate apply --target portable --no-cache
--isolated --output-format json` in place on one copy, and prints:

- sites / rewritten / reported / silent: as bench/no_silent_miss.py counts them (its own
  `tokenize` scanner, not the rules' sweep); silent must be 0;
- npu code: Ascend-specific Python the migration *added* (`torch_npu`, `.npu(`, `torch.npu`,
  `"npu"`/`"npu:N"`, `"hccl"`, `ASCEND_*`/`HCCL_*` names, the CANN provider), not counting a
  guarded optional `import torch_npu` (`try: ... except ImportError`) nor the twins; must be 0;
- twins: Ascend names written *beside* their CUDA twin, which stays -- `ASCEND_RT_VISIBLE_DEVICES`
  next to `CUDA_VISIBLE_DEVICES`, `"CANNExecutionProvider"` next to `"CUDAExecutionProvider"`,
  `"npugraphs"` next to `"cudagraphs"` in a backend chosen by device type
  (each runtime reads its own and ignores the other: device-generic in effect, counted apart);
- entry points: scripts with an `if __name__ == "__main__"` block or named train*.py / main.py.
  Each one is imported (run with `__name__` other than `"__main__"`, `sys.argv` = the script
  alone, cwd its folder) on this machine's plain CPU torch, in a fork of one worker that has
  imported torch once, with a timeout, in both the original and the migrated copy:
  - ok: the migrated script imports;
  - missing: it needs a package not installed here (named in the list below the table), in the
    original just as much;
  - same: it fails at import in the original too, with the same exception type (a script that
    trains, loads data or parses required arguments at top level);
  - broken: the original imports (or fails otherwise) and the migrated copy fails: must be 0.

    python bench/portable_projects.py [--corpus /work/corpus] [--only NAME] [--list] [--python PY]

`--python` is the interpreter the entry points are imported with (default: this one). To import
more of them than the packages installed here allow, give it a virtual environment that shares
this torch: `python -m venv --system-site-packages /tmp/pp-venv && /tmp/pp-venv/bin/pip install
einops tqdm lightning-utilities omegaconf hydra-core pandas gymnasium matplotlib
opencv-python-headless pillow torchmetrics` (torchvision is left out: its wheels pin a torch build).
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from no_silent_miss import Tally, _diagnostic_lines, notebook_code, pinned_projects, tally_file

REPO = Path(__file__).resolve().parent.parent
IMPORT_TIMEOUT_S = 30

# -- Ascend-specific code, by tokens ---------------------------------------------------------------
TWINS = frozenset({"ASCEND_RT_VISIBLE_DEVICES", "'ASCEND_RT_VISIBLE_DEVICES'", "'CANNExecutionProvider'",
                   "'npugraphs'"})
_NPU_STRING = re.compile(r"npu(:\d*)?|npugraphs|npugraph_ex|npu:\{[^{}]*\}|hccl|HCCL|(ASCEND|HCCL)_[A-Z0-9_]+|CANNExecutionProvider")


def _guarded_import_lines(text: str) -> set[int]:
    """Lines of `import torch_npu` inside `try: ... except ImportError` (the optional import)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return set()
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        handled = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
        if not handled & {"ImportError", "ModuleNotFoundError", "(ImportError, ModuleNotFoundError)"}:
            continue
        for statement in node.body:
            if isinstance(statement, ast.Import) and any(a.name == "torch_npu" for a in statement.names):
                lines.add(statement.lineno)
    return lines


def npu_tokens(text: str) -> Counter[str]:
    """Ascend-specific constructs of Python code (comments, docstrings and the guarded optional
    import left out), counted by what they are."""
    found: Counter[str] = Counter()
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
                  if t.type not in (tokenize.COMMENT, tokenize.NL)]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return found
    guarded = _guarded_import_lines(text)
    for i, tok in enumerate(tokens):
        if tok.start[0] in guarded:
            continue
        before = tokens[i - 1] if i else None
        if tok.type == tokenize.NAME:
            if tok.string == "torch_npu" or (tok.string == "npu" and before is not None and before.string == "."):
                found[tok.string if tok.string == "torch_npu" else ".npu"] += 1
            elif re.fullmatch(r"(ASCEND|HCCL)_[A-Z0-9_]+", tok.string):
                found[tok.string] += 1
        elif tok.type == tokenize.STRING:
            statement_start = before is None or before.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
            if statement_start:
                continue  # a docstring
            body = re.sub(r"^[A-Za-z]*", "", tok.string).strip("'\"")
            if _NPU_STRING.fullmatch(body):
                found[repr(body)] += 1
    return found


def _python_units(path: Path, text: str) -> list[str]:
    return [code for _, code in notebook_code(text)] if path.suffix == ".ipynb" else [text]


def added_npu_code(old_text: str, new_text: str, path: Path) -> Counter[str]:
    before: Counter[str] = Counter()
    after: Counter[str] = Counter()
    for unit in _python_units(path, old_text):
        before += npu_tokens(unit)
    for unit in _python_units(path, new_text):
        after += npu_tokens(unit)
    return after - before


# -- entry points --------------------------------------------------------------------------------
_MAIN = re.compile(r"""^if\s+__name__\s*==\s*['"]__main__['"]\s*:""", re.M)


def entry_points(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if _MAIN.search(text) or path.name.startswith("train") or path.name == "main.py":
            found.append(str(relative))
    return found


# The worker: imports torch once, then forks one child per script, so each import starts from a
# clean interpreter with torch loaded. It reads [[root, relative], ...] as JSON on stdin and
# prints one JSON line per script: {"script", "outcome": "ok" | "missing" | "error" | "timeout",
# "detail"}.
WORKER = r'''
import json, os, runpy, select, signal, sys, traceback
sys.dont_write_bytecode = True
import torch  # noqa: F401  (once, shared by the forks)
jobs = json.load(sys.stdin)
timeout = float(sys.argv[1])
for root, relative in jobs:
    script = os.path.join(root, relative)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()  # its own process group: whatever the script starts goes with it
        os.close(read)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0); os.dup2(devnull, 1); os.dup2(devnull, 2)
        folder = os.path.dirname(script)
        os.chdir(folder)
        sys.path[:0] = [folder, root, os.path.join(root, "src")]
        sys.argv = [script]
        if os.environ.get("PORTABLE_STUBS"):  # --stubs: packages missing here become stubs
            sys.path.insert(0, os.environ["PORTABLE_STUBS"])
            import emulated_import
            sys.meta_path.append(emulated_import._StubFinder(root))
        try:
            runpy.run_path(script, run_name="__portable_import_check__")
            result = {"outcome": "ok", "detail": ""}
        except ModuleNotFoundError as exc:
            result = {"outcome": "missing", "detail": str(exc.name)}
        except BaseException as exc:
            result = {"outcome": "error", "detail": f"{type(exc).__name__}: {str(exc)[:160]}",
                      "kind": type(exc).__name__}
        os.write(write, json.dumps(result).encode())
        os._exit(0)
    os.close(write)
    chunks, deadline = [], timeout
    while True:
        ready, _, _ = select.select([read], [], [], deadline)
        if not ready:
            os.killpg(pid, signal.SIGKILL)
            result = {"outcome": "timeout", "detail": f"over {timeout:.0f} s", "kind": "timeout"}
            break
        chunk = os.read(read, 65536)
        if not chunk:
            text = b"".join(chunks).decode()
            result = json.loads(text) if text else {"outcome": "error", "detail": "died", "kind": "died"}
            break
        chunks.append(chunk)
    os.close(read)
    try:
        os.killpg(pid, signal.SIGKILL)  # what the script left running
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    print(json.dumps({"script": relative, **result}), flush=True)
'''


STUBS = False  # --stubs: bench/emulated_import.py's stubs stand in for packages not installed here


def _sealed_env(scratch: Path) -> dict[str, str]:
    """The environment scripts are imported in: no installing. Some scripts install what they
    miss at import time (yolov5's check_requirements runs `pip install`): a `pip` that refuses
    comes first on PATH, and `python -m pip` finds no index and no local wheels."""
    shims = scratch / "no-pip"
    shims.mkdir(exist_ok=True)
    for name in ("pip", "pip3", f"pip3.{sys.version_info.minor}", "uv", "conda"):
        shim = shims / name
        shim.write_text("#!/bin/sh\necho 'installing is blocked by bench/portable_projects.py' >&2\nexit 1\n")
        shim.chmod(0o755)
    return {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ.get('PATH', '')}",
            "PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": "",
            "YOLOv5_AUTOINSTALL": "false", "PYTHONDONTWRITEBYTECODE": "1", "CUDA_VISIBLE_DEVICES": "",
            **({"PORTABLE_STUBS": str(Path(__file__).resolve().parent)} if STUBS else {})}


def import_all(root: Path, scripts: list[str], python: str) -> dict[str, dict]:
    if not scripts:
        return {}
    result = subprocess.run([python, "-c", WORKER, str(IMPORT_TIMEOUT_S)],
                            input=json.dumps([[str(root), s] for s in scripts]), capture_output=True,
                            text=True, check=False, env=_sealed_env(root.parent.parent))
    found = {}
    for line in result.stdout.splitlines():
        item = json.loads(line)
        found[item.pop("script")] = item
    missing = [s for s in scripts if s not in found]
    if missing:
        raise SystemExit(f"import worker stopped early in {root}: {result.stderr[-1500:]}")
    return found


@dataclass
class Imports:
    ok: int = 0
    missing: int = 0
    same: int = 0
    broken: int = 0
    missing_modules: Counter[str] = field(default_factory=Counter)
    broken_list: list[str] = field(default_factory=list)
    same_list: list[str] = field(default_factory=list)


def compare_imports(original: dict[str, dict], migrated: dict[str, dict]) -> Imports:
    tally = Imports()
    for script, after in sorted(migrated.items()):
        before = original[script]
        if after["outcome"] == "ok":
            tally.ok += 1
        elif after["outcome"] == "missing" and before["outcome"] == "missing":
            tally.missing += 1
            tally.missing_modules[after["detail"]] += 1
        elif before["outcome"] in ("error", "timeout", "missing") and after.get("kind") == before.get("kind") \
                and before["outcome"] == after["outcome"]:
            tally.same += 1
            tally.same_list.append(f"{script}: {after['detail']}")
        else:
            tally.broken += 1
            tally.broken_list.append(f"{script}: original {before['outcome']} {before['detail']!r}; "
                                     f"migrated {after['outcome']} {after['detail']!r}")
    return tally


# -- one project ---------------------------------------------------------------------------------
def _copy(folder: Path, to: Path) -> Path:
    shutil.copytree(folder, to, ignore=shutil.ignore_patterns(".git", "__pycache__"), symlinks=True)
    return to


def run_project(folder: Path, python: str) -> tuple[Tally, Counter[str], Imports, float, list[str]]:
    with tempfile.TemporaryDirectory(prefix="portable-") as scratch:
        original = _copy(folder, Path(scratch) / "original" / folder.name)
        migrated = _copy(folder, Path(scratch) / "migrated" / folder.name)
        start = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "npu_migrate", "apply", "--target", "portable", "--no-cache",
                                 "--isolated", "--output-format", "json", str(migrated)],
                                capture_output=True, text=True, cwd=migrated.parent,
                                env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
        seconds = time.perf_counter() - start
        if result.returncode not in (0, 1):
            raise SystemExit(f"{folder.name}: apply failed ({result.returncode}): {result.stderr[-2000:]}")
        payload = json.loads(result.stdout)
        by_path = {os.path.relpath(os.path.join(migrated.parent, e["path"]), migrated): e for e in payload["files"]}
        tally, npu_code, where = Tally(), Counter(), []
        for path in sorted(original.rglob("*")):
            relative = str(path.relative_to(original))
            if path.suffix not in (".py", ".ipynb") or any(p.startswith(".") for p in Path(relative).parts):
                continue
            try:
                old = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            new = (migrated / relative).read_text(encoding="utf-8")
            tally.files += 1
            tally.changed += old != new
            tally_file(relative, old, new, _diagnostic_lines(by_path.get(relative, {})), tally,
                       path.suffix == ".ipynb")
            added = added_npu_code(old, new, path)
            npu_code += added
            where += [f"{'twin' if what in TWINS else 'npu code'}: {relative}: {what} x{count}"
                      for what, count in added.items()]
        scripts = entry_points(migrated)
        imports = compare_imports(import_all(original, scripts, python), import_all(migrated, scripts, python))
    return tally, npu_code, imports, seconds, where


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default="/work/corpus", help="folder holding the clones (OWNER+NAME)")
    parser.add_argument("--only", action="append", default=[], help="run only projects whose folder contains this")
    parser.add_argument("--list", action="store_true", help="list silent sites, npu code, broken and failing imports")
    parser.add_argument("--python", default=sys.executable, help="interpreter to import the entry points with")
    parser.add_argument("--stubs", action="store_true",
                        help="import with stubs for packages not installed here (bench/emulated_import.py's), "
                             "in the original and the migrated copy alike")
    args = parser.parse_args(argv)
    global STUBS
    STUBS = args.stubs
    corpus = Path(args.corpus)
    print("| project | commit | files | changed | CUDA sites | rewritten | reported | silent | npu code | twins | "
          "entry points | ok | missing | same | broken | apply |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    total, total_npu, total_twins, total_imports, details = Tally(), 0, 0, Imports(), []
    for folder, repo, commit in pinned_projects(corpus, args.only):
        tally, npu_code, imports, seconds, where = run_project(folder, args.python)
        for name in ("sites", "rewritten", "reported", "silent", "files", "changed"):
            setattr(total, name, getattr(total, name) + getattr(tally, name))
        for name in ("ok", "missing", "same", "broken"):
            setattr(total_imports, name, getattr(total_imports, name) + getattr(imports, name))
        total_imports.missing_modules += imports.missing_modules
        twins = sum(count for what, count in npu_code.items() if what in TWINS)
        npu_count = sum(npu_code.values()) - twins
        total_npu += npu_count
        total_twins += twins
        points = imports.ok + imports.missing + imports.same + imports.broken
        print(f"| {repo} | {commit[:7]} | {tally.files} | {tally.changed} | {tally.sites} | {tally.rewritten} | "
              f"{tally.reported} | **{tally.silent}** | **{npu_count}** | {twins} | {points} | {imports.ok} | "
              f"{imports.missing} | {imports.same} | **{imports.broken}** | {seconds:.2f} s |", flush=True)
        details += [f"silent: {repo}: {s}" for s in tally.silent_sites]
        details += [f"{w.split(': ', 1)[0]}: {repo}: {w.split(': ', 1)[1]}" for w in where]
        details += [f"broken: {repo}: {b}" for b in imports.broken_list]
        details += [f"same: {repo}: {s}" for s in imports.same_list]
    points = total_imports.ok + total_imports.missing + total_imports.same + total_imports.broken
    print(f"| **total** | | {total.files} | {total.changed} | {total.sites} | {total.rewritten} | {total.reported} | "
          f"**{total.silent}** | **{total_npu}** | {total_twins} | {points} | {total_imports.ok} | {total_imports.missing} | "
          f"{total_imports.same} | **{total_imports.broken}** | |")
    if total_imports.missing_modules:
        print("missing modules (entry points): " + ", ".join(
            f"{name} {count}" for name, count in total_imports.missing_modules.most_common()))
    if args.list:
        for line in details:
            print(line)
    return 1 if total.silent or total_npu or total_imports.broken else 0


if __name__ == "__main__":
    sys.exit(main())
