"""Exact expectations on fixtures/analyze_demo (content written for these tests)."""
import re
from collections import Counter

from analyze_paths import rel

D = "fixtures/analyze_demo/"
MODEL, TRAIN, FUSED = D + "demo/model.py", D + "demo/train.py", D + "demo/kernels/fused.py"

# analyze's own findings (everything but ANA001/ANA002, whose text comes from the rules)
EXPECTED = {
    ("ANA031", MODEL, 14), ("ANA031", MODEL, 30), ("ANA031", MODEL, 32), ("ANA031", MODEL, 33),
    ("ANA031", MODEL, 39), ("ANA045", MODEL, 49), ("ANA030", MODEL, 61),
    ("ANA010", TRAIN, 19), ("ANA010", TRAIN, 23), ("ANA040", TRAIN, 25), ("ANA032", TRAIN, 30),
    ("ANA042", TRAIN, 31), ("ANA046", TRAIN, 36), ("ANA044", TRAIN, 37), ("ANA044", TRAIN, 38),
    ("ANA041", TRAIN, 39), ("ANA047", TRAIN, 40),
    ("ANA020", D + "csrc/scale.cu", 0), ("ANA020", FUSED, 2), ("ANA020", FUSED, 3), ("ANA020", FUSED, 4),
    ("ANA020", FUSED, 8), ("ANA020", D + "setup.py", 6),
}


def own(findings):
    return {(d.code, rel(d.path), d.line) for d in findings if d.code not in ("ANA001", "ANA002", "ANA003", "ANA004")}


def test_exact_findings(demo):
    # tuning opportunities (ANA034/ANA049) are tested in tests/tune
    found = [d for d in demo.findings if d.code not in ("ANA001", "ANA002", "ANA003", "ANA004", "ANA034", "ANA049")]
    assert own(found) == EXPECTED
    assert len(found) == len(EXPECTED)  # one finding per location, no duplicates


def test_fusion_patterns_named(demo):
    patterns = {d.line: d.message.split(")")[0].removeprefix("fusion (") for d in demo.findings if d.code == "ANA031"}
    assert patterns == {14: "rms_norm", 30: "attention", 32: "add+layer_norm", 33: "linear+activation",
                        39: "conv+batchnorm+activation"}


def test_cuda_locations_in_train(demo):
    table = next(t for t in demo.sections["architecture"] if t.title == "CUDA code locations")
    rows = {(row[0].split(":", 1)[0], int(row[0].split(":")[1]), row[1]) for row in table.rows}
    train = {(line, kind) for path, line, kind in rows if path.endswith("demo/train.py")}
    assert train == {(16, "device placement"), (18, "environment"), (19, "distributed"), (21, "torch.cuda API"),
                     (22, "device placement"), (31, "device placement"), (40, "torch.cuda API"),
                     (43, "device placement")}
    cuda_calls = [row for row in table.rows if row[0].endswith("train.py:22:13")]
    assert cuda_calls and cuda_calls[0][2] == "rewritten by apply" and cuda_calls[0][3] == "NPU101"
    assert cuda_calls[0][4].startswith("rewritten by apply: NPU101")


def test_model_structure(demo):
    table = next(t for t in demo.sections["architecture"] if t.title.startswith("Model structure"))
    by_class = {row[0]: row for row in table.rows}
    assert set(by_class) == {"RMSNorm", "Block", "ConvStem", "TinyGPT"}
    assert by_class["Block"][2] == "GELU ×1, Linear ×4, LayerNorm ×1"
    assert by_class["ConvStem"][2] == "ReLU ×1, Conv2d ×1, BatchNorm2d ×1"
    assert by_class["TinyGPT"][3] == "Block ×1, RMSNorm ×1 (repeated blocks at line 49)"
    layers = next(t for t in demo.sections["architecture"] if t.title == "Layer types")
    assert ["Linear", "Linear", 5] in layers.rows


def test_heavy_operators_and_support(demo):
    heavy = next(t for t in demo.sections["computation"] if t.title == "Heavy operators")
    rows = {row[0]: row for row in heavy.rows}
    assert rows["nn.Linear"][2] == 5 and rows["nn.Linear"][4] == "native"
    assert rows["@"][2] == 3
    assert rows["torch.linalg.eigh"][4] == "cpu-fallback risk: no NPU kernel for _linalg_eigh"
    assert sum(row[2] for row in heavy.rows) == 16
    comm = next(t for t in demo.sections["computation"] if t.title == "Distributed communication calls")
    assert comm.rows == [["all_reduce", 1, f"{TRAIN.replace('fixtures/', '')}:41", "HCCL collective"]] or (
        comm.rows[0][:2] == ["all_reduce", 1] and comm.rows[0][2].endswith("demo/train.py:41"))


def test_dataloader_settings(demo):
    loaders = next(t for t in demo.sections["memory"] if t.title == "DataLoaders")
    assert len(loaders.rows) == 1
    row = loaders.rows[0]
    assert row[0].endswith("demo/train.py:25:14")
    assert row[1:3] == ["DataLoader", "train"]  # `for (batch,) in loader:` calls .backward()
    assert row[3:9] == ["8", "(0)", "(False)", "(2)", "(False)", "(False)"]
    assert "num_workers=0" in row[-1] and "pin_memory=True" in row[-1] and "drop_last=True" in row[-1]


def test_rating_is_high_for_custom_kernels(demo):
    assert demo.rating.level == "High"
    drivers = {label: count for label, count, _ in demo.rating.reasons}
    assert drivers[".cu / .cuh source files"] == 1
    assert drivers["Triton kernels"] == 1
    assert drivers["CUDA extensions and CUDA-only libraries"] == 1
    assert drivers["operators at risk of CPU fallback"] == 1


def test_each_code_has_a_doc_page():
    """Every code analyze can print has its entry and page in npu_migrate/analyze/data/codes.toml."""
    from pathlib import Path

    from analyze_paths import REPO

    from npu_migrate.analyze.data_tables import TABLES
    from npu_migrate.core.codes import entries, pages

    printed = set()
    for path in Path(REPO, "npu_migrate", "analyze").glob("*.py"):
        printed |= set(re.findall(r"[\"'](ANA\d{3})[\"']", path.read_text(encoding="utf-8")))
    assert printed and printed <= set(entries(TABLES)), printed - set(entries(TABLES))
    for code, text in pages(TABLES).items():
        assert text.startswith(f"# {code} {entries(TABLES)[code]['title']}\n")
        for heading in ("## What it means", "## Why", "## Evidence", "## What to do"):
            assert heading in text, (code, heading)
        rendered = Path(REPO, "docs", "rules", f"{code}.md")
        assert rendered.read_text(encoding="utf-8") == text, f"{rendered} is stale: run the doc generator"


def test_severity_counts(demo):
    counts = Counter(d.code for d in demo.findings)
    assert counts["ANA031"] == 5 and counts["ANA044"] == 2


def test_every_finding_names_what_it_saw(demo):
    """Every code the demo produces (fusion, CPU fallback, distributed, custom code, loops,
    loaders, CUDA rows) carries evidence and a confidence."""
    assert {d.code for d in demo.findings} >= {"ANA001", "ANA010", "ANA020", "ANA030", "ANA031", "ANA040",
                                               "ANA041", "ANA044", "ANA045", "ANA046", "ANA047"}
    for claim in demo.findings:
        assert claim.evidence and claim.confidence in ("high", "medium", "low"), claim
