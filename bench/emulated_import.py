"""Import one entry point without running it: `python -m npu_migrate.emulation
bench/emulated_import.py PROJECT ENTRY` (bench/no_silent_miss.py runs it per migrated entry point).

The entry's module body runs under a name that is not `__main__`, so its
`if __name__ == "__main__":` block does not. A script with no such guard (nanoGPT's `train.py`
trains at module level) gets only its top-level imports run. The project folder and its `src/`
are on `sys.path`, as after `pip install -e .`; the entry's own folder comes first, as with
`python ENTRY`. Starting processes and network connections raise (nothing gets installed).
One JSON line on stdout says how it went.

Third-party packages that are not installed here (torchvision, pandas, Lightning's extras...)
are replaced by permissive stubs (any attribute, call, subscript or base class works), so the
check reaches the code after them; the line names the stubbed packages. A stub can make module
code fail that would work with the real package: bench/no_silent_miss.py therefore runs the
original entry the same way (stubs, plain python) before blaming the migration.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import json
import os
import runpy
import sys
import traceback
import types

STUBBED: list[str] = []


class Blocked(RuntimeError):
    """An entry point tried to start a process or open a connection while being imported."""


def _block_side_effects() -> None:
    """Importing must not install packages (yolov5's `check_requirements` runs `pip install` at
    import time), start processes or reach the network: such calls raise `Blocked`."""
    import socket
    import subprocess

    def refuse(*args: object, **kwargs: object) -> None:
        raise Blocked(f"blocked during the import check: {args[0] if args else ''!r}"[:200])

    for name in ("Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"):
        setattr(subprocess, name, refuse)
    os.system = refuse  # type: ignore[assignment]
    os.popen = refuse  # type: ignore[assignment]
    for name in ("execv", "execve", "execvp", "execvpe", "spawnv", "spawnve", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            setattr(os, name, refuse)
    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.create_connection = refuse  # type: ignore[assignment]


class _Stub:
    """Stands for anything a missing package provides."""

    def __init__(self, name: str = "stub") -> None:
        self._name = name

    def __getattr__(self, name: str) -> _Stub:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Stub(f"{self._name}.{name}")

    def __call__(self, *args: object, **kwargs: object) -> object:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator: keep the function
        return _Stub(f"{self._name}()")

    def __getitem__(self, key: object) -> _Stub:
        return _Stub(f"{self._name}[]")

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(())

    def __mro_entries__(self, bases: tuple) -> tuple:
        return (object,)  # `class Model(pl.LightningModule)` with a stubbed Lightning


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> object:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Stub(f"{self.__name__}.{name}")


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on sys.meta_path: a module nothing else finds becomes a stub (never torch or ours)."""

    def __init__(self, project: str) -> None:
        self.project = os.path.abspath(project) + os.sep

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        top = fullname.split(".")[0]
        if top in ("torch", "torch_npu", "npu_migrate", "codemods") or top in sys.stdlib_module_names:
            return None
        if top not in STUBBED and not self._asked_by_the_project():
            return None  # a library probing for an optional dependency gets its ImportError
        if top not in STUBBED:
            STUBBED.append(top)
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def _asked_by_the_project(self) -> bool:
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
            frame = frame.f_back
        return frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(self.project)

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        module = _StubModule(spec.name)
        module.__path__ = []
        module.__version__ = "999.0.0"  # passes "at least version X" checks
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def _has_main_guard(tree: ast.Module) -> bool:
    for stmt in tree.body:
        if isinstance(stmt, ast.If) and "__main__" in ast.dump(stmt.test) and "__name__" in ast.dump(stmt.test):
            return True
    return False


def _imports_only(tree: ast.Module) -> ast.Module:
    """The top-level imports (also inside a top-level `try`), nothing else."""
    imports = (ast.Import, ast.ImportFrom)
    kept = [stmt for stmt in tree.body if isinstance(stmt, imports)
            or (isinstance(stmt, ast.Try) and all(isinstance(s, imports) for s in stmt.body))]
    return ast.Module(body=kept, type_ignores=[])


def main(project: str, entry: str) -> dict:
    sys.path[:0] = [os.path.dirname(os.path.abspath(entry)), project, os.path.join(project, "src")]
    sys.argv = [entry]
    sys.meta_path.append(_StubFinder(project))
    _block_side_effects()
    try:  # the real packages the stubs stand for import it; code relies on `packaging.version`
        import packaging.version  # noqa: F401
    except ImportError:
        pass
    with open(entry, encoding="utf-8") as handle:
        source = handle.read()
    tree = ast.parse(source, entry)
    guarded = _has_main_guard(tree)
    try:
        if guarded:
            runpy.run_path(entry, run_name="__npu_migrate_import_check__")
        else:
            code = compile(_imports_only(tree), entry, "exec")
            exec(code, {"__name__": "__npu_migrate_import_check__", "__file__": entry})
    except BaseException as error:  # SystemExit from argparse at module level too
        frames = traceback.extract_tb(error.__traceback__)
        return {"status": "failed", "mode": "module" if guarded else "imports",
                "type": type(error).__name__, "message": str(error)[:300],
                "missing": getattr(error, "name", None) if isinstance(error, ImportError) else None,
                "where": f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None,
                "stubbed": STUBBED}
    return {"status": "ok", "mode": "module" if guarded else "imports", "stubbed": STUBBED}


if __name__ == "__main__":
    result = main(sys.argv[1], sys.argv[2])
    sys.stdout.flush()
    print("\n" + json.dumps(result), flush=True)
    os._exit(0)  # threads and pools a module started must not keep the check waiting
