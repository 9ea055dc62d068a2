"""Output formats: SARIF validated against the official 2.1.0 schema, JSON, markdown, HTML, and
the command line (exit codes, --only, --output, bad input)."""
import json
import os
import subprocess
import sys

import jsonschema
import pytest
from analyze_paths import CPU_ONLY, DEMO, REPO

from npu_migrate.analyze.render import render, to_json
from npu_migrate.core.diagnostics import Diagnostic, Severity
from npu_migrate.core.sarif import to_sarif

SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "sarif-schema-2.1.0.json")


@pytest.fixture(scope="module")
def validator():
    with open(SCHEMA_PATH, encoding="utf-8") as handle:
        schema = json.load(handle)
    return jsonschema.Draft4Validator(schema)


def test_sarif_of_demo_is_valid(demo, validator):
    log = json.loads(render(demo, "sarif"))
    errors = sorted(validator.iter_errors(log), key=str)
    assert not errors, errors[:3]
    run = log["runs"][0]
    results = run["results"]
    assert len(results) == len(demo.findings)
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    for result in results:
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
    cu = next(r for r in results if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("scale.cu"))
    assert "region" not in cu["locations"][0]["physicalLocation"]  # line 0 = whole file
    eigh = next(r for r in results if r["ruleId"] == "ANA030")
    assert eigh["level"] == "warning"
    assert eigh["locations"][0]["physicalLocation"]["region"] == {"startLine": 61, "startColumn": 23}


def test_to_sarif_api(validator):
    diagnostics = [Diagnostic("NPU999", "unknown code", "a dir/b.py", 3, 0, Severity.ERROR),
                   Diagnostic("ANA001", "x", "/abs/p.py", 1, 2, Severity.INFO, end_line=1, end_col=9)]
    log = to_sarif(diagnostics, {"ANA001": ("cuda-automatic", "summary", "https://example.org/ANA001")}, "9.9")
    assert not list(validator.iter_errors(log))
    run = log["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["ANA001", "NPU999"]
    assert run["tool"]["driver"]["rules"][0]["helpUri"] == "https://example.org/ANA001"
    first, second = run["results"]
    assert first["level"] == "error" and first["ruleIndex"] == 1
    assert first["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "a%20dir/b.py"
    assert first["locations"][0]["physicalLocation"]["region"] == {"startLine": 3}
    assert second["level"] == "note"
    assert second["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "file:///abs/p.py"
    assert second["locations"][0]["physicalLocation"]["region"] == {"startLine": 1, "startColumn": 2,
                                                                   "endLine": 1, "endColumn": 9}


def test_json_markdown_html_carry_the_same_tables(demo):
    data = to_json(demo)
    titles = [t["title"] for section in data["sections"].values() for t in section]
    markdown = render(demo, "markdown")
    page = render(demo, "html")
    for title in titles:
        assert f"### {title}" in markdown
        assert title.replace("↔", "↔") in page
    assert data["rating"]["level"] == "High"
    assert len(data["findings"]) == len(demo.findings)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<script" not in page


def test_terminal_rendering_clips_long_tables(demo):
    text = render(demo, "text", max_rows=2)
    assert "Heavy operators" in text and "more rows" in text


def cli(*args):
    """In-process (click's runner): the same code path as the console script, minus start-up."""
    from click.testing import CliRunner

    from npu_migrate.cli import main

    return CliRunner().invoke(main, ["analyze", *args], catch_exceptions=False)


def test_cli_subprocess_exit_codes(tmp_path):
    """One real subprocess, as a user runs it: a missing path is a one-line error, exit 2."""
    result = subprocess.run([sys.executable, "-m", "npu_migrate", "analyze", str(tmp_path / "nope")],
                            cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "nope" in result.stderr


def test_cli_only_memory_json(tmp_path):
    out = tmp_path / "report.json"
    result = cli(DEMO, "--only", "memory", "--format", "json", "--output", str(out), "-j", "1")
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    data = json.loads(out.read_text())
    assert list(data["sections"]) == ["memory"]
    assert {f["code"] for f in data["findings"]} == {"ANA040", "ANA041", "ANA042", "ANA044", "ANA045", "ANA046", "ANA047",
                                                     "ANA049"}  # ANA049: the demo's loaders, tuned


def test_cli_terminal_and_markdown():
    result = cli(CPU_ONLY, "-j", "1")
    assert result.exit_code == 0, result.output
    assert "Ascend NPU migration assessment" in result.stdout and "DataLoaders" in result.stdout
    markdown = cli(CPU_ONLY, "--format", "markdown", "-j", "1")
    assert markdown.stdout.startswith("# Ascend NPU migration assessment")


def test_cli_bad_input(tmp_path):
    assert cli().exit_code == 2
    assert cli(CPU_ONLY, "--only", "nonsense").exit_code == 2
    (tmp_path / "ok.py").write_text("import torch\nx = torch.ones(1).cuda()\n")
    (tmp_path / "bad.py").write_text("def broken(:\n    pass\n")
    result = cli(str(tmp_path), "--format", "json", "-j", "1")
    assert result.exit_code == 1
    assert f"{tmp_path / 'bad.py'}:1:" in result.stderr
    data = json.loads(result.stdout)
    assert data["summary"]["files that failed"] == 1
    assert any(f["code"] == "ANA001" and f["path"].endswith("ok.py") for f in data["findings"])


def test_parallel_equals_serial(tmp_path):
    with open(os.path.join(DEMO, "demo", "train.py"), encoding="utf-8") as handle:
        source = handle.read()
    for i in range(30):
        (tmp_path / f"t{i:02d}.py").write_text(source)
    from npu_migrate.analyze import analyze

    serial = to_json(analyze([str(tmp_path)], jobs=1))
    parallel = to_json(analyze([str(tmp_path)], jobs=2))
    assert serial == parallel
    assert sum(1 for f in serial["findings"] if f["code"] == "ANA044") == 60


def test_html_shows_what_needs_a_person_first_coloured_and_filterable(tmp_path):
    """Issue 29: the page listed the rows that need work among the routine ones, with no order,
    colour or filter, and showed literal backticks."""
    import re
    from html.parser import HTMLParser

    from npu_migrate.analyze import analyze

    routine = "".join(f"x{i} = torch.ones(2).cuda()\n" for i in range(8))
    (tmp_path / "a.py").write_text("import torch\nimport triton\n" + routine + "v = torch.version.cuda\n")
    page = render(analyze([str(tmp_path)], jobs=1), "html")

    class Rows(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.findings, self.radios = [], [], []

        def handle_starttag(self, tag, attrs):
            attributes = dict(attrs)
            classes = (attributes.get("class") or "").split()
            if tag == "tr" and "status" in classes:
                self.rows.append(next(c for c in classes if c.startswith("status-")))
            if tag == "li" and {"error", "warning", "info"} & set(classes):
                self.findings.append(next(c for c in classes if c in ("error", "warning", "info")))
            if tag == "input" and attributes.get("name") == "show":
                self.radios.append(attributes["id"])

    parsed = Rows()
    parsed.feed(page)
    order = ["status-manual", "status-reported", "status-policy", "status-rewritten"]
    assert parsed.rows[0] == "status-manual" and parsed.rows.count("status-rewritten") == 8
    assert [order.index(r) for r in parsed.rows] == sorted(order.index(r) for r in parsed.rows)
    assert parsed.findings == sorted(parsed.findings, key=["error", "warning", "info"].index)
    # the filter: radios before the report, and CSS that hides the routine rows when one is checked
    assert parsed.radios == ["show-all", "show-work", "show-person"]
    assert page.index('id="show-person"') < page.index('<div class="report">')
    assert re.search(r"#show-work:checked~\.report tr\.routine[^{]*\{display:none\}", page)
    assert re.search(r"tr\.status-manual\{background:#[0-9a-f]{6}\}", page)
    assert "`" not in page and "<code>triton</code>" in page
    assert "<script" not in page  # still a page that runs nothing
