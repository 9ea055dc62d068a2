"""Generated documentation (npu_migrate/commands/docgen.py): every code has a page, the committed
docs are what the generator writes, `--check` catches any drift, and a data-driven rename is one data
entry plus one case, with its page and the coverage table following."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from codemods.api.registry import builtin_rules
from npu_migrate.commands import docgen

REPO = Path(__file__).resolve().parents[2]


def test_committed_docs_are_up_to_date() -> None:
    assert docgen.main(["--check"]) == 0, "docs are stale: run `python -m npu_migrate.commands.docgen`"


def test_every_code_the_product_prints_has_a_page_with_an_example() -> None:
    printed = set()
    for path in (REPO / "npu_migrate").rglob("*.py"):
        printed |= set(re.findall(r"[\"']((?:ANA|MEM|VER)\d{3}|NPU0\d\d)[\"']", path.read_text(encoding="utf-8")))
    assert len(printed) > 20  # the scan finds the wings' codes
    printed |= {rule.code for rule in builtin_rules()}
    pages = {p.stem: p.read_text(encoding="utf-8") for p in (REPO / "docs" / "rules").glob("*.md")}
    assert sorted(printed - set(pages)) == []
    assert sorted(code for code in printed if "\n```" not in pages[code]) == []  # a fenced example


def test_check_finds_an_edited_a_missing_and_a_left_over_page(tmp_path, capsys) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    (docs / "rules" / "NPU101.md").write_text("# NPU101: cuda-method\n\nedited by hand\n", encoding="utf-8")
    (docs / "rules" / "MEM001.md").unlink()
    (docs / "rules" / "NPU999.md").write_text("# NPU999: gone\n", encoding="utf-8")
    table = docs / "rules-core.md"
    table.write_text(table.read_text(encoding="utf-8").replace("| `cuda-method` |", "| `renamed` |"),
                     encoding="utf-8")
    assert docgen.main(["--check", "--docs", str(docs)]) == 1
    err = capsys.readouterr().err
    for name in ("NPU101.md: stale", "MEM001.md: stale", "NPU999.md: no code", "rules-core.md: stale"):
        assert name in err
    assert docgen.main(["--docs", str(docs)]) == 0
    assert docgen.main(["--check", "--docs", str(docs)]) == 0
    assert not (docs / "rules" / "NPU999.md").exists()


def _run(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Python on the copy only: -S keeps the editable install's path hook out."""
    path = os.pathsep.join([str(site), sysconfig.get_paths()["purelib"]])
    return subprocess.run([sys.executable, "-S", *args], cwd=site, capture_output=True, text=True,
                          env={"PYTHONPATH": path, "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                          timeout=300, check=False)


CHECK_CASES = """
from codemods.api.cases import cases_of
from codemods.api.registry import all_rules, find_rule, select_rules
from npu_migrate.apply.engine import RuleSet, migrate_text
rule = find_rule("NPU120")
for case in cases_of(rule):
    rules = select_rules(all_rules(), select=["NPU120"], ignore=["NPU100"])
    outcome = migrate_text(case.source, case.path, RuleSet(rules, dict(case.options)))
    assert outcome.new_text == getattr(case, "after", None), (case.source, outcome.new_text)
print(len(cases_of(rule)), "cases pass")
"""


def test_a_data_driven_rename_is_one_entry_and_one_case(tmp_path) -> None:
    site = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__")
    for folder in ("codemods", "npu_migrate", "docs"):
        shutil.copytree(REPO / folder, site / folder, ignore=ignore)
    # 1. the data entry
    table = site / "codemods" / "data" / "torch_cuda.json"
    data = json.loads(table.read_text(encoding="utf-8"))
    data["entries"].append({"cuda": "torch.cuda.made_up_sync", "npu": "torch.npu.made_up_sync",
                            "action": "rewrite", "code": "NPU120", "transfer_to_npu": "alias"})
    table.write_text(json.dumps(data, indent=1), encoding="utf-8")
    # 2. the case
    rule_module = site / "codemods" / "rules" / "npu120_torch_cuda_api.py"
    with rule_module.open("a", encoding="utf-8") as handle:
        handle.write('CASES.append(Invalid("import torch\\ntorch.cuda.made_up_sync()\\n",\n'
                     '                     after="import torch\\ntorch.npu.made_up_sync()\\n"))\n')
    checked = _run(site, "-c", CHECK_CASES)
    assert checked.returncode == 0, checked.stderr
    assert _run(site, "-m", "codemods.data.tables", "--check").returncode == 0
    # the generator sees exactly the rule's page and the coverage table go stale ...
    stale = _run(site, "-m", "npu_migrate.commands.docgen", "--check")
    assert stale.returncode == 1
    assert sorted(Path(line.split(":")[0]).name for line in stale.stderr.splitlines()) == ["NPU120.md", "coverage.md"]
    # ... and writes both with the new name in them
    wrote = _run(site, "-m", "npu_migrate.commands.docgen")
    assert wrote.returncode == 0, wrote.stderr
    page = (site / "docs" / "rules" / "NPU120.md").read_text(encoding="utf-8")
    assert "| `torch.cuda.made_up_sync` | `torch.npu.made_up_sync` | rewrite (NPU120) |" in page
    assert "torch.cuda.made_up_sync()\n```\n\nbecomes\n\n```python\nimport torch\ntorch.npu.made_up_sync()" in page
    coverage = (site / "docs" / "coverage.md").read_text(encoding="utf-8")
    assert "| `torch.cuda.made_up_sync` | `torch.npu.made_up_sync` | rewrite (NPU120) | alias |" in coverage
    assert _run(site, "-m", "npu_migrate.commands.docgen", "--check").returncode == 0
