"""The memory wing's data tables (`npu_migrate/memory/data/*.json`: allocator advice, allocation
site categories; `codes.toml`: the MEM codes' pages) and their schemas, read through core's one
loader."""

from __future__ import annotations

from pathlib import Path

from npu_migrate.core.codes import CODE_TABLE, code_table
from npu_migrate.core.tables import ListOf, MapOf, Record, TableSet

STRINGS = ListOf(str)
SETTING = Record(required={"setting": str, "when": str, "why": str})

SCHEMAS = {
    CODE_TABLE: code_table("MEM"),
    "advice.json": Record(
        required={"env_var": str, "cuda_env_var": str, "exclusive_with_expandable": STRINGS,
                  "pytorch": MapOf(SETTING), "tensorflow": MapOf(SETTING)},
        optional={"_doc": str}),
    "categories.json": Record(
        required={"library_files": STRINGS,  # regexes of frames that are library code
                  "rules": ListOf(Record(required={"category": str, "name": str, "file": str})),
                  "allocator_internals": str},
        optional={"_doc": str}),
}

TABLES = TableSet(Path(__file__).resolve().parent / "data", SCHEMAS, "npu_migrate/memory/data")
