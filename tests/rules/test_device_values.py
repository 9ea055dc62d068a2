"""NPU500: device strings followed from where they are written to where they are a device;
the project index for module constants read by other modules."""

import ast
import os
from pathlib import Path

import rule_cases

from codemods.analyses.devicevalues import (
    INDEX_OPTION,
    PARAMETER_INDEX_OPTION,
    device_places,
    module_names,
    project_device_index,
    project_parameter_index,
)
from codemods.api.registry import all_rules, select_rules
from npu_migrate.apply.engine import RuleSet, migrate_text

CODES = ["NPU500"]
T = "import torch\n"


def after(src: str) -> str:
    return rule_cases.after(src, CODES)


def diagnostics(src: str) -> list:
    return rule_cases.migrate(src, CODES).diagnostics


# The before/after examples are the CASES of NPU500 (in the rule modules: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


def test_probable_values_are_reported_with_the_evidence_path():
    src = T + "def f(x, path):\n    d = 'cuda:0'\n    open(path + d)\n    return x.to(d)\n"
    assert after(src) == src
    [diagnostic] = diagnostics(src)
    assert diagnostic.code == "NPU500" and diagnostic.line == 3
    assert "`.to()` (line 5)" in diagnostic.message and "line 4" in diagnostic.message


def test_npu103_keeps_its_own_edits_with_every_default_rule():
    src = T + "def f(x, use):\n    return torch.load('p', map_location='cuda:0' if use else 'cpu')\n"
    outcome = migrate_text(src, "t.py", RuleSet(select_rules(all_rules())))
    assert "'npu:0'" in outcome.new_text
    assert {e.code for e in outcome.edits} >= {"NPU103"} and "NPU500" not in {e.code for e in outcome.edits}


# -- the project index ---------------------------------------------------------------------------

def write(root, relative, text):
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def test_module_names_are_every_importable_suffix(tmp_path):
    assert module_names(str(tmp_path / "src" / "pkg" / "env.py"), str(tmp_path)) == ["src.pkg.env", "pkg.env", "env"]
    assert module_names(str(tmp_path / "pkg" / "__init__.py"), str(tmp_path)) == ["pkg"]


def test_constant_used_as_a_device_by_another_module_is_rewritten(tmp_path):
    settings = write(tmp_path, "pkg/settings.py", "ACCEL = 'cuda'\n")
    user = write(tmp_path, "pkg/train.py",
                 "import torch\nfrom pkg.settings import ACCEL\ndef f(x):\n    return x.to(ACCEL)\n")
    other = write(tmp_path, "pkg/util.py", "from pkg import settings\nimport torch\n"
                                          "t = torch.zeros(1, device=settings.ACCEL)\n")
    index = project_device_index([settings, user, other], str(tmp_path), device_places())
    uses = index[os.path.abspath(settings)]["ACCEL"]
    assert len(uses["device"]) == 2 and uses["other"] == []
    ruleset = RuleSet(select_rules(all_rules(), select=CODES), {INDEX_OPTION: index})
    outcome = migrate_text(Path(settings).read_text(), settings, ruleset)
    assert outcome.new_text == "ACCEL = 'npu'\n"
    assert "pkg/train.py" in outcome.edits[0].message  # the evidence names the other module
    # without the index (another shard's view of one file), nothing is proven
    alone = migrate_text(Path(settings).read_text(), settings, RuleSet(select_rules(all_rules(), select=CODES)))
    assert alone.new_text is None


def test_keyword_argument_of_another_modules_function_follows_its_parameter(tmp_path):
    """ControlNet: `gradio_canny2image.py` calls `load_state_dict(path, location='cuda')`, which
    `cldm/model.py` turns into `torch.load(path, map_location=torch.device(location))`."""
    model = write(tmp_path, "cldm/model.py",
                  "import os\nimport torch\n\ndef load_state_dict(path, location='cpu'):\n"
                  "    return torch.load(path, map_location=torch.device(location))\n\n"
                  "def cache(x, where='cpu'):\n    os.makedirs(where, exist_ok=True)\n    return x.to(where)\n")
    app = write(tmp_path, "app.py", "import torch\nfrom cldm.model import load_state_dict, cache\n"
                                    "sd = load_state_dict('m.pth', location='cuda')\n"
                                    "y = cache(x, where='cuda')\nprint('cuda')\n")
    index = project_parameter_index([model, app], str(tmp_path), device_places())
    assert set(index) == {"cldm.model.load_state_dict", "cldm.model.cache"}
    assert index["cldm.model.load_state_dict"]["location"]["other"] == []
    ruleset = RuleSet(select_rules(all_rules(), select=CODES, ignore=["NPU100"]), {PARAMETER_INDEX_OPTION: index})
    outcome = migrate_text(Path(app).read_text(), app, ruleset)
    assert outcome.new_text == ("import torch\nfrom cldm.model import load_state_dict, cache\n"
                                "sd = load_state_dict('m.pth', location='npu')\n"
                                "y = cache(x, where='cuda')\nprint('cuda')\n")
    assert "cldm/model.py" in outcome.edits[0].message  # the evidence names the other module
    # `where` is also a folder: reported, not rewritten
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU500", 4)]


def test_constant_also_used_as_text_elsewhere_is_reported(tmp_path):
    settings = write(tmp_path, "settings.py", "ACCEL = 'cuda'\n")
    user = write(tmp_path, "train.py", "from settings import ACCEL\nimport torch\n"
                                      "def f(x):\n    open(ACCEL + '.log')\n    return x.to(ACCEL)\n")
    index = project_device_index([settings, user], str(tmp_path), device_places())
    ruleset = RuleSet(select_rules(all_rules(), select=CODES), {INDEX_OPTION: index})
    outcome = migrate_text(Path(settings).read_text(), settings, ruleset)
    assert outcome.new_text is None
    assert [d.code for d in outcome.diagnostics] == ["NPU500"]


def test_index_ignores_ambiguous_module_names_and_broken_files(tmp_path):
    a = write(tmp_path, "a/config.py", "ACCEL = 'cuda'\n")
    b = write(tmp_path, "b/config.py", "ACCEL = 'cuda:1'\n")
    broken = write(tmp_path, "c.py", "def (:\n  cuda\n")
    user = write(tmp_path, "d.py", "from config import ACCEL\nimport torch\nx = torch.zeros(1, device=ACCEL)\n")
    index = project_device_index([a, b, broken, user], str(tmp_path), device_places())
    assert index == {}  # `config` names two files: no guess


def test_flow_is_ast_only_and_handles_nested_scopes():
    from codemods.analyses.devicevalues import FileFlow
    from codemods.model.facts import FileFacts

    src = T + "def outer(x):\n    d = 'cuda'\n    def inner():\n        return x.to(d)\n    return inner\n"
    tree = ast.parse(src)
    [finding] = FileFlow(tree, FileFacts.from_tree(tree), device_places()).findings()
    assert finding.proven and finding.line == 3


def test_apply_command_uses_the_whole_project_under_shards(tmp_path, monkeypatch):
    """The index is computed before --shard narrows the files: whichever shard holds the
    settings module rewrites it, and the cache key changes when another module's use does."""
    import json

    from click.testing import CliRunner

    from npu_migrate.commands.apply import command

    write(tmp_path, "settings.py", "ACCEL = 'cuda'\n")
    for i in range(4):
        write(tmp_path, f"user{i}.py", "import torch\nfrom settings import ACCEL\n"
                                       f"def f{i}(x):\n    return x.to(ACCEL)\n")
    monkeypatch.chdir(tmp_path)
    rewritten = []
    for k in (1, 2):
        result = CliRunner().invoke(command, ["--check", "--format", "json", "--no-cache",
                                              "--shard", f"{k}/2", "."], catch_exceptions=False)
        for entry in json.loads(result.stdout)["files"]:
            if any(e["code"] == "NPU500" for e in entry["edits"]):
                rewritten.append(os.path.basename(entry["path"]))
    assert rewritten == ["settings.py"]
