"""The apply wing's data table (`npu_migrate/apply/data/codes.toml`: the engine's own codes, which
are not rules: NPU000 a file that failed, NPU001/NPU002 a suppression comment that silences
nothing; their severity and pages) and its schema, read through core's one loader."""

from __future__ import annotations

from pathlib import Path

from npu_migrate.core.codes import CODE_TABLE, code_table
from npu_migrate.core.tables import TableSet

SCHEMAS = {CODE_TABLE: code_table("NPU0", 2, severity=True)}  # NPU100 and up are the rules'

TABLES = TableSet(Path(__file__).resolve().parent / "data", SCHEMAS, "npu_migrate/apply/data")
