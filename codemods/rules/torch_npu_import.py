"""NPU100: add `import torch_npu` to files the migration makes depend on it."""

from codemods.framework.base import Fix, Rule


class AddTorchNpuImport(Rule):
    code = "NPU100"
    name = "add-torch-npu-import"
    summary = "Add `import torch_npu` once, right after `import torch`, where the rewrite needs it"
    fix = Fix.SAFE
    prefilter = r"(?!)"  # never a reason to parse a file by itself; the engine acts on other rules' edits
    adds_torch_npu_import = True
