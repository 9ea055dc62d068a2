"""codemods/data/tables.py: every table has a schema and matches it, a broken table is one
clear error naming the file and field, and contradicting entries fail the check."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from codemods.data import tables as data
from npu_migrate.core import tables


def test_every_table_has_a_schema_and_matches_it_and_nothing_contradicts() -> None:
    assert data.problems() == []
    assert {p.name for p in data.DATA.glob("*.json")} == set(data.SCHEMAS)


@pytest.mark.parametrize(("value", "spec", "expected"), [
    ("x", str, []),
    (True, int, ["n: expected an integer, got true"]),
    (None, (str, None), []),
    (3, (str, None), ["n: expected a string or null, got 3"]),
    ("maybe", tables.OneOf("rewrite", "flag"), ['n: "maybe" is not one of "rewrite", "flag"']),
    ([1, "a"], tables.ListOf(int), ['n[1]: expected an integer, got "a"']),
    ({"a": 1}, tables.MapOf(str), ["n.a: expected a string, got 1"]),
    ({"b": 1}, tables.Record(required={"a": int}),
     ["n: missing key 'a'", "n: unknown key 'b' (known: a)"]),
])
def test_checker(value, spec, expected) -> None:
    assert tables.check(value, spec, "n") == expected


def _copy(tmp_path):
    folder = tmp_path / "data"
    shutil.copytree(data.DATA, folder)
    return folder


def _edit(path, change) -> None:
    table = json.loads(path.read_text(encoding="utf-8"))
    change(table)
    path.write_text(json.dumps(table), encoding="utf-8")


def test_a_field_off_its_schema_names_file_and_field(tmp_path) -> None:
    folder = _copy(tmp_path)
    _edit(folder / "torch_cuda.json", lambda t: t["entries"][3].update(action="rename"))
    with pytest.raises(tables.DataError) as error:
        data.read_table(folder / "torch_cuda.json")
    message = str(error.value)
    assert message.startswith(str(folder / "torch_cuda.json")) and "entries[3].action" in message
    assert "\n" not in message


def test_not_json_names_the_line(tmp_path) -> None:
    path = tmp_path / "amp.json"
    path.write_text('{\n  "entries": [,]\n}\n', encoding="utf-8")
    with pytest.raises(tables.DataError, match=r"amp.json:2: not valid JSON"):
        data.read_table(path)


def test_a_rename_and_a_no_effect_entry_for_one_name_contradict(tmp_path) -> None:
    folder = _copy(tmp_path)
    renamed = next(e for e in data.load_data("torch_cuda.json")["entries"] if e["action"] == "rewrite")
    flag = {"cuda": renamed["cuda"], "npu": None, "action": "flag", "code": "NPU164",
            "transfer_to_npu": "—", "message": "no effect on NPU"}
    _edit(folder / "coverage_backends.json", lambda t: t["entries"].append(flag))
    found = data.problems(folder)
    assert found == [f"`{renamed['cuda']}`: coverage_backends.json (NPU164) says 'flag', "
                     f"torch_cuda.json ({renamed['code']}) says 'rewrite'"]


def test_two_renames_to_different_names_contradict_and_agreeing_ones_do_not(tmp_path) -> None:
    folder = _copy(tmp_path)
    entry = {"cuda": "torch.cuda.made_up", "npu": "torch.npu.made_up", "action": "rewrite",
             "code": "NPU120", "transfer_to_npu": "alias"}
    _edit(folder / "torch_cuda.json", lambda t: t["entries"].extend([entry, dict(entry)]))
    assert data.problems(folder) == []
    _edit(folder / "torch_cuda.json", lambda t: t["entries"].append(entry | {"npu": "torch.npu.other"}))
    assert data.problems(folder) == ["`torch.cuda.made_up`: torch_cuda.json (NPU120) rewrites it to "
                                     "'torch.npu.made_up', torch_cuda.json (NPU120) to 'torch.npu.other'"]


def test_check_command(tmp_path) -> None:
    ok = subprocess.run([sys.executable, "-m", "codemods.data.tables", "--check"],
                        capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    folder = _copy(tmp_path)
    _edit(folder / "env_vars.json", lambda t: t.pop("npu_checks"))
    bad = subprocess.run([sys.executable, "-m", "codemods.data.tables", "--check", "--directory", str(folder)],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 1
    assert bad.stderr == f"data: {folder / 'env_vars.json'}: (top): missing key 'npu_checks'\n"


def test_a_new_device_positions_file_uses_the_positions_schema(tmp_path) -> None:
    folder = _copy(tmp_path)
    (folder / "device_positions_mine.json").write_text(json.dumps({"keywords": ["placement"]}), encoding="utf-8")
    assert data.problems(folder) == []
    (folder / "device_positions_mine.json").write_text(json.dumps({"keyword": ["placement"]}), encoding="utf-8")
    assert data.problems(folder) == [f"{folder / 'device_positions_mine.json'}: (top): unknown key 'keyword' "
                                     "(known: about, description, entries, functions, keywords, methods, names, "
                                     "schema, skip_functions, title)"]


def test_a_broken_table_is_one_line_and_exit_2_for_the_commands(tmp_path) -> None:
    import os
    import sysconfig

    site = tmp_path / "site"
    for folder in ("codemods", "npu_migrate"):
        shutil.copytree(data.DATA.parents[1] / folder, site / folder, ignore=shutil.ignore_patterns("__pycache__"))
    _edit(site / "codemods" / "data" / "coverage_backends.json", lambda t: t["entries"][0].update(action="rename"))
    (tmp_path / "t.py").write_text("import torch\nx = torch.ones(1).cuda()\n", encoding="utf-8")
    env = {"PYTHONPATH": os.pathsep.join([str(site), sysconfig.get_paths()["purelib"]]),
           "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for args in (["rules"], ["apply", "--check", "t.py"]):
        result = subprocess.run([sys.executable, "-S", "-m", "npu_migrate", *args], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr == ('npu-migrate: error: codemods/data/coverage_backends.json: entries[0].action: '
                                 '"rename" is not one of "rewrite", "flag", "none"\n'), args
