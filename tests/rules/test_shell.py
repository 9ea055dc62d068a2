"""NPU251-NPU257: launch scripts, through the engine exactly as `npu-migrate apply` runs them."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import rule_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.model.shellwords import lex

SHELL_CODES = ["NPU251", "NPU252", "NPU253", "NPU254", "NPU255", "NPU256", "NPU257"]


def run(text: str, select=SHELL_CODES, path: str = "run.sh"):
    return rule_cases.migrate(text, select, path)


def migrated(text: str, select=SHELL_CODES) -> str:
    return rule_cases.after(text, select, "run.sh")


def codes(outcome) -> list[tuple[str, int, str]]:
    return [(d.code, d.line, d.severity.value) for d in outcome.diagnostics]


# The before/after examples are the CASES of NPU251-NPU257 (in the rule modules: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


def test_edits_have_codes_lines_and_columns() -> None:
    text = "#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=0\nexport NCCL_BUFFSIZE=2097152\ntorchrun t.py --backend nccl\n"
    outcome = run(text)
    assert [(e.code, e.line, e.col) for e in outcome.edits] == [("NPU251", 2, 8), ("NPU253", 3, 8), ("NPU256", 4, 25)]


def test_descending_ids_are_an_error() -> None:
    outcome = run("export CUDA_VISIBLE_DEVICES=3,2,1,0\n")
    assert outcome.new_text == "export ASCEND_RT_VISIBLE_DEVICES=3,2,1,0\n"
    assert codes(outcome) == [("NPU251", 1, "error")]
    assert codes(run(outcome.new_text)) == [("NPU251", 1, "error")]  # still reported after migration


def test_computed_buffsize_is_flagged_and_kept() -> None:
    outcome = run('export NCCL_BUFFSIZE=$((8*1024*1024))\necho "$NCCL_BUFFSIZE"\n')
    assert outcome.new_text is None
    assert codes(outcome) == [("NPU253", 1, "warning"), ("NPU253", 2, "warning")]


def test_alloc_conf_problems_are_errors() -> None:
    outcome = run("export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync\n"
                  "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,garbage_collection_threshold:0.6\n")
    assert codes(outcome) == [("NPU254", 1, "error"), ("NPU254", 2, "error")]


def test_flags_for_variables_and_nvidia_smi() -> None:
    outcome = run("export NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=eth0\nNGPU=$(nvidia-smi -L | wc -l)\n")
    assert outcome.new_text is None
    assert codes(outcome) == [("NPU255", 1, "info"), ("NPU255", 1, "info"), ("NPU257", 2, "warning")]


def test_suppression_for_edits_and_diagnostics() -> None:
    text = ("export CUDA_VISIBLE_DEVICES=1,0  # npu-migrate: ignore[NPU251]\n"
            "torchrun t.py --backend nccl  # npu-migrate: ignore[NPU256]\n"
            "export CUDA_LAUNCH_BLOCKING=1  # npu-migrate: ignore\n"
            "export NCCL_DEBUG=INFO  # npu-migrate: ignore[NPU2]\n"
            "export CUDA_VISIBLE_DEVICES=0\n")
    outcome = run(text)
    assert outcome.diagnostics == []
    assert outcome.new_text == text.replace("CUDA_VISIBLE_DEVICES=0\n", "ASCEND_RT_VISIBLE_DEVICES=0\n")


def test_skip_file_and_python_rules_do_not_touch_shell() -> None:
    assert run("# npu-migrate: skip-file\nexport CUDA_VISIBLE_DEVICES=0\n").new_text is None
    assert run("export CUDA_VISIBLE_DEVICES=0\n", select=["NPU201"]).new_text is None


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_migrated_script_still_parses_and_sets_the_npu_names(tmp_path) -> None:
    text = ("#!/bin/bash\nset -e\nexport CUDA_VISIBLE_DEVICES=\"0,1\" NCCL_BUFFSIZE=4194304\n"
            "cat <<'EOF' >/dev/null\nit's a heredoc\nEOF\n"
            "CUDA_LAUNCH_BLOCKING=1 bash -c 'echo \"$ASCEND_LAUNCH_BLOCKING\"'\n"
            "echo \"$CUDA_VISIBLE_DEVICES|$HCCL_BUFFSIZE\"\n")
    script = tmp_path / "run.sh"
    script.write_text(migrated(text))
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["1", "0,1|4"]


_WORD = st.text(alphabet="abcXYZ019_=-$'\" #\\\n;|&(){}", max_size=40)


@settings(max_examples=150, deadline=None)
@given(_WORD)
def test_lexer_never_crashes_and_keeps_offsets_in_range(text: str) -> None:
    for words in lex(text):
        for word in words:
            assert 0 <= word.start <= word.end <= len(text)
            for seg in word.segments:
                assert word.start <= seg.start <= seg.end <= len(text)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["export ", "", "env ", "docker run -e "]),
       st.sampled_from(["CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "NCCL_BUFFSIZE", "PYTORCH_CUDA_ALLOC_CONF"]),
       st.sampled_from(["0", "'1,2'", '"4194304"', "$X", "max_split_size_mb:64"]),
       st.sampled_from([" python t.py\n", "\n", "  # comment CUDA_VISIBLE_DEVICES=1\n"]))
def test_shell_rewrite_is_idempotent(prefix: str, name: str, value: str, suffix: str) -> None:
    text = f"{prefix}{name}={value}{suffix}"
    once = migrated(text)
    assert migrated(once) == once
    assert once.endswith(suffix if "#" in suffix else suffix.replace("CUDA_VISIBLE", "ASCEND_RT_VISIBLE"))


_TOKENS = st.sampled_from([
    "export ", "CUDA_VISIBLE_DEVICES", "NCCL_BUFFSIZE", "PYTORCH_CUDA_ALLOC_CONF", "CUDA_LAUNCH_BLOCKING",
    "NCCL_DEBUG", "=", "0,1", "3,1", "4194304", "expandable_segments:True", "$", "${", "}", "$(", ")",
    "'", '"', "#", " ", "\n", "\\\n", ";", "|", "echo ", "torchrun ", "--backend ", "nccl", "<<EOF\n",
    "EOF\n", "`", "nvidia-smi",
])


@settings(max_examples=200, deadline=None)
@given(st.lists(_TOKENS, max_size=30).map("".join))
def test_random_scripts_keep_their_lines_and_settle_in_one_pass(text: str) -> None:
    outcome = run(text)
    once = outcome.new_text if outcome.new_text is not None else text
    assert once.count("\n") == text.count("\n")
    assert migrated(once) == once
    if not any(mark in text for mark in ("'", '"', "`", "$(", "${", "<<")):  # no multi-line strings
        for before, after in zip(text.split("\n"), once.split("\n")):
            if before.lstrip().startswith("#"):
                assert before == after  # comment lines are never touched


def test_crlf_lines_keep_their_endings() -> None:
    """(Not a case: a page cannot show a carriage return.)"""
    before = "export CUDA_VISIBLE_DEVICES=0\r\npython t.py\r\n"
    assert migrated(before) == "export ASCEND_RT_VISIBLE_DEVICES=0\r\npython t.py\r\n"
    assert migrated(migrated(before)) == migrated(before)
