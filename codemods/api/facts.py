"""Project facts: what a rule knows about the other files of its project.

A rule that needs more than its own file declares the facts it reads (`Rule.project_facts`); a
run builds exactly the facts of its selected rules and hands each rule the index of the file's
package root in its options, under the fact's `key`. A fact is computed in two steps so that it
shards and caches:

- `summarize(source)`: what one file says, from its bytes (cheap byte tests first) and, only
  past them, its `ast` tree, parsed at most once per file whichever fact asks first. A summary
  depends on the file's content alone (no path in it), so a run caches it under the hash of
  that content and computes it in its worker processes.
- `merge(project)`: the index of one package root, from the summaries of the root's files. It
  may ask a second question of a few files (`Project.analyse`: the files that use a name the
  summaries found), answered from the same content and cached the same way.

`slice(index, path)` is the part of an index one file's result depends on (it goes into that
file's cache key); `chooses(index, path)` lets a fact decide which files of its `chooses`
suffixes join a run (the DeepSpeed configurations the code points at).

`Project` is one package root as a merge sees it. The apply wing builds them from cached
summaries; `local_project` builds one directly from files, for the analyses' own helpers and
their tests.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from codemods.model.astnodes import parse_or_none
from npu_migrate.core.sources import Skipped, read_regular


class NeedsTree(Exception):
    """Raised by a `SourceFile` made without its tree when a summary asks for the tree."""


_UNPARSED: Any = object()


class SourceFile:
    """One file as a fact sees it: its bytes, its suffix, and its `ast` tree, parsed on first use.
    With `may_parse=False`, asking for the tree raises `NeedsTree` (the run tries the byte tests
    of every fact first, and parses only when one of them passes)."""

    def __init__(self, data: bytes, suffix: str = ".py", may_parse: bool = True) -> None:
        self.data = data
        self.suffix = suffix
        self.may_parse = may_parse
        self._tree: ast.Module | None = _UNPARSED

    @property
    def is_python(self) -> bool:
        return self.suffix == ".py"

    @property
    def parsed(self) -> bool:
        return self._tree is not _UNPARSED

    @property
    def tree(self) -> ast.Module | None:
        if self._tree is _UNPARSED:
            self.need_tree()
            self._tree = parse_or_none(self.data) if self.is_python else None
        return self._tree

    def need_tree(self) -> None:
        """Say that what follows belongs with the tree: a test that needs more than the bytes (a
        data table, say) waits for the parse, whose answer a run caches."""
        if not self.may_parse:
            raise NeedsTree


def suffix_of(path: str) -> str:
    return os.path.splitext(path)[1]


def module_names(path: str, root: str) -> list[str]:
    """Dotted names a file can be imported as within its package root: every suffix of its path
    below `root` (`src/pkg/env.py` -> `src.pkg.env`, `pkg.env`, `env`)."""
    relative = os.path.relpath(os.path.abspath(path), root)
    parts = relative[:-3].split(os.sep) if relative.endswith(".py") else []
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts or any(p.startswith("..") for p in parts):
        return []
    return [".".join(parts[i:]) for i in range(len(parts))]


class ProjectFact:
    """A fact about a package root that rules read (see the module docstring). Subclasses are
    stateless; one instance of each lives in the analysis module that defines it."""

    key: ClassVar[str] = ""  # the rule-options key the index reaches the rules under
    version: ClassVar[int] = 1  # part of every cache key of its summaries: bump on a change of shape
    suffixes: ClassVar[tuple[str, ...]] = (".py",)  # the files it summarizes
    chooses_among: ClassVar[tuple[str, ...]] = ()  # the files whose joining a run `chooses` decides
    # whether `merge` reads nothing but the root's files (their summaries and second looks): then a
    # run stores the index under the root's file contents and reuses it while none of them changes
    merges_from_summaries: ClassVar[bool] = True

    def summarize(self, source: SourceFile) -> Any:
        """What the file says, JSON-shaped; None when nothing (the common case, decided by bytes)."""
        raise NotImplementedError

    def merge(self, project: Project) -> Any:
        """The index of one package root, JSON-shaped; empty when there is nothing to say."""
        raise NotImplementedError

    def slice(self, index: Any, path: str) -> Any:
        """The part of the index the result of the file at `path` depends on (default: all of it)."""
        return index

    def chooses(self, index: Any, path: str) -> bool:
        """Whether the file at `path` (one of `chooses_among`) joins the run."""
        return False

    def __repr__(self) -> str:
        return f"<project fact {self.key}>"


# an analysis a merge asks of one file: (the file, *arguments) -> a JSON-shaped answer
Analysis = Callable[..., Any]


class Project:
    """One package root as a merge sees it: its files (absolute paths, sorted), their summaries,
    their module names, and second questions to a few of them (`analyse`)."""

    def __init__(self, root: str, files: Sequence[str], summaries: Mapping[str, Mapping[str, Any]],
                 read: Callable[[str], bytes | None],
                 answers: Callable[[str, Analysis, tuple[Any, ...], Callable[[], Any]], Any] | None = None) -> None:
        self.root = os.path.abspath(root)
        self._files = sorted(os.path.abspath(f) for f in files)
        self._summaries = summaries  # abspath -> fact key -> summary
        self._read = read
        self._answers = answers  # (path, analysis, args, compute) -> the answer, cached
        self._modules: dict[str, set[str]] | None = None

    def files(self, suffixes: Sequence[str] = (".py",)) -> list[str]:
        return [f for f in self._files if f.endswith(tuple(suffixes))]

    def summaries(self, fact: ProjectFact) -> list[tuple[str, Any]]:
        """(file, summary) of the files that said something, in file order."""
        found = []
        for path in self._files:
            summary = self._summaries.get(path, {}).get(fact.key)
            if summary is not None:
                found.append((path, summary))
        return found

    def module_names(self, path: str) -> list[str]:
        return module_names(path, self.root)

    def modules(self) -> Mapping[str, set[str]]:
        """Each dotted module name of the root and the files it can mean."""
        if self._modules is None:
            self._modules = {}
            for path in self.files():
                for name in module_names(path, self.root):
                    self._modules.setdefault(name, set()).add(path)
        return self._modules

    def relative(self, path: str) -> str:
        return os.path.relpath(path, self.root)

    def analyse(self, path: str, analysis: Analysis, *args: Any) -> Any:
        """`analysis(SourceFile of path, *args)`; None for a file that cannot be read."""
        def compute() -> Any:
            data = self._read(path)
            return None if data is None else analysis(SourceFile(data, suffix_of(path)), *args)

        if self._answers is None:
            return compute()
        return self._answers(path, analysis, args, compute)


def read_file(path: str) -> bytes | None:
    """A regular file's bytes; None for anything else (never blocks on a FIFO, never follows a link)."""
    try:
        return read_regular(path)
    except (Skipped, OSError):
        return None


def summarize(facts: Iterable[ProjectFact], source: SourceFile) -> dict[str, Any]:
    """Every fact's summary of one file (one parse shared), without the facts that said nothing."""
    found = {}
    for fact in facts:
        if source.suffix in fact.suffixes:
            summary = fact.summarize(source)
            if summary is not None:
                found[fact.key] = summary
    return found


def local_project(facts: Sequence[ProjectFact], paths: Iterable[str], root: str,
                  read: Callable[[str], bytes | None] = read_file) -> Project:
    """A package root made of `paths`, summarized here and now, with nothing cached."""
    files = [os.path.abspath(p) for p in paths]
    summaries = {}
    for path in files:
        data = read(path)
        if data is not None:
            summaries[path] = summarize(facts, SourceFile(data, suffix_of(path)))
    return Project(root, files, summaries, read)
