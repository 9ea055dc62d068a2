"""The rule data tables (`codemods/data/*.json`): a schema per table, read through the product's
one loader (`npu_migrate.core.tables.read_table`), and a consistency check across tables.

A broken table stops the run with one clear line naming the file and the bad field. Checking all
the tables costs about 10 ms once per process, against about 1 ms to parse them
(`python bench/data_tables_bench.py`).

    python -m codemods.data.tables --check   # every table: schema + consistency; exit 1 on a problem
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from npu_migrate.core.tables import DataError, ListOf, MapOf, OneOf, Record
from npu_migrate.core.tables import read_table as read_checked

DATA = Path(__file__).resolve().parent


# -- the schemas --------------------------------------------------------------------------------

CODE = str  # "NPU123"; that a rule has it is checked by `codemods.docgen.coverage.problems`
STRINGS = ListOf(str)
STRING_MAP = MapOf(str)
SEVERITY = OneOf("info", "warning", "error")
ACTIONS = ("rewrite", "flag", "none")

# one row of docs/coverage.md: a CUDA-side API or pattern and what the rules do with it
ENTRY = Record(
    required={"cuda": str, "action": OneOf(*ACTIONS), "transfer_to_npu": str},
    optional={
        "npu": (str, None),  # the NPU counterpart (a name, or words when there is none to name)
        "code": CODE, "shell_code": CODE,  # the Python rule; the shell-script rule
        "note": str, "message": str, "severity": SEVERITY,
        "members": OneOf("same", "flag"),  # rewrites: members keep their names / are reported
        # with "flag": members the NPU name has under the same name (code already written for
        # Ascend spells `torch.profiler.ProfilerActivity.NPU`, which lives on torch_npu's enum)
        "kept_members": STRINGS,
        "match": str,  # how the rule finds it: "name" (default), "type-string", "call", ...
        "kind": str, "also": STRINGS, "at": STRINGS, "when": str, "message_computed": str,
        # a flag no NPU code reads whose plain assignment the npu target removes (NPU161)
        "assignment": OneOf("remove"),
    })
ENTRIES = ListOf(ENTRY)
COVERAGE = Record(required={"description": str, "entries": ENTRIES}, optional={"npu_modules": STRINGS})
# one entry of the catalogue of CUDA-only knowledge (`cuda_only.json`, read through
# `codemods.data.catalogue`): a coverage row with its status per torch_npu version and what finds it
STATUS = OneOf("works", "npu-route", "no-route")
CATALOGUE_ENTRY = Record(
    required=ENTRY.required | {"kind": OneOf("library", "kernel-language", "engine", "monitoring", "extension",
                                             "packages", "layout", "option", "env", "command"),
                               "status": MapOf(STATUS)},  # first torch_npu release it holds from -> status
    optional=ENTRY.optional | {
        "library": str,  # the library's display name (analyze's third-party table)
        "effort": str,  # analyze's rating category (npu_migrate/analyze/data/rating.json)
        "config_code": CODE,  # the YAML-config rule
        "framework": str, "option": str, "calls": STRINGS, "position": int,  # option values ...
        "values": STRINGS, "pattern": str,  # ... that trigger the entry (exact strings / a full-match regex)
        "flags": STRINGS, "config_keys": STRINGS,  # how launch scripts and YAML configs spell the option
        "replacement": str,  # the value a rewrite writes
        "replacement_option": str,  # the option a rewrite writes it to (`use_flash_attention_2=True` -> `attn_implementation="sdpa"`)
        "fix": OneOf("safe", "unsafe"),  # the rewrite's safety where it differs from its rule's (ruff's applicability)
        # options that, set true in the same file, keep the value as written (reported, not rewritten):
        # TRL's `padding_free`/`packing` split packed sequences by position_ids on the flash-attention path only
        "kept_with": STRINGS,
        "framework_status": MapOf(STATUS),  # as `status`, by release of `framework` (transformers 4.56 runs flash_attention_2 on NPU)
    })
_ABOUT = {"about": str, "schema": (str, STRING_MAP), "title": str, "description": str}
DEVICE_POSITIONS = Record(
    optional=_ABOUT | {"entries": ENTRIES, "keywords": STRINGS, "names": STRINGS, "skip_functions": STRINGS,
                       "functions": MapOf(Record(optional={"positions": ListOf(int), "keywords": STRINGS})),
                       "methods": MapOf(ListOf(int))})

# the routes of CUDA-only library calls (`routes.json`, read by codemods/families/routes.py):
# a keyword the route takes only at the `plain` values (spaces removed; any other value keeps the
# call, `unmapped` says why), or drops at any value (`dropped`)
ROUTE_KEYWORD = Record(optional={"plain": STRINGS, "unmapped": str, "dropped": str})
CALL_ROUTES = Record(
    required={"code": CODE, "versions": str, "modules": STRINGS, "keywords": MapOf(ROUTE_KEYWORD),
              # a function's parameters in the library's positional order, and the layout its tensors have
              "functions": MapOf(Record(required={"parameters": STRINGS, "layout": OneOf("BSND", "TND")}))},
    optional={"causal_biases": STRINGS})  # xFormers' bias classes that are top-left causal masks
CONSTRUCTOR_ROUTE = Record(
    required={"torch_class": str, "parameters": STRINGS},
    optional={"fixed": MapOf(Record(required={"values": STRINGS, "reason": str})), "dropped": STRINGS,
              "spelled": STRING_MAP, "choose": Record(required={"parameter": str, "classes": STRING_MAP})})

SCHEMAS: dict[str, Any] = {
    "alloc_conf.json": Record(
        required={"accepted": MapOf(Record(optional={"in_2_9_7_3": bool, "npu_only": bool})),
                  "translate": STRING_MAP, "not_with_expandable_segments": STRINGS, "entries": ENTRIES},
        optional=_ABOUT),
    "amp.json": Record(
        required={"form": str, "device": str, "entries": ENTRIES, "legacy_gpu": STRING_MAP,
                  "cuda_amp": MapOf(Record(required={"target": str, "device": str},
                                           optional={"positional": (ListOf(str), None)})),
                  "generic": MapOf(Record(required={"position": (int, None), "keyword": str},
                                          optional={"cuda_when_missing": bool}))},
        optional=_ABOUT),
    "api_versions.json": Record(
        required={"apis": MapOf(Record(required={"since": str, "older": (str, None), "source": str},
                                       optional={"names": STRINGS}))},
        optional=_ABOUT),
    "coverage_backends.json": COVERAGE,
    "cuda_only.json": Record(required={"title": str, "description": str, "entries": ListOf(CATALOGUE_ENTRY)}),
    "coverage_devices.json": COVERAGE,
    "coverage_graphs.json": Record(
        required=COVERAGE.required | {"compile_backends": STRING_MAP, "compile_backend_flags": STRING_MAP},
        optional=COVERAGE.optional),
    "coverage_memory.json": COVERAGE,
    "coverage_profiler.json": COVERAGE,
    "coverage_tensors.json": COVERAGE,
    "device_positions.json": DEVICE_POSITIONS,
    "device_positions_extra.json": DEVICE_POSITIONS,
    "device_positions_frameworks.json": DEVICE_POSITIONS,
    "distributed.json": Record(
        required={"backends": STRING_MAP, "devices": STRING_MAP, "keywords": STRINGS, "names": STRINGS,
                  "constants": STRING_MAP, "renames": STRING_MAP, "flags": STRING_MAP, "entries": ENTRIES,
                  "functions": MapOf(Record(required={"position": (int, None), "keyword": str})),
                  "reductions": MapOf(Record(required={"position": int, "keyword": str})),
                  "float64_reduction": str},
        optional=_ABOUT),
    "env_vars.json": Record(required={"npu_checks": STRING_MAP, "entries": ENTRIES}, optional=_ABOUT),
    "insertion.json": Record(
        required={"amp_markers": str, "amp_dtypes": STRING_MAP, "transfer_methods": STRINGS,
                  "container_methods": STRINGS, "clip_functions": STRINGS, "not_optimizers": str,
                  "grad_disabling": STRINGS, "builtins": STRINGS, "dataloaders": STRINGS,
                  "loader_wrappers": STRINGS, "dataloader_pin_memory_position": int,
                  "dataloader_num_workers_position": int, "device_like_names": str,
                  "snapshot": MapOf((str, int)), "data_names": str},
        optional=_ABOUT),
    "routes.json": Record(
        required={"calls": MapOf(CALL_ROUTES),
                  "constructors": MapOf(Record(required={"code": CODE, "versions": str,
                                                         "classes": MapOf(CONSTRUCTOR_ROUTE)}))},
        optional=_ABOUT),
    "tune.json": Record(
        required={
            "optimizers": MapOf(Record(required={"npu": str, "positional": STRINGS, "must_be": STRING_MAP,
                                                 "dropped": STRINGS, "required": STRINGS})),
            "optimizer_blockers": STRING_MAP,
            "dynamic_shapes": Record(required={"calls": STRING_MAP, "methods": STRING_MAP,
                                               "random_size_calls": STRINGS}),
            "launch_env": ListOf(Record(required={"name": str, "value": str, "api": str, "what": str})),
            "launchers": str,
            "opportunities": MapOf(Record(required={"kind": str, "section": OneOf("computation", "memory"),
                                                   "effect": str})),
            "apex_routes": ListOf(Record(required={"torch_npu": str, "route": str})),
        },
        optional=_ABOUT),
    "torch_cuda.json": Record(
        required={"torch_npu_npu_all": MapOf(STRINGS), "excluded_from_rewrite": STRING_MAP,
                  "entries": ENTRIES},
        optional=_ABOUT),
}
# a table without a schema of its own (a new file, a test's temporary table): entries checked,
# other keys free; `problems()` still reports the missing schema
GENERIC = Record(optional={"entries": ENTRIES})


def schema_for(name: str) -> Any:
    """The schema of a table by file name; every `device_positions*.json` shares one (a rule
    family adds its positions in a file of its own); None for a table without one."""
    if name in SCHEMAS:
        return SCHEMAS[name]
    return DEVICE_POSITIONS if name.startswith("device_positions") else None


# -- loading ------------------------------------------------------------------------------------

def _label(path: Path) -> str:
    return f"codemods/data/{path.name}" if path.parent == DATA else str(path)


def read_table(path: Path) -> dict[str, Any]:
    """One table, parsed and checked against its schema; DataError names the file and field."""
    schema = schema_for(path.name)
    return read_checked(path, GENERIC if schema is None else schema, _label(path))


@functools.cache
def load_data(name: str) -> dict[str, Any]:
    """A table of `codemods/data`, parsed and checked once per process."""
    return read_table(DATA / name)


def tables(directory: Path = DATA, pattern: str = "*.json") -> list[tuple[Path, dict[str, Any]]]:
    """Every table in `directory` (sorted by name), each checked against its schema."""
    return [(path, read_table(path)) for path in sorted(directory.glob(pattern))]


# -- consistency across tables ------------------------------------------------------------------

def _names(entry: dict[str, Any]) -> list[str]:
    return [entry["cuda"], *entry.get("also", ())]


def contradictions(found: Iterable[tuple[Path, dict[str, Any]]]) -> list[str]:
    """The same CUDA name in two entries that disagree: a rewrite and a flag/"none", or two
    rewrites to different NPU names. Both would act on the same line. (Two entries for one
    name may exist when they agree, e.g. NPU150 and NPU151 rewrite a typed tensor as a name
    and as a type string.) Wildcard entries (`NCCL_*`) are fallbacks: an exact entry wins."""
    seen: dict[str, tuple[str, dict[str, Any]]] = {}
    problems = []
    for path, data in found:
        for entry in data.get("entries", ()):
            for name in _names(entry):
                where = f"{path.name} ({entry.get('code') or entry['action']})"
                if name not in seen:
                    seen[name] = (where, entry)
                    continue
                first_where, first = seen[name]
                if first["action"] != entry["action"]:
                    problems.append(f"`{name}`: {first_where} says {first['action']!r}, "
                                    f"{where} says {entry['action']!r}")
                elif entry["action"] == "rewrite" and first.get("npu") != entry.get("npu"):
                    problems.append(f"`{name}`: {first_where} rewrites it to {first.get('npu')!r}, "
                                    f"{where} to {entry.get('npu')!r}")
    return problems


def problems(directory: Path = DATA) -> list[str]:
    """Everything wrong with the tables of `directory`: unreadable or off-schema tables, tables
    without a schema, contradicting entries."""
    found, readable = [], []
    for path in sorted(directory.glob("*.json")):
        if schema_for(path.name) is None:
            found.append(f"{path.name}: no schema in codemods/data/tables.py SCHEMAS")
        try:
            readable.append((path, read_table(path)))
        except DataError as exc:
            found.append(str(exc))
    return found + contradictions(readable)


def main(argv: list[str] | None = None) -> int:
    import argparse  # here: the rules read the tables, only this command parses arguments

    parser = argparse.ArgumentParser(prog="python -m codemods.data.tables",
                                     description="Check the rule data tables against their schemas.")
    parser.add_argument("--check", action="store_true", help="check every table (the default action)")
    parser.add_argument("--directory", type=Path, default=DATA, help="the tables' folder")
    args = parser.parse_args(argv)
    found = problems(args.directory)
    for problem in found:
        print(f"data: {problem}", file=sys.stderr)
    if not found:
        print(f"{len(list(args.directory.glob('*.json')))} tables OK")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
