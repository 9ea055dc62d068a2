"""The effort model is data (rating.json), stated in docs/analyze.md, and computed from the same
classification as the CUDA-locations table."""

import json
from pathlib import Path

from analyze_paths import REPO

from npu_migrate.analyze import analyze, catalog
from npu_migrate.analyze.rating import rate


def test_every_category_says_what_it_costs_and_why():
    spec = catalog.load("rating")
    assert spec["baseline_days"] > 0 and spec["baseline_why"]
    for key, category in spec["categories"].items():
        assert set(category) >= {"label", "weight", "cap", "days", "floor", "why"}, key
        assert category["why"].strip(), key
    docs = Path(REPO, "docs", "analyze.md").read_text(encoding="utf-8")
    for category in spec["categories"].values():  # the doc's table states the same figures
        assert f"| {category['label']} | {category['days']} |" in docs, category["label"]


def test_days_are_linear_and_score_is_capped():
    spec = catalog.load("rating")["categories"]
    rating = rate({"manual": 100, "reported": 3})
    days = {label: d for label, _, d in rating.effort}
    assert days[spec["manual"]["label"]] == 100 * spec["manual"]["days"]
    assert days[spec["reported"]["label"]] == round(3 * spec["reported"]["days"], 2)
    points = {label: p for label, _, p in rating.reasons}
    assert points[spec["manual"]["label"]] == spec["manual"]["cap"]
    assert days[catalog.load("rating")["baseline_label"]] == catalog.load("rating")["baseline_days"]
    assert rating.total_days == round(sum(days.values()), 2)


def test_floors_raise_the_rating():
    assert rate({}).level == "Low"
    assert rate({"triton_kernel": 1}).level == "High"
    assert rate({"cpu_fallback": 1}).level == "Medium"
    assert rate({"policy": 40}).level == "Low"  # left by policy costs nothing


def test_rewritten_lines_cost_no_days_and_manual_ones_do(tmp_path):
    (tmp_path / "auto.py").write_text("import torch\nx = torch.ones(1).cuda()\n")
    auto = analyze([str(tmp_path / "auto.py")], jobs=1).rating
    (tmp_path / "manual.py").write_text('import torch\nnames = {"cuda:0": 1}\n')
    manual = analyze([str(tmp_path / "manual.py")], jobs=1).rating
    baseline = catalog.load("rating")["baseline_days"]
    assert auto.total_days == baseline
    assert manual.total_days == baseline + catalog.load("rating")["categories"]["manual"]["days"]


def test_breakdown_by_part_adds_up(tmp_path):
    for part, source in (("a", "import torch\nnames = {'cuda:0': 1}\n"),
                         ("b", "import torch\nlabels = ['cuda:1', 1]\nimport tensorrt\n")):
        (tmp_path / part).mkdir()
        (tmp_path / part / "m.py").write_text(source)
    result = analyze([str(tmp_path)], jobs=1, only=("architecture",))
    table = next(t for t in result.sections["architecture"] if t.title.startswith("Effort by part"))
    parts = {row[0]: row for row in table.rows}
    assert set(parts) == {"a", "b"}
    baseline = catalog.load("rating")["baseline_days"]
    assert round(sum(row[3] - baseline for row in parts.values()), 2) == round(result.rating.total_days - baseline, 2)
    assert "TensorRT" in parts["b"][4] and "TensorRT" not in parts["a"][4]
    data = json.loads(json.dumps(result.rating.to_dict()))
    assert all(entry["why"] for entry in data["effort_days"])
