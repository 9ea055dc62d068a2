"""The semantics the advice depends on, each with cases where the advice must NOT appear:
DataLoader subclasses / factories / samplers and loader roles, gradient accumulation, stacks of
blocks worth checkpointing, loss scaling, redundant transfers, and evidence on every claim."""

import json
import textwrap

import pytest

from npu_migrate.analyze import analyze


def run(tmp_path, files: dict[str, str], sections=("memory",)):
    for name, source in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return analyze([str(tmp_path)], only=sections, jobs=1)


def loader_rows(result):
    table = next(t for t in result.sections["memory"] if t.title == "DataLoaders")
    return {int(row[0].rsplit(":", 2)[1]): row for row in table.rows}


def findings(result, code):
    return [d for d in result.findings if d.code == code]


# -- DataLoaders -------------------------------------------------------------------------------
YOLO_LIKE = {
    "utils/dataloaders.py": """\
        from torch.utils.data import DataLoader, dataloader, distributed

        class InfiniteDataLoader(dataloader.DataLoader):
            pass

        def create_dataloader(path, batch_size, workers=8, shuffle=False, image_weights=False, prefix=""):
            sampler = distributed.DistributedSampler(path, shuffle=shuffle)
            loader = DataLoader if image_weights else InfiniteDataLoader
            return loader(path, batch_size=batch_size, shuffle=shuffle and sampler is None,
                          num_workers=workers, sampler=sampler, pin_memory=True), path
        """,
    "train.py": """\
        from utils.dataloaders import create_dataloader

        def train(train_path, val_path, model, opt):
            train_loader, dataset = create_dataloader(train_path, 16, shuffle=True, prefix="train: ")
            val_loader = create_dataloader(val_path, 32, prefix="val: ")[0]
            for x in train_loader:
                model(x).sum().backward()
                opt.step()
        """,
}


def test_subclass_alias_and_factory_are_loaders(tmp_path):
    rows = loader_rows(run(tmp_path, YOLO_LIKE))
    assert len(rows) == 1, "the construction in the factory is the one loader: never 'None found'"
    row = rows[9]
    assert row[1] == "alias loader"
    assert row[2] == "train and eval"  # the factory builds both: train_loader and val_loader
    assert "drop_last=True" not in row[-1] and "training only" in row[-1]
    assert "persistent_workers" not in row[-1]  # InfiniteDataLoader keeps its workers itself


def test_subclass_called_from_another_file(tmp_path):
    result = run(tmp_path, {
        "loaders.py": "import torch\nclass RepeatLoader(torch.utils.data.DataLoader):\n    pass\n",
        "main.py": """\
            from loaders import RepeatLoader
            def main(ds, model, opt):
                train_loader = RepeatLoader(ds, batch_size=8, num_workers=4, pin_memory=True)
                for x in train_loader:
                    model(x).backward()
                    opt.step()
            """})
    rows = loader_rows(result)
    assert [row[1:3] for row in rows.values()] == [["subclass RepeatLoader", "train"]]


VALIDATION = """\
    import torch
    from torch.utils.data import DataLoader

    def main(model, opt, train_set, val_set, test_set, data):
        train_loader = DataLoader(train_set, batch_size=8, num_workers=4, pin_memory=True)
        val_loader = DataLoader(val_set, batch_size=8, num_workers=4, pin_memory=True)
        holdout = DataLoader(data, batch_size=8, num_workers=4, pin_memory=True)
        mnist = DataLoader(datasets.MNIST("d", train=False), batch_size=8, num_workers=4, pin_memory=True)
        for x in train_loader:
            model(x).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            for x in holdout:
                model(x)
    """


def test_no_drop_last_for_validation_loaders(tmp_path):
    result = run(tmp_path, {"main.py": VALIDATION})
    rows = loader_rows(result)
    assert rows[5][2] == "train" and "drop_last=True" in rows[5][-1]
    for line in (6, 7, 8):  # by name, by use (no_grad after model.eval()), by `train=False`
        assert rows[line][2] == "eval", rows[line]
        assert "drop_last" not in rows[line][-1]
    assert not any("drop_last" in d.message for d in findings(result, "ANA040") if d.line != 5)


def test_unknown_role_gets_no_drop_last_advice(tmp_path):
    rows = loader_rows(run(tmp_path, {"m.py": "from torch.utils.data import DataLoader\n"
                                              "loader = DataLoader(ds, batch_size=4)\n"}))
    assert rows[2][2] == "unknown" and "drop_last" not in rows[2][-1]


def test_batch_sampler_decides_batches(tmp_path):
    rows = loader_rows(run(tmp_path, {"m.py": """\
        import torch
        from torch.utils.data import DataLoader
        sampler = torch.utils.data.RandomSampler(ds)
        batches = torch.utils.data.BatchSampler(sampler, 2, drop_last=True)
        train_loader = DataLoader(ds, batch_sampler=batches, num_workers=2, pin_memory=True)
        """}))
    assert rows[5][2] == "train"
    assert "batch_size" not in rows[5][-1] and "drop_last" not in rows[5][-1]
    assert rows[5][-2] == "batches"


# -- gradient accumulation -----------------------------------------------------------------------
LOOP = """\
    def train(model, loader, optimizer, scaler, accumulate, last_opt_step=0):
        for ni, (x, y) in enumerate(loader):
            loss = model(x)
            scaler.scale(loss).backward()
            {guard}
                scaler.step(optimizer)
                scaler.update()
                last_opt_step = ni
    """


@pytest.mark.parametrize("guard", ["if ni - last_opt_step >= accumulate:", "if (ni + 1) % 4 == 0:"])
def test_accumulation_guard_means_no_advice(tmp_path, guard):
    result = run(tmp_path, {"t.py": LOOP.format(guard=guard)})
    assert not findings(result, "ANA046")
    precision = next(t for t in result.sections["memory"] if t.title.startswith("Mixed precision"))
    status = {row[0]: row[1] for row in precision.rows}["gradient accumulation"]
    assert status.startswith("in use") and guard.rstrip(":") in status


def test_accumulation_flag_and_micro_steps(tmp_path):
    flagged = run(tmp_path / "a", {"t.py": """\
        def train(model, loader, optimizer, accum_steps):
            for i, x in enumerate(loader):
                need_update = (i + 1) % accum_steps == 0
                model(x).backward()
                if need_update:
                    optimizer.step()
        """})
    micro = run(tmp_path / "b", {"t.py": """\
        def train(model, get_batch, optimizer, gradient_accumulation_steps):
            while True:
                for micro_step in range(gradient_accumulation_steps):
                    model(get_batch()).backward()
                optimizer.step()
        """})
    assert not findings(flagged, "ANA046") and not findings(micro, "ANA046")


def test_every_step_optimizer_gets_advice_with_evidence(tmp_path):
    result = run(tmp_path, {"t.py": LOOP.format(guard="if True:")})
    (advice,) = findings(result, "ANA046")
    assert advice.line == 6
    assert any(e.startswith("training loop: line 2") for e in advice.evidence)
    assert any(e.startswith("optimizer step: line 6") for e in advice.evidence)


def test_lbfgs_closure_is_not_an_accumulation_candidate(tmp_path):
    result = run(tmp_path, {"t.py": """\
        def train(model, x, optimizer):
            for i in range(10):
                def closure():
                    loss = model(x)
                    loss.backward()
                    return loss
                optimizer.step(closure)
        """})
    assert not findings(result, "ANA046")


# -- repeated blocks -----------------------------------------------------------------------------
BLOCKS = """\
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.fc = nn.Linear(d, 1024)

    class Pyramid(nn.Module):
        def __init__(self, ch=(64, 128, 256)):
            super().__init__()
            self.pools = nn.ModuleList([nn.MaxPool2d(k, 1, k // 2) for k in (5, 9, 13)])
            self.heads = nn.ModuleList(nn.Conv2d(c, 255, 1) for c in ch)
            self.cv = nn.Conv2d(64, 64, 1)

        def forward(self, x, feats):
            y = [m(x) for m in self.pools]
            for i in range(3):
                feats[i] = self.heads[i](feats[i])
            return y, feats

    class Tower(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.blocks = nn.ModuleList([Block(d) for _ in range(12)])
            self.head = nn.Linear(1024, 10)

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    def train(model, loader, opt):
        for x in loader:
            model(x).sum().backward()
            opt.step()
    """


def test_checkpoint_advice_only_for_chained_blocks_with_parameters(tmp_path):
    result = run(tmp_path, {"m.py": BLOCKS}, sections=("architecture", "memory"))
    advice = findings(result, "ANA045")
    assert [d.line for d in advice] == [24], "not the MaxPool2d list (11), not the per-level heads (12)"
    evidence = " | ".join(advice[0].evidence)
    assert "`Block` has parameters" in evidence and "blocks used (chained): line 28" in evidence
    assert "12 blocks x width 1024" in evidence and advice[0].confidence == "high"


def test_small_stack_does_not_dominate(tmp_path):
    source = BLOCKS.replace("range(12)", "range(2)").replace("nn.Linear(1024, 10)", "nn.Linear(1024, 100000)")
    assert not findings(run(tmp_path, {"m.py": source}, sections=("architecture", "memory")), "ANA045")


def test_no_checkpoint_advice_when_checkpointing_exists(tmp_path):
    source = "from torch.utils.checkpoint import checkpoint\n" + textwrap.dedent(BLOCKS)
    assert not findings(run(tmp_path, {"m.py": source}, sections=("architecture", "memory")), "ANA045")


# -- AMP / loss scaling, transfers -----------------------------------------------------------------
AUTOCAST_LOOP = """\
    import torch
    def train(model, loader, opt):
        for x in loader:
            with torch.autocast("cuda", dtype=torch.{dtype}):
                loss = model(x)
            loss.backward()
            opt.step()
    """


def test_fp16_autocast_without_scaler_needs_loss_scaling(tmp_path):
    result = run(tmp_path, {"t.py": AUTOCAST_LOOP.format(dtype="float16")}, sections=("computation",))
    (claim,) = findings(result, "ANA033")
    assert claim.line == 4 and "GradScaler" in claim.message and claim.confidence == "high"


def test_bf16_autocast_needs_no_scaler_advice(tmp_path):
    result = run(tmp_path, {"t.py": AUTOCAST_LOOP.format(dtype="bfloat16")}, sections=("computation",))
    assert not findings(result, "ANA033") and not findings(result, "ANA032")


def test_redundant_transfers(tmp_path):
    result = run(tmp_path, {"t.py": """\
        def train(model, loader, opt, device):
            for x in loader:
                model.to(device)
                x = x.cuda().to(device)
                model(x).backward()
                opt.step()
        """})
    assert sorted(d.line for d in findings(result, "ANA048")) == [3, 4]
    assert not any(d.line == 3 for d in findings(result, "ANA042"))  # not "use non_blocking" for the model


def test_every_finding_has_evidence_and_confidence(tmp_path):
    result = run(tmp_path, {"m.py": BLOCKS, "main.py": VALIDATION}, sections=("architecture", "computation", "memory"))
    assert result.findings
    for claim in result.findings:
        assert claim.evidence, claim
        assert claim.confidence in ("high", "medium", "low")


def test_autocast_turned_off_is_not_fp16_training(tmp_path):
    result = run(tmp_path, {"t.py": """\
        from torch.amp import autocast
        @autocast("cuda", enabled=False)
        def rotate(x):
            return x
        """}, sections=("computation",))
    assert not findings(result, "ANA033")


def test_profiler_import_is_not_a_deepspeed_setup(tmp_path):
    result = run(tmp_path, {"b.py": "from deepspeed.profiling.flops_profiler import get_model_profile\n",
                            "t.py": "import deepspeed\nengine = deepspeed.initialize(model=m)\n"},
                 sections=("architecture",))
    lines = sorted((d.path.rsplit("/", 1)[-1], d.line) for d in findings(result, "ANA010"))
    assert ("b.py", 1) not in lines and ("t.py", 2) in lines


def test_channels_last_is_not_third_party_code(tmp_path):
    result = run(tmp_path, {"t.py": "import torch\nx = torch.ones(1, 3, 4, 4).contiguous(memory_format=torch.channels_last)\n"},
                 sections=("architecture",))
    custom = next(t for t in result.sections["architecture"] if t.title.startswith("Custom operations"))
    assert custom.rows == []


def test_alternating_optimizers_get_no_accumulation_advice(tmp_path):
    result = run(tmp_path, {"gan.py": """\
        def train(netD, netG, loader, optimizerD, optimizerG):
            for x in loader:
                netD(x).mean().backward()
                optimizerD.step()
                netG(x).mean().backward()
                optimizerG.step()
        """})
    assert not findings(result, "ANA046")


def test_loaders_in_tests_get_no_tuning_advice(tmp_path):
    source = "from torch.utils.data import DataLoader\ntrain_loader = DataLoader(ds, batch_size=2)\n"
    result = run(tmp_path, {"tests/test_data.py": source, "train.py": source})
    assert [d.path.rsplit("/", 1)[-1] for d in findings(result, "ANA040")] == ["train.py"]


def test_backend_chosen_per_device_needs_no_change(tmp_path):
    result = run(tmp_path, {"t.py": """\
        import torch
        backend = torch.distributed.get_default_backend_for_device(device)
        torch.distributed.init_process_group(backend=backend, device_id=device)
        """}, sections=("architecture",))
    (claim,) = findings(result, "ANA010")
    assert claim.message.startswith("process group (backend per device)") and "no change" in claim.message


def test_profiler_step_is_not_an_optimizer(tmp_path):
    result = run(tmp_path, {"t.py": """\
        def train(model, x, optimizer, prof):
            for k in range(10):
                model(x).backward()
                optimizer.step()
                prof.step()
        """})
    assert [d.line for d in findings(result, "ANA046")] == [4]


# -- kernel support by torch_npu version ------------------------------------------------------------
def test_kernel_support_by_version():
    from npu_migrate.analyze import catalog

    assert catalog.serves("v2.1-newest", (2, 6)) and not catalog.serves("v2.7-newest", (2, 6))
    assert catalog.serves("v2.1-v2.12", (2, 12)) and not catalog.serves("v2.1-v2.12", (2, 13))
    assert catalog.serves("v2.1, v2.2", (2, 2)) and not catalog.serves("", (2, 2))
    # _scaled_mm has an NPU kernel from 2.7 on only (op_api v2.7-newest in npu_aten_ops.tsv)
    assert catalog.kernel_status(["_scaled_mm"], "2.6") == ("cpu-fallback risk", ["_scaled_mm"])
    assert catalog.kernel_status(["_scaled_mm"], "2.7.1") == ("native", [])
    assert catalog.kernel_status(["_scaled_mm"]) == ("native", [])  # any version in the list
    with pytest.raises(ValueError, match="not a torch_npu version"):
        catalog.parse_version("two.six")


def test_bad_version_is_one_line_exit_2(tmp_path):
    from click.testing import CliRunner

    from npu_migrate.commands.analyze import command

    (tmp_path / "m.py").write_text("import torch\n")
    result = CliRunner().invoke(command, [str(tmp_path), "--torch-npu-version", "2.x"])
    assert result.exit_code == 2 and "not a torch_npu version" in result.output
    assert "Traceback" not in result.output


# -- evidence in every format -------------------------------------------------------------------------
def test_evidence_in_every_format(tmp_path):
    from npu_migrate.analyze.render import render

    result = run(tmp_path, {"t.py": LOOP.format(guard="if True:")})
    (claim,) = findings(result, "ANA046")
    fact = claim.evidence[0]
    assert fact.startswith("training loop: line 2")
    for fmt in ("text", "markdown", "html"):
        text = render(result, fmt)
        assert "confidence high" in text, fmt
        assert fact.split("`")[0] in text, fmt
    data = json.loads(render(result, "json"))
    entry = next(f for f in data["findings"] if f["code"] == "ANA046")
    assert entry["evidence"] == list(claim.evidence) and entry["confidence"] == "high"
    sarif = json.loads(render(result, "sarif"))
    result_entry = next(r for r in sarif["runs"][0]["results"] if r["ruleId"] == "ANA046")
    assert result_entry["properties"] == {"evidence": list(claim.evidence), "confidence": "high"}
