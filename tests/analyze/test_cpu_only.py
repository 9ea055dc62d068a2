"""Negative case: a CPU-only project has no CUDA findings."""
from analyze_paths import CPU_ONLY, rel

from npu_migrate.analyze import analyze

TUNING = ("ANA034", "ANA049")  # tuning opportunities, tested in tests/tune
CUDA_CODES = {"ANA001", "ANA002", "ANA003", "ANA004", "ANA010", "ANA020", "ANA030"}


def test_no_cuda_findings():
    result = analyze([CPU_ONLY], jobs=1)
    assert not [d for d in result.findings if d.code in CUDA_CODES]
    locations = next(t for t in result.sections["architecture"] if t.title == "CUDA code locations")
    assert locations.rows == []
    assert result.rating.level == "Low"
    assert result.summary["CUDA locations"].startswith("0 (0 rewritten by apply, 0 reported by a rule")
    # the memory analysis still runs: the periodic `.item()` is information, not a warning
    # tuning opportunities (ANA034/ANA049, the tune family) are tested in tests/tune
    own = {(d.code, rel(d.path), d.line, d.severity.value) for d in result.findings if d.code not in TUNING}
    assert own == {("ANA031", "fixtures/cpu_only/train_cpu.py", 10, "info"),  # Linear + Tanh
                   ("ANA040", "fixtures/cpu_only/train_cpu.py", 19, "info"),
                   ("ANA041", "fixtures/cpu_only/train_cpu.py", 30, "info"),
                   ("ANA032", "fixtures/cpu_only/train_cpu.py", 24, "info")}
    assert not result.errors
