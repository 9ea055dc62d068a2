"""The catalogue of CUDA-only knowledge (`codemods/data/cuda_only.json`): one source that the
rules, the shared analyses, analyze and the docs read; adding a library is one entry and a case."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import rule_cases

from codemods.analyses.cudaonly import CudaOnlyNames
from codemods.data import catalogue
from npu_migrate.analyze import catalog

REPO = Path(__file__).resolve().parents[2]


def test_status_is_read_per_torch_npu_release() -> None:
    entry = {"kind": "library", "status": {"2.1": "no-route", "2.6": "npu-route", "2.12": "works"}}
    assert catalogue.status(entry) == "works"  # the newest release
    assert [catalogue.status(entry, v) for v in ("2.1", "2.5.1", "2.6.0", "2.9", "2.12.0")] == [
        "no-route", "no-route", "npu-route", "npu-route", "works"]
    assert catalogue.status(entry, "1.11") == "no-route"  # older than every row: the first status
    assert catalogue.is_cuda_only(entry, "2.9") and not catalogue.is_cuda_only(entry, "2.12")
    assert not catalogue.is_cuda_only({"kind": "option", "status": {"2.1": "no-route"}})  # not code


def test_flash_attention_2_has_its_route_per_transformers_release() -> None:
    """One entry says the route in Python, launch scripts and configs alike, and how it changes
    with transformers: sdpa everywhere, flash_attention_2 itself runs on NPU from 4.56."""
    entries = [catalogue.option_entry("attn_implementation", "flash_attention_2"),
               catalogue.option_entry("--attn_implementation", "flash_attention_2", "flag"),
               catalogue.option_entry("attn_implementation", "flash_attention_2", "config")]
    assert entries[0] is entries[1] is entries[2]
    entry = entries[0]
    assert (entry["action"], entry["replacement"], entry["fix"]) == ("rewrite", "sdpa", "unsafe")
    assert [catalogue.status(entry, v, by="framework_status") for v in ("4.40", "4.55.4", "4.56.0")] == [
        "npu-route", "npu-route", "works"]
    assert catalogue.status(entry, "2.1") == "npu-route"  # by torch_npu release
    older = catalogue.option_entry("use_flash_attention_2", "True")
    assert older["replacement_option"] == "attn_implementation" and older["replacement"] == "sdpa"
    assert catalogue.fix_note(entry) == " (unsafe fix)" and catalogue.fix_note(catalogue.option_entry("optim", "adamw_apex_fused")) == ""


def test_every_route_is_a_catalogue_rewrite_of_its_rule() -> None:
    """routes.json says how a name maps, the catalogue says that it is rewritten and by which
    rule: the two agree for every routed function and class."""
    from codemods.data.tables import load_data

    routes = load_data("routes.json")
    routed = [(f"{library['modules'][0]}.{name}", library["code"]) for library in routes["calls"].values()
              for name in library["functions"]]
    routed += [(f"{module}.{name}", table["code"]) for module, table in routes["constructors"].items()
               for name in table["classes"]]
    by_name = {e["cuda"]: e for e in catalogue.entries()}
    assert len(routed) == 11
    for name, code in routed:
        assert (by_name[name]["action"], by_name[name]["code"]) == ("rewrite", code), name


def test_cuda_only_libraries_come_from_the_catalogue() -> None:
    libraries = catalogue.cuda_only_libraries()
    assert {"apex", "triton", "tilelang", "cutlass", "cuda.bindings", "numba.cuda", "lightllm", "exllamav2"} <= libraries
    assert "vllm" not in libraries and "deepspeed.ops" not in libraries  # they run on NPU (works)
    assert not any(name.startswith("torch.") or ("." in name and name.split(".")[0] in libraries) for name in libraries)
    assert catalogue.cuda_only_library("tilelang.language") == "tilelang"
    assert catalogue.cuda_only_library("cuda.bindings.driver") == "cuda.bindings"
    assert catalogue.cuda_only_library("cuda") is None and catalogue.cuda_only_library("vllm.engine") is None


def test_no_other_table_lists_third_party_facts() -> None:
    assert not (REPO / "codemods" / "data" / "third_party.json").exists()
    assert not (REPO / "npu_migrate" / "analyze" / "data" / "third_party.json").exists()
    # analyze costs exactly the catalogue's entries that carry an effort category
    assert set(catalog.third_party()) == {e["cuda"] for e in catalogue.entries() if e.get("effort")}
    assert catalog.kernel_language("tilelang.jit")["cuda"] == "tilelang"
    assert catalog.kernel_language("triton.jit")["cuda"] == "triton"
    assert catalog.kernel_language("functools.cache") is None


def test_options_are_found_by_keyword_flag_and_config_key() -> None:
    assert catalogue.option_entry("optim", "paged_adamw_32bit")["severity"] == "error"
    assert catalogue.option_entry("--optim", "paged_adamw_8bit", "flag") is not None
    assert catalogue.option_entry("optim", "adamw_torch") is None
    assert catalogue.option_entry("quantize", "bnb.nf4-dq", "config")["library"] == "bitsandbytes"
    tf32 = catalogue.option_entry("--tf32", "True", "flag")
    assert tf32["replacement"] == "False" and tf32["code"] == "NPU524"
    message = catalogue.option_message(catalogue.option_entry("--optim", "paged_adamw_32bit", "flag"),
                                       "--optim", "paged_adamw_32bit")
    assert message.startswith("`--optim paged_adamw_32bit` makes the Trainer build a bitsandbytes optimizer that pages")


def test_a_guard_in_front_of_a_catalogue_library_stays_on_cuda() -> None:
    """NPU511 knows CUDA-only code by the catalogue: a kernel language new to the rules counts."""
    src = "import torch\nif torch.cuda.is_available():\n    import tilelang\n    kernel = tilelang.compile(f)\n"
    outcome = rule_cases.migrate(src, ["NPU120", "NPU511"])
    assert outcome.new_text is None  # the guard keeps its CUDA test
    assert any(d.code == "NPU511" and "`tilelang`" in d.message for d in outcome.diagnostics)


def test_plugin_globals_are_cuda_only_names() -> None:
    import ast

    tree = ast.parse("_plugin = None\ndef _init():\n    global _plugin\n    _plugin = build(sources=['k.cu'])\n"
                     "def run(x):\n    return _plugin.op(x)\n")
    names = CudaOnlyNames.of(tree, "ops.py", {})
    assert "`k.cu`" in names.names["_plugin"] and "_init" in names.functions and "run" in names.functions


def _run(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, *args], cwd=site, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


CHECK = """
from codemods.api.cases import cases_of
from codemods.api.registry import all_rules, find_rule, select_rules
from npu_migrate.apply.engine import RuleSet, migrate_text
for code in ("NPU316", "NPU511"):
    rule = find_rule(code)
    for case in cases_of(rule):
        rules = select_rules(all_rules(), select=[code, *case.with_rules])
        outcome = migrate_text(case.source, case.path, RuleSet(rules, dict(case.options)))
        assert outcome.new_text == getattr(case, "after", None), (case.source, outcome.new_text)
        if code == "NPU511" and "made_up_kernels" in case.source:
            assert [d.code for d in outcome.diagnostics if d.code == "NPU511"], outcome.diagnostics
print("cases pass")
"""


@pytest.mark.slow
def test_adding_a_kernel_language_is_one_entry_and_one_case(tmp_path: Path) -> None:
    site = tmp_path / "repo"
    for folder in ("codemods", "npu_migrate", "docs"):
        shutil.copytree(REPO / folder, site / folder, ignore=shutil.ignore_patterns("__pycache__"))
    table = site / "codemods" / "data" / "cuda_only.json"
    data = json.loads(table.read_text(encoding="utf-8"))
    data["entries"].append({"cuda": "made_up_kernels", "at": ["import"], "kind": "kernel-language",
                            "library": "Made-up Kernels", "npu": None, "action": "flag", "code": "NPU316",
                            "status": {"2.1": "no-route"}, "transfer_to_npu": "—",
                            "message": "Made-up Kernels compile for NVIDIA GPUs only"})
    table.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    for module, case in (("npu316_cuda_kernel_language.py", 'CASES.append(Invalid("import made_up_kernels\\n"))\n'),
                         ("npu511_cuda_only_branch.py",
                          'CASES.append(Invalid("import torch\\nif torch.cuda.is_available():\\n'
                          '    import made_up_kernels\\n", with_rules=("NPU120",)))\n')):
        with (site / "codemods" / "rules" / module).open("a", encoding="utf-8") as handle:
            handle.write(case)
    checked = _run(site, "-c", CHECK)
    assert checked.returncode == 0, checked.stderr
    assert _run(site, "-m", "codemods.data.tables", "--check").returncode == 0
    stale = _run(site, "-m", "npu_migrate.commands.docgen", "--check")
    assert sorted(Path(line.split(":")[0]).name for line in stale.stderr.splitlines()) == [
        "NPU316.md", "NPU511.md", "coverage.md"]
    assert _run(site, "-m", "npu_migrate.commands.docgen").returncode == 0
    assert "| `made_up_kernels` |" in (site / "docs" / "coverage.md").read_text(encoding="utf-8")
