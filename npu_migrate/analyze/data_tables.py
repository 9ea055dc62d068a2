"""The analyzer's data tables (`npu_migrate/analyze/data/*.json`, and `codes.toml`: the ANA codes
with their severity, summary and page) and their schemas, read through core's one loader
(`catalog.load` is the way in); `python -m npu_migrate.commands.tables --check` checks them with
every other shipped table."""

from __future__ import annotations

from pathlib import Path

from npu_migrate.core.codes import CODE_TABLE, code_table
from npu_migrate.core.tables import NUMBER, ListOf, MapOf, Record, TableSet

STRINGS = ListOf(str)
_ABOUT = {"about": str}

SCHEMAS = {
    CODE_TABLE: code_table("ANA", severity=True, summary=True),
    "cuda_kinds.json": Record(
        required={"kinds": STRINGS,
                  "code_ranges": ListOf(ListOf(str)),  # [rule-code prefix, kind], first match wins
                  "env_prefixes": STRINGS, "amp_calls": STRINGS, "distributed_names": STRINGS,
                  "other_prefixes": STRINGS},
        optional=_ABOUT),
    "dataloader.json": Record(
        required={"positional": STRINGS,  # DataLoader's parameters in positional order
                  "settings": MapOf(Record(
                      required={"default": (int, bool)},
                      optional={"bad": ListOf((int, bool)), "advice_missing": str, "advice_bad": str,
                                "needs_workers": bool, "training_only": bool, "advice_shared": str}))},
        optional=_ABOUT),
    "distributed.json": Record(
        required={"setups": ListOf(Record(required={"kind": str, "calls": STRINGS, "modules": STRINGS, "hccl": str},
                                          optional={"not_modules": STRINGS})),
                  "collectives": STRINGS, "replaced_on_import": MapOf(str)},
        optional=_ABOUT),
    "fusion.json": Record(
        required={"patterns": MapOf(Record(required={"route": str, "summary": str})),
                  "elementwise_chain_min_ops": int},
        optional=_ABOUT),
    "operators.json": Record(
        required={"callables": MapOf(Record(required={"class": str, "layer": (str, None), "aten": (STRINGS, None)},
                                            optional={"note": str})),
                  "matmul_operator": Record(required={"name": str, "class": str, "aten": STRINGS}),
                  "tensor_methods": MapOf(str)},
        optional=_ABOUT),
    "rating.json": Record(
        required={"categories": MapOf(Record(required={"label": str, "weight": NUMBER, "cap": int, "days": NUMBER,
                                                       "floor": (str, None), "why": str})),
                  "thresholds": MapOf(int), "baseline_days": NUMBER, "baseline_label": str, "baseline_why": str},
        optional=_ABOUT),
}

TABLES = TableSet(Path(__file__).resolve().parent / "data", SCHEMAS, "npu_migrate/analyze/data")
