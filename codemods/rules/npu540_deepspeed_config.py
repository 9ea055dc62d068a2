"""NPU540: the deepspeed-config rule (DeepSpeed JSON configuration files)."""

from __future__ import annotations

from typing import Any

from codemods.analyses.deepspeedrefs import DEEPSPEED_REFERENCES
from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule
from codemods.model.jsonspans import JsonSpanError, Path, Span, json_spans, line_col
from npu_migrate.core.diagnostics import Severity

# top-level keys only a DeepSpeed configuration has: a JSON file without one is not checked
DEEPSPEED_KEYS = frozenset({
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
    "zero_optimization", "fp16", "bf16", "amp", "sparse_attention", "aio", "steps_per_print",
    "zero_allow_untested_optimizer", "wall_clock_breakdown", "gradient_clipping",
    "activation_checkpointing", "flops_profiler", "communication_data_type",
})
# 1-bit optimizers: their compressed allreduce picks a backend by `comm_backend_name` (default "nccl")
ONE_BIT_OPTIMIZERS = frozenset({"onebitadam", "onebitlamb", "zerooneadam"})
ZERO_PLUS_PLUS = ("zero_quantized_weights", "zero_quantized_nontrainable_weights", "zero_quantized_gradients")
_ROUTE_PRECISION = 'use DeepSpeed\'s own mixed precision, `"bf16": {"enabled": true}` (or `"fp16"`), which runs on NPU'


class DeepSpeedConfig(Rule):
    """## What it does

    DeepSpeed JSON configs: settings with no NPU route are reported with one; `comm_backend_name: "nccl"` becomes `"hccl"`.

    ## Why

    DeepSpeed runs on Ascend through its NPU accelerator (FP16, BF16, ZeRO 1-3, ZeRO-Offload,
    pipeline parallelism, MoE, FusedAdam, CPU Adam; deepspeedai/DeepSpeed issue 4567), but some
    settings of a `ds_config.json` select CUDA-only machinery that the Python code never shows:

    | Setting | On NPU | What the rule does |
    |---|---|---|
    | `optimizer.params.comm_backend_name: "nccl"` (1-bit Adam/LAMB, 0/1 Adam) | DeepSpeed's `HcclBackend` | rewritten to `"hccl"` |
    | a 1-bit optimizer without `comm_backend_name` | defaults to NCCL | warning: add `"comm_backend_name": "hccl"` |
    | `sparse_attention` | Triton block-sparse CUDA kernels, no NPU build | warning: dense attention, or `torch_npu.npu_fusion_attention(..., sparse_mode=...)` |
    | `amp` (NVIDIA apex AMP) | apex's CUDA extensions | warning: `"bf16": {"enabled": true}` (or `"fp16"`) |
    | `optimizer.type: "Lamb"` (FusedLamb) | no NPU op build | warning: `"AdamW"` (FusedAdam has an NPU build) or a CPU optimizer |
    | `zero_optimization.zero_quantized_*: true` (ZeRO++) | quantizer kernels, no NPU op build | warning: set it to false |
    | `offload_*.device: "nvme"`, `aio` | needs DeepSpeed's NPU `async_io` op (recent releases) and libaio | info: check `ds_report` on the NPU machine |
    | a `"cuda"` / `"cuda:N"` value | not a DeepSpeed device | warning: write `"npu"` |

    `communication_data_type` (fp16/bf16/fp32) needs nothing: HCCL reduces all three.

    Which `.json` files are read: `ds_config*.json`, `ds_*config*.json` and `*deepspeed*.json`
    anywhere in the tree, any `.json` the project's code passes as `deepspeed_config=`,
    `deepspeed=`, `ds_config=`, `config=` of a `deepspeed.*` call or `--deepspeed_config` /
    `--deepspeed` (Python and launch scripts), the `deepspeed-configs` globs of the configuration,
    and any `.json` named on the command line. A file whose top level has no DeepSpeed key is left
    alone. Diagnostics point at `file:line:col` of the key; only the rewritten value's bytes change.

    ## Example

    A `ds_config.json` with a 1-bit optimizer and apex AMP:

    ```json
    {
      "train_batch_size": 16,
      "optimizer": {"type": "OneBitAdam", "params": {"lr": 1e-4, "comm_backend_name": "nccl"}},
      "amp": {"enabled": true, "opt_level": "O1"}
    }
    ```

    becomes (`"amp"` is reported: use `"bf16": {"enabled": true}`):

    ```json
    {
      "train_batch_size": 16,
      "optimizer": {"type": "OneBitAdam", "params": {"lr": 1e-4, "comm_backend_name": "hccl"}},
      "amp": {"enabled": true, "opt_level": "O1"}
    }
    ```

    ## Fix safety

    Safe: only `comm_backend_name` is rewritten, to the backend DeepSpeed documents for NPU. JSON
    has no comments, so a file is silenced with `per-file-ignores` (`"ds_config.json" = ["NPU540"]`).

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: not yet
    """

    code = "NPU540"
    name = "deepspeed-config"
    summary = "DeepSpeed JSON configs: settings with no NPU route are reported with one; `comm_backend_name: \"nccl\"` becomes `\"hccl\"`"
    fix = Fix.SAFE
    severity = Severity.WARNING
    language = "json"  # a text rule: the engine hands it the DeepSpeed .json files discovery chose
    prefilter = r'"(?:' + "|".join(sorted(DEEPSPEED_KEYS)) + r')"'
    # which .json files are configurations: those the package root's code passes to DeepSpeed, among others
    project_facts = (DEEPSPEED_REFERENCES,)

    def rewrite_text(self, text: str) -> str:
        try:
            document, spans = json_spans(text)
        except JsonSpanError as error:
            line, col = line_col(text, error.offset)
            self.report_at(line, col, f"not valid JSON ({error}): the DeepSpeed config was not checked",
                           Severity.INFO)
            return text
        if not isinstance(document, dict) or not DEEPSPEED_KEYS & set(document):
            return text
        self.text, self.spans = text, spans
        replacements: list[tuple[Span, str]] = []
        self._optimizer(document.get("optimizer"), replacements)
        self._reports(document)
        for span in spans.values():
            if isinstance(span.value, str) and (span.value == "cuda" or span.value.startswith("cuda:")):
                self._report(span.path, f'"{span.value}" is a CUDA device: on NPU write "npu{span.value[4:]}"')
        for span, new in sorted(replacements, key=lambda r: -r[0].start):
            text = text[:span.start] + new + text[span.end:]
        return text

    # -- checks -------------------------------------------------------------------------------
    def _optimizer(self, optimizer: Any, replacements: list[tuple[Span, str]]) -> None:
        if not isinstance(optimizer, dict):
            return
        kind = str(optimizer.get("type", "")).lower()
        params = optimizer.get("params")
        params = params if isinstance(params, dict) else {}
        backend = params.get("comm_backend_name")
        span = self.spans.get(("optimizer", "params", "comm_backend_name"))
        if isinstance(backend, str) and backend.lower() == "nccl" and span is not None:
            replacements.append((span, '"hccl"'))
            line, col = line_col(self.text, span.key_start)
            self.fixed_at(line, col, '`comm_backend_name: "nccl"` -> `"hccl"`: the compressed allreduce of '
                                     "1-bit optimizers runs on DeepSpeed's HcclBackend on NPU")
        elif kind in ONE_BIT_OPTIMIZERS and backend is None:
            self._report(("optimizer", "type"), f'{optimizer.get("type")} defaults to `comm_backend_name: "nccl"`: '
                         'add `"comm_backend_name": "hccl"` to its params (DeepSpeed\'s HcclBackend)')
        if kind == "lamb":
            self._report(("optimizer", "type"), 'DeepSpeed\'s "Lamb" is FusedLamb, which has no NPU op build: use '
                         '"AdamW" (FusedAdam has one) or a torch optimizer')

    def _reports(self, document: dict[str, Any]) -> None:
        if "sparse_attention" in document:
            self._report(("sparse_attention",), "DeepSpeed sparse attention runs Triton block-sparse CUDA kernels and "
                         "has no NPU build: remove the block and use dense attention, or "
                         "`torch_npu.npu_fusion_attention(..., sparse_mode=...)` in the model")
        amp = document.get("amp")
        if amp is not None and not (isinstance(amp, dict) and amp.get("enabled") is False):
            self._report(("amp",), f"`amp` is NVIDIA apex AMP (CUDA extensions): {_ROUTE_PRECISION}")
        zero = document.get("zero_optimization")
        if isinstance(zero, dict):
            for key in ZERO_PLUS_PLUS:
                if zero.get(key) is True:
                    self._report(("zero_optimization", key), f"ZeRO++ `{key}` uses DeepSpeed's quantizer kernels, "
                                 "which have no NPU op build: set it to false")
            for offload in ("offload_optimizer", "offload_param"):
                target = zero.get(offload)
                if isinstance(target, dict) and str(target.get("device", "")).lower() == "nvme":
                    self._report(("zero_optimization", offload, "device"),
                                 "NVMe offload needs DeepSpeed's NPU async_io op (recent DeepSpeed releases) and "
                                 "libaio: check `ds_report` on the NPU machine", Severity.INFO)

    def _report(self, path: Path, message: str, severity: Severity | None = None) -> None:
        span = self.spans.get(path)
        line, col = line_col(self.text, span.key_start) if span is not None else (1, 1)
        self.report_at(line, col, message, severity)


CASES = [
    Invalid(
        """\
{
  "train_batch_size": 8,
  "optimizer": {"type": "OneBitLamb", "params": {"comm_backend_name": "nccl", "lr": 0.001}},
  "sparse_attention": {"mode": "fixed", "block": 16}
}
""",
        after="""\
{
  "train_batch_size": 8,
  "optimizer": {"type": "OneBitLamb", "params": {"comm_backend_name": "hccl", "lr": 0.001}},
  "sparse_attention": {"mode": "fixed", "block": 16}
}
""",
        path="ds_config.json",
        codes=("NPU540",),
    ),
    Valid(
        """\
{"train_batch_size": 8, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}}
""",
        path="ds_config.json",
    ),
    Valid(
        '{"train_batch_size": 8, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}',
        path='ds_config.json',
    ),
    Valid(
        '{"train_batch_size": 8, "amp": {"enabled": false}}',
        path='ds_config.json',
    ),
    Valid(
        '{"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}',
        path='ds_config.json',
    ),
    Valid(
        '{"train_batch_size": 8, "communication_data_type": "fp16"}',
        path='ds_config.json',
    ),
    Valid(
        '{"model": "cuda", "labels": [1, 2]}',
        path='ds_config.json',
    ),
    Valid(
        '[{"train_batch_size": 8, "amp": {}}]',
        path='ds_config.json',
    ),
]
