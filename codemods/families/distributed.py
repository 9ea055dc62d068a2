"""NPU140-NPU143: torch.distributed on HCCL instead of NCCL.

NPU140 rewrites backend strings where the code proves they are backends: the backend argument
of `init_process_group`/`new_group` (positional or keyword), `backend=`/`dist_backend=` of any
call, comparisons with a backend-valued expression (`backend == "nccl"`,
`dist.get_backend() in ("nccl", ...)`) and argparse `--dist-backend` defaults and choices.
NPU141 turns `Backend.NCCL` into `Backend.HCCL`, NPU142 `is_nccl_available` into
`is_hccl_available`; NPU143 reports `ProcessGroupNCCL`. Mapping: `codemods/data/distributed.json`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from codemods.api.rule import Fix, Rule, RuleContext
from codemods.data.tables import load_data
from npu_migrate.core.diagnostics import Severity

DATA = "distributed.json"


@dataclass(frozen=True)
class DistTable:
    backends: dict[str, str]
    devices: dict[str, str]
    functions: dict[str, dict[str, Any]]
    keywords: frozenset[str]
    names: tuple[str, ...]
    constants: dict[str, str]
    renames: dict[str, str]
    flags: dict[str, str]


@cache
def dist_table() -> DistTable:
    d = load_data(DATA)
    return DistTable(d["backends"], d["devices"], d["functions"], frozenset(d["keywords"]),
                     tuple(d["names"]), d["constants"], d["renames"], d["flags"])


class DistRule(Rule):
    fix = Fix.SAFE
    severity = Severity.WARNING
    prefilter = r"nccl|NCCL"
    needs_torch_npu = True

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self.table = dist_table()

