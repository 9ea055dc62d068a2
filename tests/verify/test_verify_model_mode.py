"""Model mode: shared state is an explicit option, renamed parameters map, protocol errors and
timeouts are reported as what they are (one line, exit 2, on the right tree)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from npu_migrate.verify import VerifyOptions, verify_many

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "verify"
ORIGINAL, MIGRATED = FIXTURES / "original" / "mlp", FIXTURES / "migrated" / "mlp"


def _variant(tmp: Path, name: str, file: str, old: str, new: str) -> Path:
    tree = tmp / name
    shutil.copytree(MIGRATED, tree)
    text = (tree / file).read_text()
    assert old in text
    (tree / file).write_text(text.replace(old, new))
    return tree


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("modes")
    renamed = _variant(tmp, "renamed", "models.py", "fc2", "hidden_layer")
    # the migrated code changes the initialisation: visible unless the state is shared
    reinit = _variant(tmp, "reinit", "train.py", "model = MLP().to(device)",
                      "model = MLP().to(device)\n    torch.nn.init.zeros_(model.head.bias)\n"
                      "    torch.nn.init.constant_(model.head.weight, 0.01)")
    no_model = _variant(tmp, "no_model", "train.py", '"model": model,', '"net": model,')
    slow = _variant(tmp, "slow", "train.py", "def build():", "import time\n\n\ndef build():\n    time.sleep(60)")
    cases = {
        "reinit": VerifyOptions(ORIGINAL, reinit, "train.py:build", memory=False),
        "reinit_shared": VerifyOptions(ORIGINAL, reinit, "train.py:build", memory=False, share_state=True),
        "renamed_shared": VerifyOptions(ORIGINAL, renamed, "train.py:build", memory=False, share_state=True,
                                        renames={"fc2": "hidden_layer"}),
        "renamed_unmapped": VerifyOptions(ORIGINAL, renamed, "train.py:build", memory=False, share_state=True),
        "no_model": VerifyOptions(ORIGINAL, no_model, "train.py:build", memory=False),
    }
    results = dict(zip(cases, verify_many(list(cases.values()))))
    results["slow"] = verify_many([VerifyOptions(ORIGINAL, slow, "train.py:build", memory=False, timeout=8)])[0]
    return results


def test_a_changed_initialisation_is_seen_unless_state_is_shared(outcomes):
    assert outcomes["reinit"].verdict == "fail"
    assert outcomes["reinit_shared"].verdict == "pass", outcomes["reinit_shared"].reason


def test_renamed_parameters_map_with_rename(outcomes):
    outcome = outcomes["renamed_shared"]
    assert outcome.verdict == "pass", outcome.reason
    assert any(c.name == "grad/fc2.weight" for c in outcome.comparisons)


def test_state_dict_mismatch_lists_the_keys(outcomes):
    reason = outcomes["renamed_unmapped"].reason
    assert "Missing key(s)" in reason and '"hidden_layer.weight"' in reason and "fc2.weight" in reason


def test_protocol_error_is_one_line_exit_2_on_the_migrated_tree(outcomes):
    outcome = outcomes["no_model"]
    assert (outcome.verdict, outcome.exit_code) == ("error", 2)
    assert "no_model/train.py: the migrated code does not follow the entry protocol" in outcome.reason
    assert "'model'" in outcome.reason and "\n" not in outcome.reason


def test_a_timeout_is_called_a_timeout(outcomes):
    outcome = outcomes["slow"]
    # the migrated side sleeps past the limit; on a loaded machine the original may run out first
    assert outcome.verdict == "error" and "side timed out after 8 s" in outcome.reason
    assert "crash" not in outcome.reason
