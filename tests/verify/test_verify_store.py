"""A reference computed once (issue 26, item 4): `verify --reference-store DIR` keeps the reference
and noise runs, addressed by the original tree's content and the run's settings, and later calls
reuse them; a changed file of the original or other arguments compute them anew;
files the runs themselves write into the tree do not count."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from npu_migrate.cli import main as cli_main
from npu_migrate.commands.verify import _store_path
from npu_migrate.verify.store import ReferenceStore, default_root

TRAIN = """\
import sys
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 2).to("cuda")
opt = torch.optim.SGD(model.parameters(), lr=float(sys.argv[1]) if len(sys.argv) > 1 else 0.1)
for step in range(2):
    loss = model(torch.randn(3, 4).to("cuda")).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.save(model.state_dict(), "checkpoint.pt")
"""


def _verify(original: Path, migrated: Path, store: Path, *args: str) -> dict:
    result = CliRunner().invoke(cli_main, ["verify", "--original", str(original), "--migrated", str(migrated),
                                           "--reference-store", str(store), "--format", "json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_the_reference_is_computed_once_and_recomputed_when_its_inputs_change(tmp_path):
    original = tmp_path / "original"
    original.mkdir()
    (original / "train.py").write_text(TRAIN)
    migrated = tmp_path / "migrated"
    applied = CliRunner().invoke(cli_main, ["apply", str(original), "--output-dir", str(migrated), "--no-cache"])
    assert applied.exit_code == 0, applied.output
    store = tmp_path / "store"
    first = _verify(original, migrated, store, "--", "train.py")
    assert first["verdict"] == "pass" and first["reference_store"]["reused"] == []
    assert (original / "checkpoint.pt").is_file()  # written by the runs: left out of the manifest
    manifest = json.loads((Path(first["reference_store"]["entry"]) / "manifest.json").read_text())
    assert manifest["written"] == ["checkpoint.pt"] and list(manifest["files"]) == ["train.py"]
    again = _verify(original, migrated, store, "--", "train.py")
    assert again["reference_store"] == {"entry": first["reference_store"]["entry"], "reused": ["reference", "noise"]}
    assert again["matched_ops"] == first["matched_ops"]
    other_arguments = _verify(original, migrated, store, "--no-noise-run", "--", "train.py", "0.2")
    assert other_arguments["reference_store"]["reused"] == []
    (original / "train.py").write_text(TRAIN.replace("lr=float", "lr= float"))
    changed = _verify(original, migrated, store, "--no-noise-run", "--", "train.py")
    assert changed["reference_store"]["reused"] == [] and changed["reference_store"]["entry"] != \
        first["reference_store"]["entry"]


def test_the_store_is_off_on_request_and_defaults_to_the_users_cache(tmp_path, monkeypatch):
    assert _store_path(None, True) is None
    assert _store_path(tmp_path, False) == tmp_path
    monkeypatch.delenv("NPU_MIGRATE_REFERENCE_STORE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_root() == tmp_path / "cache" / "npu-migrate" / "verify-references"
    assert _store_path(None, False) == default_root()


def test_unchanged_files_are_not_hashed_again(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.py").write_text("x = 1\n")
    store = ReferenceStore(tmp_path / "store")
    first = store.manifest(tree, set())
    cache = json.loads((tmp_path / "store" / "stat-cache.json").read_text())
    assert list(cache) == [str((tree / "a.py").resolve())]
    (tree / "a.py").write_text("x = 2\n")
    assert store.manifest(tree, set()) != first
