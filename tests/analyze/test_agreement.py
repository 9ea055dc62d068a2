"""`analyze` and `apply` agree line by line: the lines `apply` changes are exactly the CUDA rows
that `analyze` marks "rewritten", and no other row is on a changed line. The oracle is the text
`apply` writes (a diff), not the engine records `analyze` reads."""

import ast
import difflib
import os
from pathlib import Path

import pytest

from npu_migrate.analyze import analyze
from npu_migrate.apply.engine import migrate_source

CORPUS = "/work/corpus"

PATTERNS = '''\
import os
import torch
from torch.cuda import amp
import tensorrt as trt

os.environ["CUDA_VISIBLE_DEVICES"] = "0"
os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
torch.backends.cudnn.benchmark = True
names = {"cuda:0": 1}
device = torch.device("cpu")
scaler = amp.GradScaler(enabled=True)
scaler2 = torch.cuda.amp.GradScaler(enabled=True)
model = torch.nn.Linear(2, 2).cuda()
if torch.cuda.is_available():
    torch.cuda.manual_seed_all(0)
with torch.cuda.amp.autocast():
    y = model(torch.ones(2, device="cuda"))
x = torch.ones(3).to(
    "cuda",
)
torch.backends.cudnn.deterministic = True
'''


def changed_lines(text: str, new: str) -> set[int]:
    """Original line numbers that `apply` replaced or deleted (insertions change no old line)."""
    old_lines, new_lines = text.splitlines(), new.splitlines()
    changed: set[int] = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            changed.update(range(i1 + 1, i2 + 1))
    return changed


def statement_of(tree: ast.Module) -> dict[int, tuple[int, int]]:
    spans: dict[int, tuple[int, int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not hasattr(node, "body"):
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                spans.setdefault(line, (node.lineno, node.end_lineno or node.lineno))
    return spans


def rows_by_file(assessment) -> dict[str, list[tuple[int, str]]]:
    table = next(t for t in assessment.sections["architecture"] if t.title == "CUDA code locations")
    rows: dict[str, list[tuple[int, str]]] = {}
    for row in table.rows:
        path, line, _ = row[0].rsplit(":", 2)
        rows.setdefault(path, []).append((int(line), row[2]))
    return rows


def assert_agreement(paths: list[str]) -> int:
    rows = rows_by_file(analyze(paths, jobs=1))
    checked = 0
    for path in paths:
        text = Path(path).read_text(encoding="utf-8")
        changed = changed_lines(text, migrate_source(text, path))
        spans = statement_of(ast.parse(text))
        changed_statements = {spans.get(line, (line, line)) for line in changed}
        per_line: dict[int, set[str]] = {}
        for line, status in rows.get(path, []):
            per_line.setdefault(line, set()).add(status)
            rewritten = spans.get(line, (line, line)) in changed_statements
            assert (status == "rewritten by apply") == rewritten, (path, line, status)
            checked += 1
        # one status per line: never automatic and manual on the same line
        assert all(len(statuses) == 1 for statuses in per_line.values()), per_line
        # every line apply changes is a "rewritten" row (the row may sit on another line of the statement)
        row_statements = {spans.get(line, (line, line)) for line, s in rows.get(path, []) if s == "rewritten by apply"}
        for line in changed:
            assert spans.get(line, (line, line)) in row_statements, (path, line, "changed by apply, no row")
    return checked


def test_patterns_agree_line_by_line(tmp_path):
    path = tmp_path / "patterns.py"
    path.write_text(PATTERNS)
    assert assert_agreement([str(path)]) >= 12
    rows = dict(rows_by_file(analyze([str(path)], jobs=1))[str(path)])
    assert rows[3] == rows[11] == rows[12] == "rewritten by apply"  # torch.cuda.amp, as NPU130 does
    assert rows[6] == "rewritten by apply"  # CUDA_VISIBLE_DEVICES, NPU201
    assert rows[7] == "rewritten by apply"  # NPU201 rewrites, and notes the -1 value: still not manual
    assert rows[8] == "rewritten by apply"  # NPU161 removes the no-op `cudnn.benchmark`
    assert rows[21] == "reported by a rule"  # NPU161 explains `cudnn.deterministic`
    assert rows[9] == "needs a person"  # a device string in no device position


def test_rating_counts_the_same_statuses(tmp_path):
    path = tmp_path / "patterns.py"
    path.write_text(PATTERNS)
    result = analyze([str(path)], jobs=1)
    statuses = [status for _, status in rows_by_file(result)[str(path)]]
    reasons = {label: count for label, count, _ in result.rating.reasons}
    assert reasons["CUDA code that needs a person (no rule)"] == statuses.count("needs a person")
    assert reasons["CUDA code `apply` rewrites"] == statuses.count("rewritten by apply")


def test_policy_rows_when_a_rule_is_ignored(tmp_path):
    from npu_migrate.analyze import default_plan

    path = tmp_path / "amp.py"
    path.write_text("import torch\nscaler = torch.cuda.amp.GradScaler()\nx = torch.ones(1).cuda()\n")
    result = analyze([str(path)], jobs=1, plan=default_plan(ignore=["NPU130"]))
    rows = dict(rows_by_file(result)[str(path)])
    assert rows == {2: "left by policy", 3: "rewritten by apply"}


CORPUS_FILES = ["ultralytics+yolov5/train.py", "ultralytics+yolov5/utils/torch_utils.py",
                "ultralytics+yolov5/classify/train.py", "ultralytics+yolov5/utils/general.py",
                "karpathy+nanoGPT/train.py", "pytorch+examples/imagenet/main.py"]


@pytest.mark.parametrize("relative", CORPUS_FILES)
def test_real_files_agree(relative):
    path = os.path.join(CORPUS, relative)
    if not os.path.exists(path):
        pytest.skip(f"{path} absent (clone the corpus repo to run this)")
    assert_agreement([path])


def test_custom_code_section_lists_every_third_party_row(tmp_path):
    """The issue's report said "Custom operations ...: None found" beside three TensorRT rows."""
    path = tmp_path / "patterns.py"
    path.write_text(PATTERNS)
    result = analyze([str(path)], jobs=1, only=("architecture",))
    tables = {t.title: t for t in result.sections["architecture"]}
    third_party_rows = {row[0].rsplit(":", 2)[1] for row in tables["CUDA code locations"].rows
                        if row[1] == "third-party CUDA"}
    custom_rows = {row[2].rsplit(":", 1)[1] for row in tables["Custom operations and third-party CUDA code"].rows}
    assert third_party_rows == {"4"} and third_party_rows <= custom_rows


def test_analyze_states_what_apply_check_counts_on_the_same_files(tmp_path):
    """Issue 29: `apply` and `analyze` disagreed on a project's counts (49 vs 48 files, 17 vs 18
    warnings): analyze left out the notebooks and requirement files apply reads, ran the rules
    without the project facts apply computes (NPU311 reports a project's own CUDA extensions),
    and its "warning" findings are its ANA codes, not apply's diagnostics. It now states apply's
    own counts for the same files, which must be what `apply --check` prints."""
    import json
    import subprocess
    import sys

    project = tmp_path / "proj"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "train.py").write_text(
        "import os\nimport torch\nfrom pkg import fused_ext\nos.environ['CUDA_VISIBLE_DEVICES'] = '1,0'\n"
        "x = torch.ones(2).cuda()\nv = torch.version.cuda\n")
    (project / "setup.py").write_text(
        "from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n"
        "setup(ext_modules=[CUDAExtension('pkg.fused_ext', ['csrc/fused.cu'])])\n")
    (project / "csrc").mkdir()
    (project / "csrc" / "fused.cu").write_text("__global__ void k() {}\n")
    (project / "requirements.txt").write_text("torch==2.1.0+cu121\nxformers\n")
    cell = {"cell_type": "code", "source": ["import torch\n", "y = torch.ones(1).cuda()\n"], "metadata": {},
            "outputs": [], "execution_count": None}
    (project / "explore.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                                       "nbformat_minor": 5}))

    def run(*args):
        return subprocess.run([sys.executable, "-m", "npu_migrate", *args, "--isolated", "."], cwd=project,
                              capture_output=True, text=True, timeout=300, check=False)

    payload = json.loads(run("apply", "--check", "--no-cache", "--output-format", "json").stdout)
    applied, files = payload["summary"], payload["files"]
    analysed = run("analyze", "--format", "json")
    assert analysed.returncode == 0, analysed.stderr
    stated = json.loads(analysed.stdout)["summary"]["apply --check on these files"]
    counted = {"warning": 0, "info": 0, "error": 0}
    for entry in files:
        for d in entry["diagnostics"]:
            counted[d["severity"]] += 1
    assert stated == (f"{applied['files_scanned']} files, {applied['files_changed']} would change, "
                      f"{applied['files_failed']} failed; {counted['error']} errors, {counted['warning']} warnings, "
                      f"{counted['info']} info")
    assert applied["files_scanned"] == 6 and counted["warning"] >= 4  # the notebook, requirements, .cu and NPU311
