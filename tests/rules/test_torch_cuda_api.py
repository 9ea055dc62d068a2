"""NPU120 torch.cuda.X -> torch.npu.X and NPU121 names without an NPU counterpart."""

import re
from pathlib import Path

import pytest
import rule_cases

from codemods.data.tables import load_data
from codemods.families.torch_cuda_api import DATA, cuda_names

CODES = ["NPU120", "NPU121"]
T = "import torch\n"
REPO = Path(__file__).resolve().parents[2]
# sections 2.1 and 2.6 of the fact sheet, shipped with the tests (the fact sheet itself is in the
# workplace's ../shared, which a clone does not have)
EXCERPT = REPO / "fixtures" / "reference" / "torch_npu_namespace.md"
FACT_SHEET = REPO.parent / "shared" / "reference" / "torch_npu_api.md"


_RULES = rule_cases.for_codes(CODES)
migrate, after = _RULES.migrate, _RULES.after


REWRITES = [
    (T + "torch.cuda.synchronize()\n", T + "torch.npu.synchronize()\n"),
    (T + "n = torch.cuda.device_count()  # gpus\n", T + "n = torch.npu.device_count()  # gpus\n"),
    (T + "if torch.cuda.is_available():\n    pass\n", T + "if torch.npu.is_available():\n    pass\n"),
    ("import torch as th\nth.cuda.manual_seed_all(0)\n", "import torch as th\nth.npu.manual_seed_all(0)\n"),
    (T + "s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    pass\n",
     T + "s = torch.npu.Stream()\nwith torch.npu.stream(s):\n    pass\n"),
    (T + "e = torch.cuda.Event(enable_timing=True)\n", T + "e = torch.npu.Event(enable_timing=True)\n"),
    (T + "with torch.cuda.device(1):\n    pass\n", T + "with torch.npu.device(1):\n    pass\n"),
    (T + "torch.cuda.random.manual_seed(1)\n", T + "torch.npu.random.manual_seed(1)\n"),
    (T + "g = torch.cuda.default_generators[0]\n", T + "g = torch.npu.default_generators[0]\n"),
    (T + "f = torch.cuda.empty_cache\n", T + "f = torch.npu.empty_cache\n"),
    (T + "x = torch.cuda.FloatStorage\n", T + "x = torch.npu.FloatStorage\n"),
    # imports
    ("from torch.cuda import synchronize\nsynchronize()\n", "from torch.npu import synchronize\nsynchronize()\n"),
    ("from torch.cuda import synchronize as sync, Stream\n",
     "from torch.npu import synchronize as sync, Stream\n"),
    ("from torch.cuda import (\n    Stream,  # streams\n    Event,\n)\n",
     "from torch.npu import (\n    Stream,  # streams\n    Event,\n)\n"),
    ("from torch.cuda import synchronize, get_arch_list  # mixed\n",
     "from torch.cuda import get_arch_list; from torch.npu import synchronize  # mixed\n"),
    ("from torch.cuda import nvtx, empty_cache\n",
     "from torch.cuda import nvtx; from torch.npu import empty_cache\n"),
    ("import torch.cuda as tc\ntc.synchronize()\nn = tc.device_count()\n",
     "import torch.npu as tc\ntc.synchronize()\nn = tc.device_count()\n"),
    ("from torch import cuda\ncuda.synchronize()\n", "from torch import npu as cuda\ncuda.synchronize()\n"),
    ("from torch import nn, cuda as tc\ntc.empty_cache()\n", "from torch import nn, npu as tc\ntc.empty_cache()\n"),
    ("def f():\n    from torch.cuda import current_device\n    return current_device()\n",
     "def f():\n    from torch.npu import current_device\n    return current_device()\n"),
]

UNCHANGED = [
    "import torch\nx = t.cuda()\n",
    "import torch\ntorch.cuda.nvtx.range_push('a')\n",  # owned by other rules
    "import torch\nwith torch.cuda.amp.autocast():\n    pass\n",  # NPU130's
    "import torch\nm = torch.cuda.memory._snapshot()\n",  # torch.cuda.memory.*: other rules
    "import torch\nt = torch.cuda.FloatTensor(2)\n",  # typed tensors: other rules
    "import torch\nx = torch.cuda.make_graphed_callables(f, (a,))\n",
    "import torch\nx = torch.cuda.not_a_real_name()\n",
    "import torch.cuda\n",  # binds torch; harmless
    "import numba.cuda\nnumba.cuda.synchronize()\n",
    "from numba import cuda\ncuda.synchronize()\n",
    "cuda = load()\ncuda.synchronize()\n",
    "# torch.cuda.synchronize()\nx = 'torch.cuda.synchronize'\n",
    "def f(torch):\n    return 1\n",
    "from torch.cuda import nvtx\n",
    "from torch.cuda.random import manual_seed\n",  # would import torch_npu.npu.random a second time
]


test_rewrites, test_idempotent, test_unchanged = rule_cases.table_tests(_RULES, REWRITES, UNCHANGED)


def test_mixed_import_never_imports_a_missing_name_and_flags_the_rest():
    outcome = migrate("from torch.cuda import synchronize, get_arch_list, is_tf32_supported\n")
    assert outcome.new_text == ("from torch.cuda import get_arch_list, is_tf32_supported; "
                                "from torch.npu import synchronize\n")
    codes = [(d.code, d.line) for d in outcome.diagnostics]
    assert codes == [("NPU121", 1), ("NPU121", 1)]
    assert "HF32" in outcome.diagnostics[1].message


def test_no_counterpart_is_flagged_at_the_use():
    outcome = migrate(T + "archs = torch.cuda.get_arch_list()\nt = torch.cuda.temperature()\n")
    assert outcome.new_text is None
    assert [(d.code, d.line, d.col) for d in outcome.diagnostics] == [("NPU121", 2, 9), ("NPU121", 3, 5)]
    assert "npu-smi" in outcome.diagnostics[1].message
    assert outcome.diagnostics[0].format().endswith("(npu-migrate rules NPU121)")


def test_module_alias_used_for_a_missing_name_stays_and_is_reported():
    src = "import torch.cuda as tc\ntc.synchronize()\nprint(tc.get_arch_list())\n"
    outcome = migrate(src)
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU120", 1)]
    assert "get_arch_list" in outcome.diagnostics[0].message


def test_module_alias_passed_around_is_not_repointed():
    outcome = migrate("from torch import cuda\ncuda.synchronize()\nregister(cuda)\n")
    assert outcome.new_text is None
    assert "the module itself" in outcome.diagnostics[0].message


def test_torch_npu_import_is_added_before_a_from_import():
    text = after("from torch.cuda import synchronize\nsynchronize()\n", ["NPU100", "NPU120"])
    assert text == ("import torch_npu  # noqa: F401\nfrom torch.npu import synchronize\nsynchronize()\n")


def test_edits_name_both_apis():
    outcome = migrate(T + "torch.cuda.empty_cache()\n")
    assert [(e.code, e.line, e.col, e.message) for e in outcome.edits] == [
        ("NPU120", 2, 1, "`torch.cuda.empty_cache` → `torch.npu.empty_cache`")]


# -- the name table ------------------------------------------------------------------------------

def _table():
    return load_data(DATA)


def test_table_holds_the_142_names_of_torch_npu_npu_all():
    names = [n for group in _table()["torch_npu_npu_all"].values() for n in group]
    assert len(names) == len(set(names)) == 142


def test_every_npu_name_is_rewritten_or_owned_elsewhere():
    data = _table()
    names = {n for group in data["torch_npu_npu_all"].values() for n in group}
    rewritten = {e["npu"].removeprefix("torch.npu.") for e in data["entries"] if e["action"] == "rewrite"}
    excluded = set(data["excluded_from_rewrite"])
    assert names - excluded <= rewritten
    assert not excluded & set(cuda_names().rewrites)
    extra = rewritten - names  # submodules and module attributes outside __all__, each with a note
    assert extra == {"default_generators", "random", "streams"}


def test_entries_follow_the_coverage_schema():
    for entry in _table()["entries"]:
        assert {"cuda", "npu", "action", "code", "transfer_to_npu"} <= entry.keys()
        assert entry["action"] in ("rewrite", "flag", "none")
        assert entry["code"] in ("NPU120", "NPU121")
        assert (entry["npu"] is None) == (entry["action"] == "flag")
        if entry["action"] == "flag":
            assert entry["note"].startswith("no NPU")


def test_names_match_the_fact_sheet():
    text = EXCERPT.read_text(encoding="utf-8")
    if FACT_SHEET.exists():  # the excerpt is still what the fact sheet says
        sheet = FACT_SHEET.read_text(encoding="utf-8")
        for start, end in (("### 2.1", "### 2.2"), ("### 2.6", "## 3.")):
            assert sheet[sheet.index(start):sheet.index(end)] in text
    section = text[text.index("### 2.1"):text.index("### 2.2")]
    words = set(re.findall(r"\w+", section))
    for prefix, first, rest in re.findall(r"(\w+_)([A-Za-z]+)((?:/[A-Za-z]+)+)", section):
        words.update(prefix + part for part in [first, *rest.strip("/").split("/")])  # x_begin/end
    for name in (n for group in _table()["torch_npu_npu_all"].values() for n in group):
        if not name.endswith(("Storage", "Tensor")):  # listed there as "Bool/Byte/... Storage and Tensor"
            assert name in words, name
    no_counterpart = text[text.index("### 2.6"):text.index("## 3.")]
    for name, note in cuda_names().flags.items():
        if "torch 2.13 name" not in note:
            assert name in no_counterpart, name


def test_flagged_and_rewritten_names_exist_upstream_or_are_npu_only():
    torch = pytest.importorskip("torch")
    upstream = set(torch.cuda.__all__)
    for name in cuda_names().flags:
        assert name in upstream or name == "profiler", name
    for entry in _table()["entries"]:
        name = entry["cuda"].removeprefix("torch.cuda.")
        if entry["action"] == "rewrite" and name not in upstream:
            assert "NPU-only" in entry.get("note", ""), name


def test_split_import_keeps_comments_and_parentheses():
    src = "from torch.cuda import (\n    synchronize,  # sync\n    get_arch_list,\n    Stream\n)\n"
    out = after(src)
    namespace = {}
    compile(out, "t.py", "exec")  # valid Python
    assert out == ("from torch.cuda import get_arch_list; "
                   "from torch.npu import (\n    synchronize,  # sync\n    Stream\n)\n")
    assert after(out) == out
    assert namespace == {}


def test_split_import_whose_remaining_names_carry_comments_is_reported():
    src = "from torch.cuda import (\n    synchronize,\n    get_arch_list,  # arch\n)\n"
    outcome = migrate(src)
    assert outcome.new_text is None
    assert ("NPU120", 1) in [(d.code, d.line) for d in outcome.diagnostics]
