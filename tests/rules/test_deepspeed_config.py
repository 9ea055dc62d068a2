"""NPU540: DeepSpeed JSON configs are discovered, checked and rewritten with every other byte kept."""

import json
import os

import pytest
import rule_cases

from codemods.model.jsonspans import JsonSpanError, json_spans, line_col


def migrate(text: str, path: str = "ds_config.json"):
    return rule_cases.migrate(text, ["NPU540"], path)


# -- the JSON reader ---------------------------------------------------------------------------

# The sources the rule leaves alone are CASES of NPU540 (in its rule module: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


@pytest.mark.parametrize("text", [
    '{"a": [1, 2.5e3, -0, true, false, null], "b": {"c": "x\\"y\\u00e9"}}',
    ' \n[ ]\n', '"only"', '{"nested": {"deep": [[{"k": {}}]]}}',
])
def test_reader_agrees_with_json(text):
    document, spans = json_spans(text)
    assert document == json.loads(text)
    for span in spans.values():  # each span is exactly the text of its value
        assert json.loads(text[span.start:span.end]) == span.value


@pytest.mark.parametrize("text", ['{"a": 1,}', '{"a" 1}', '[1 2]', '{"a": tru}', '{"a": "x', '{} {}', ''])
def test_reader_rejects_what_json_rejects(text):
    with pytest.raises(JsonSpanError):
        json_spans(text)


def test_line_col_counts_from_one():
    assert line_col("ab\ncd", 0) == (1, 1)
    assert line_col("ab\ncd", 4) == (2, 2)


# -- the rule ----------------------------------------------------------------------------------

CONFIG = """\
{
    "train_batch_size" : 32,
    "optimizer": {
        "type": "ZeroOneAdam",
        "params": { "lr": 1e-4,   "comm_backend_name":"nccl" }
    },
    "sparse_attention": {"mode": "fixed"},
    "amp": {"enabled": true, "opt_level": "O2"},
    "zero_optimization": {
        "stage": 3,
        "zero_quantized_gradients": true,
        "offload_optimizer": {"device": "nvme", "nvme_path": "/local_nvme"}
    },
    "communication_data_type": "bf16",
    "fp16": {"enabled": true}
}
"""


def test_rewrites_the_backend_and_keeps_every_other_byte():
    outcome = migrate(CONFIG)
    assert outcome.new_text == CONFIG.replace('"comm_backend_name":"nccl"', '"comm_backend_name":"hccl"')
    assert [(e.line, e.col) for e in outcome.edits] == [(5, 35)]


def test_reports_settings_without_an_npu_route_at_their_key():
    found = {(d.line, d.col, d.severity.value, d.message.split(" ")[0]) for d in migrate(CONFIG).diagnostics}
    assert found == {
        (7, 5, "warning", "DeepSpeed"),  # sparse_attention
        (8, 5, "warning", "`amp`"),
        (11, 9, "warning", "ZeRO++"),
        (12, 31, "info", "NVMe"),
    }


@pytest.mark.parametrize("text,wanted", [
    ('{"train_batch_size": 8, "optimizer": {"type": "OneBitAdam", "params": {"lr": 1}}}', "comm_backend_name"),
    ('{"train_batch_size": 8, "optimizer": {"type": "Lamb"}}', "AdamW"),
    ('{"train_batch_size": 8, "device": "cuda:1"}', '"npu:1"'),
    ('{"train_batch_size": 8, "amp": {"opt_level": "O1"}}', "bf16"),
    ('{"train_batch_size": 8,\n "zero_optimization": {"offload_param": {"device": "NVMe"}}}', "async_io"),
])
def test_single_findings(text, wanted):
    [diagnostic] = migrate(text).diagnostics
    assert wanted in diagnostic.message


def test_invalid_json_is_one_info_line_with_its_position():
    [diagnostic] = migrate('{\n  "train_batch_size": 8,\n}\n').diagnostics
    assert (diagnostic.line, diagnostic.severity.value) == (3, "info")
    assert "not valid JSON" in diagnostic.message


# -- discovery ---------------------------------------------------------------------------------

def write(root, name, text):
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


DS = '{"train_batch_size": 8, "optimizer": {"type": "OneBitAdam", "params": {"comm_backend_name": "nccl"}}}\n'


def test_apply_finds_deepspeed_configs_by_name_reference_and_configuration(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from npu_migrate.commands.apply import command

    for name in ("ds_config.json", "configs/ds_zero3_config.json", "my_deepspeed.json", "by_kwarg.json",
                 "cfg/by_initialize.json", "by_list.json", "by_argparse.json", "by_shell.json",
                 "listed/extra.json", "unreferenced.json", "data/labels.json"):
        write(tmp_path, name, DS)
    write(tmp_path, "train.py", "import deepspeed\nimport argparse\n"
                                "args = TrainingArguments(deepspeed='by_kwarg.json')\n"
                                "deepspeed.initialize(model=m, config='cfg/by_initialize.json')\n"
                                "cmd = ['deepspeed', 'train.py', '--deepspeed_config', 'by_list.json']\n"
                                "p = argparse.ArgumentParser()\n"
                                "p.add_argument('--deepspeed_config', default='by_argparse.json')\n"
                                "json.load(open('unreferenced.json'))\n")
    write(tmp_path, "launch.sh", "deepspeed train.py --deepspeed_config=by_shell.json\n")
    write(tmp_path, "npu-migrate.toml", 'deepspeed-configs = ["listed/*.json"]\n')
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(command, ["--check", "--format", "json", "--no-cache", "."],
                                catch_exceptions=False)
    changed = {os.path.relpath(e["path"], ".") for e in json.loads(result.stdout)["files"]
                if e["path"].endswith(".json") and e["edits"]}
    assert changed == {"by_argparse.json", "by_kwarg.json", "by_list.json", "by_shell.json",
                "cfg/by_initialize.json", "configs/ds_zero3_config.json", "ds_config.json",
                "listed/extra.json", "my_deepspeed.json"}
