"""The verifier's data tables (`npu_migrate/verify/thresholds.json`: the pass rule's thresholds by
default, by dtype and under AMP; `codes.toml`: the VER codes' pages) and their schemas, read
through core's one loader; a user's `--thresholds FILE` is checked against the same fields."""

from __future__ import annotations

from pathlib import Path

from npu_migrate.core.codes import CODE_TABLE, code_table
from npu_migrate.core.tables import NUMBER, MapOf, Record, TableSet

# the fields of `thresholds.Thresholds`, each optional in a section
VALUES = Record(optional={"cosine_min": NUMBER, "max_abs_when_cosine_low": NUMBER, "cosine_hard_min": NUMBER,
                          "max_abs_hard": NUMBER, "abs_floor": NUMBER, "dtype_must_match": bool,
                          "max_share_rel_5e3": (*NUMBER, None)})
SECTIONS = {"default": VALUES, "by_dtype": MapOf(VALUES), "amp": VALUES}
OVERRIDES = Record(optional=SECTIONS | {"_comment": str})  # a user's file: any of the sections

SCHEMAS = {"thresholds.json": Record(required=SECTIONS, optional={"_comment": str}),
           CODE_TABLE: code_table("VER")}

TABLES = TableSet(Path(__file__).resolve().parent, SCHEMAS, "npu_migrate/verify")
