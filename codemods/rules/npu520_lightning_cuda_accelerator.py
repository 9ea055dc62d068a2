"""NPU520: the lightning-cuda-accelerator rule."""

from __future__ import annotations

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule
from codemods.families.lightning import (
    CUDA_ACCELERATORS,
    ENTRY_POINTS,
    LEGACY_STRATEGY_ACCELERATORS,
    branches,
    imports_lightning,
    lightning_name,
    text_of,
)
from npu_migrate.core.diagnostics import Severity

# under --target portable: what keeps one Trainer call right on every cluster
_PORTABLE_ROUTE = ("for one code base use `accelerator=\"auto\"` (CUDA where there is a GPU, else CPU); Lightning "
                   "has no built-in NPU accelerator, so on Ascend pass a registered one (subclass "
                   "`lightning.pytorch.accelerators.Accelerator` on torch.accelerator) chosen at run time")
_ROUTE = ("Lightning has no built-in NPU accelerator: register one (subclass "
          "`lightning.pytorch.accelerators.Accelerator` on top of torch.npu, Lightning's \"add a new "
          "accelerator\" guide) and pass it as `accelerator=`; with DDP also pass "
          "`strategy=DDPStrategy(process_group_backend=\"hccl\")`")


def _stored_key(target: cst.BaseExpression) -> str | None:
    """"accelerator" or "gpus" for `x["accelerator"]` / `x["gpus"]`, else None."""
    if not isinstance(target, cst.Subscript) or len(target.slice) != 1:
        return None
    index = target.slice[0].slice
    key = text_of(index.value) if isinstance(index, cst.Index) else None
    return key if key in ("accelerator", "gpus") else None


class LightningAccelerator(Rule):
    """## What it does

    Lightning/Fabric `accelerator="cuda"|"gpu"`, `gpus=` and `CUDAAccelerator` are reported with the NPU route, and so are the Lightning < 2.0 forms: `Trainer.from_argparse_args(args)` (the accelerator and `--gpus` come from the command line) and a Trainer setting stored into a dict in a file that imports Lightning (`cfg["gpus"] = ...`, `cfg["accelerator"] = "gpu"`, or `"ddp"`, which Lightning < 1.7 took as the strategy, run on the `gpus` devices), and so is a `Trainer`/`Fabric` call that asks for `devices=` and leaves the accelerator to Lightning (none given, or `"auto"`): Lightning's automatic choice is CUDA, MPS or the CPU, so on an Ascend machine it silently runs on the CPU.

    ## Why

    Lightning's documented accelerators are cpu, cuda/gpu, mps and tpu: it ships no NPU accelerator, so nothing exact can be written. The report gives the route: a custom `lightning.pytorch.accelerators.Accelerator` on top of `torch.npu` (Lightning's "add a new accelerator" guide) passed as `accelerator=`, and `DDPStrategy(process_group_backend="hccl")`.

    ## Example

    ```python
    import lightning as L
    trainer = L.Trainer(accelerator="gpu", devices=2)   # reported with the route
    ```

    ## Fix safety

    No fix: no documented NPU accelerator to rewrite to.
    Suppress with `# npu-migrate: ignore[NPU520]`.

    ## Targets

    - **npu**: reports it with the route (no fix)
    - **portable**: the same report (nothing is rewritten: Lightning's own tests pin CUDA on purpose), advising `accelerator="auto"` for one code base and a registered accelerator on Ascend
    """

    code = "NPU520"
    supported_targets = frozenset({"npu", "portable"})
    name = "lightning-cuda-accelerator"
    summary = "Lightning/Fabric `accelerator=\"cuda\"|\"gpu\"`, `gpus=` and `CUDAAccelerator` are reported with the NPU route"
    fix = Fix.NONE
    severity = Severity.WARNING
    # a CUDA accelerator literal right after `accelerator=` (or on a line with a conditional
    # value), `gpus=`, `CUDAAccelerator`: Lightning's own code passes `accelerator=` hundreds of
    # times with other values, and every matching statement costs a LibCST parse; a Trainer/Fabric
    # call that asks for `devices=` (the accelerator then chosen by Lightning)
    # call; Lightning < 2.0's `Trainer.from_argparse_args` (the accelerator and `--gpus` from the
    # command line) and a Trainer setting stored into a dict (`cfg["accelerator"] = "ddp"`)
    prefilter = (r"accelerator\s*=\s*\(?\s*[\"'](?i:cuda|gpu)[\"']|accelerator\s*=[^\n]*\bif\b|gpus(?<!\wgpus)\s*=|"
                 r"CUDAAccelerator|(?:Fabric|Trainer)\([\s\S]*?\bdevices\s*=|\bfrom_argparse_args\b|"
                 r"\[\s*[\"'](?:accelerator|gpus)[\"']\s*\]\s*=[^=]")

    def _route(self) -> str:
        if self.target == "portable":
            return _PORTABLE_ROUTE
        return _ROUTE

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.resolve(node.func)
        if lightning_name(qualified, frozenset({"from_argparse_args"})) \
                and (qualified or "").split(".")[-2:-1] == ["Trainer"]:
            self.report(node, "`Trainer.from_argparse_args` (Lightning < 2.0) takes the accelerator and `--gpus` "
                              "from the command line: `--gpus` selects CUDA devices, and Lightning < 2.0 knows "
                              "no NPU; on Lightning 2.x (which drops `from_argparse_args`: pass the parsed "
                              f"settings to `Trainer(...)`): {self._route()}")
            return
        if not lightning_name(qualified, ENTRY_POINTS):
            return
        for arg in node.args:
            keyword = arg.keyword.value if arg.keyword else None
            chosen = [text_of(v) for v in branches(arg.value)]
            cuda = [c for c in chosen if (c or "").lower() in CUDA_ACCELERATORS]
            if keyword == "accelerator" and cuda:
                self.report(arg, f"`accelerator={cuda[0]!r}` selects CUDA: {self._route()}")
            elif keyword == "gpus":
                self.report(arg, f"`gpus=` (Lightning < 2.0) selects CUDA devices: {self._route()}")
        self._report_automatic(node)

    def _report_automatic(self, node: cst.Call) -> None:
        """`Fabric(devices=n)` with no accelerator (or "auto"): Lightning picks CUDA, MPS or the
        CPU, so on an Ascend machine it runs on the CPU (n CPU processes) without a word."""
        if self.target != "npu" or any(arg.keyword is None for arg in node.args):
            return  # portable: "auto" is the advice; a positional or `**` argument may be the accelerator
        keywords = {arg.keyword.value: arg for arg in node.args if arg.keyword}
        chosen = keywords.get("accelerator")
        if "devices" not in keywords or (chosen is not None and text_of(chosen.value) != "auto"):
            return
        name = self.resolve(node.func) or "Trainer"
        self.report(chosen or node, f"`{name.rsplit('.', 1)[-1]}(devices=...)` lets Lightning pick the accelerator "
                                    "(\"auto\": CUDA, MPS or the CPU): on an Ascend machine it runs on the CPU "
                                    f"without a word; {self._route()}")

    def visit_Assign(self, node: cst.Assign) -> None:
        """`trainer_config["accelerator"] = "ddp"`, `cfg["gpus"] = 2` in a file that imports
        Lightning: the Trainer's settings kept in a dict (latent-diffusion's main.py), which the
        calls above never see."""
        for target in node.targets:
            key = _stored_key(target.target)
            if key is None or not imports_lightning(self.context.facts):
                continue
            value = (text_of(node.value) or "").lower()
            if key == "gpus" and not (isinstance(node.value, (cst.Integer, cst.Name))
                                      and (getattr(node.value, "value", None) in ("0", "None", "False"))):
                self.report(target.target, f"`gpus` (a Lightning < 2.0 Trainer setting) selects CUDA devices: "
                                           f"{self._route()}")
            elif value in CUDA_ACCELERATORS:
                self.report(target.target, f"accelerator {value!r} selects CUDA: {self._route()}")
            elif value in LEGACY_STRATEGY_ACCELERATORS:
                self.report(target.target, f"accelerator {value!r} is Lightning < 1.7's name for a strategy, run on "
                                           "the CUDA devices of `gpus` (NCCL for DDP); on Lightning 2.x pass it as "
                                           f"`strategy=`: {self._route()}")

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "CUDAAccelerator" and lightning_name(self.resolve(node), frozenset({"CUDAAccelerator"})):
            self.report(node, f"`CUDAAccelerator` runs on CUDA only: {self._route()}")

    def visit_Name(self, node: cst.Name) -> None:
        if (node.value == "CUDAAccelerator" and not self.context.in_import
                and lightning_name(self.resolve(node), frozenset({"CUDAAccelerator"}))):
            self.report(node, f"`CUDAAccelerator` runs on CUDA only: {self._route()}")


CASES = [
    Invalid(
        """\
import lightning as L
trainer = L.Trainer(accelerator="gpu", devices=2)
""",
        codes=("NPU520",),
    ),
    Invalid(  # litgpt: Fabric chooses the accelerator itself, which is never an NPU
        """\
import lightning as L
fabric = L.Fabric(
    devices=devices,
    precision=precision,
)
""",
    ),
    Invalid(  # latent-diffusion: Lightning 1.x, the Trainer's settings from a dict and the command line
        """\
import pytorch_lightning as pl
from pytorch_lightning.trainer import Trainer
parser = Trainer.add_argparse_args(parser)
trainer_config = lightning_config.get("trainer", OmegaConf.create())
trainer_config["accelerator"] = "ddp"
trainer = Trainer.from_argparse_args(trainer_opt, **trainer_kwargs)
trainer = pl.Trainer.from_argparse_args(args)
""",
        codes=("NPU520",),
    ),
    Valid(  # no Lightning in the file: a dict key "gpus" is someone else's setting
        """\
config = {}
config["gpus"] = 4
config["accelerator"] = "ddp"
""",
    ),
    Valid(
        """\
import lightning as L
trainer_config["accelerator"] = "cpu"
trainer = L.Trainer(accelerator="cpu", devices=1)
fabric = L.Fabric(accelerator=MyNPUAccelerator(), devices=8)
fabric = L.Fabric(accelerator="auto", devices=8)  # npu-migrate: ignore[NPU520]
""",
    ),
    Valid(
        """\
import lightning as L
t = L.Trainer(accelerator='cpu', devices=1)
""",
        with_rules=('NPU103', 'NPU120', 'NPU521', 'NPU522', 'NPU530'),
    ),
    Valid(
        """\
t = Trainer(accelerator='gpu')
""",
        with_rules=('NPU103', 'NPU120', 'NPU521', 'NPU522', 'NPU530'),
    ),
    Valid(
        """\
t = Trainer.from_argparse_args(opt)
cfg['gpus'] = 2
""",
        with_rules=('NPU103', 'NPU120', 'NPU521', 'NPU522', 'NPU530'),
    ),
    Valid(
        """\
import pytorch_lightning as pl
if cfg['gpus'] == 2:
    pass
cfg['accelerator'] = 'cpu'
""",
        with_rules=('NPU103', 'NPU120', 'NPU521', 'NPU522', 'NPU530'),
    ),
    Valid(
        """\
import pytorch_lightning as pl
cfg['gpus'] = 0
cfg['gpus'] = None
""",
        with_rules=('NPU103', 'NPU120', 'NPU521', 'NPU522', 'NPU530'),
    ),
]
