"""Issue 25 item 4: every public name of `torch.cuda` and `torch.cuda.amp` (torch 2.13's
`__all__`), used as a value in each way code spells it, is rewritten to a name torch_npu has or
reported by a rule that knows it -- never left to the final sweep (NPU599) alone, never silent."""

from __future__ import annotations

import pytest
import rule_cases

from codemods.api.registry import all_rules, select_rules
from codemods.data.tables import load_data
from npu_migrate.apply.engine import RuleSet, migrate_text
from npu_migrate.core.diagnostics import Severity

torch = pytest.importorskip("torch")

CUDA_NAMES = sorted(set(torch.cuda.__all__))
AMP_NAMES = sorted(set(torch.cuda.amp.__all__))
GENERIC = {"NPU100", "NPU599"}  # the added import and the final sweep say nothing about the name

# each way of using a name as a value, one use per line after the imports
FORMS = {
    "attribute": ("import torch\n", "v_{n} = torch.cuda.{n}\n"),
    "call": ("import torch\n", "v_{n} = torch.cuda.{n}()\n"),
    "getattr": ("import torch\n", "v_{n} = getattr(torch.cuda, {n!r})\n"),
    "from import": ("", "from torch.cuda import {n}\n"),
}
# a module alias is rewritten or reported at its import, as a whole: one file per name
ALIASES = {
    "module alias": "import torch.cuda as tc\nv = tc.{n}\n",
    "from torch import cuda": "from torch import cuda\nv = cuda.{n}\n",
}


def _silent_lines(text: str, head_lines: int, names: list[str], target: str) -> list[str]:
    options = {"target": target}
    outcome = rule_cases.migrate(text, None, "names.py", options=options)
    said = {item.line for item in [*outcome.edits, *outcome.diagnostics] if item.code not in GENERIC}
    changed = set()
    if outcome.new_text is not None:
        old, new = text.splitlines(), outcome.new_text.splitlines()
        changed = {i + 1 for i, line in enumerate(old) if line not in new}
    return [name for index, name in enumerate(names, head_lines + 1) if index not in said | changed]


@pytest.mark.parametrize("target", ["npu", "portable"])
@pytest.mark.parametrize("form", FORMS)
def test_every_public_torch_cuda_name_is_rewritten_or_reported(form: str, target: str) -> None:
    head, line = FORMS[form]
    text = head + "".join(line.format(n=name) for name in CUDA_NAMES)
    assert _silent_lines(text, head.count("\n"), CUDA_NAMES, target) == []


@pytest.mark.parametrize("target", ["npu", "portable"])
@pytest.mark.parametrize("form", ALIASES)
def test_every_public_torch_cuda_name_through_a_module_alias_is_rewritten_or_reported(form: str, target: str) -> None:
    silent = []
    ruleset = RuleSet(select_rules(all_rules()), {"target": target})  # built once: 125 small files follow
    for name in CUDA_NAMES:
        outcome = migrate_text(ALIASES[form].format(n=name), "alias.py", ruleset)
        assert outcome.error is None, outcome.error
        if not [item for item in [*outcome.edits, *outcome.diagnostics] if item.code not in GENERIC]:
            silent.append(name)
    assert silent == []


@pytest.mark.parametrize("form", ["attribute", "from import"])
def test_every_public_torch_cuda_amp_name_is_rewritten_or_reported(form: str) -> None:
    head, line = {"attribute": ("import torch\n", "v_{n} = torch.cuda.amp.{n}\n"),
                  "from import": ("", "from torch.cuda.amp import {n}\n")}[form]
    text = head + "".join(line.format(n=name) for name in AMP_NAMES)
    assert _silent_lines(text, head.count("\n"), AMP_NAMES, "npu") == []


def test_every_public_name_has_a_row_or_an_owner_in_the_table() -> None:
    """torch_cuda.json knows every name of torch 2.13's `torch.cuda.__all__`: a rewrite, a report, or
    the rule that owns it (`excluded_from_rewrite`)."""
    table = load_data("torch_cuda.json")
    known = {e["cuda"].removeprefix("torch.cuda.") for e in table["entries"]} | set(table["excluded_from_rewrite"])
    assert [name for name in CUDA_NAMES if name not in known] == []


def test_the_module_of_amp_and_its_odd_member_get_the_npu_route() -> None:
    outcome = rule_cases.migrate("import torch\nm = torch.cuda.amp\nok = torch.cuda.amp.amp_definitely_not_available()\n",
                                 None, "x.py")
    messages = {d.line: d.message for d in outcome.diagnostics if d.code == "NPU130"}
    assert "torch.amp" in messages[2] and "not torch.npu.is_available()" in messages[3]
    assert all(d.severity is Severity.WARNING for d in outcome.diagnostics if d.code == "NPU130")
