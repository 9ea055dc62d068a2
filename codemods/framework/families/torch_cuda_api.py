"""NPU120: `torch.cuda.<name>` becomes `torch.npu.<name>` for every name torch_npu provides;
NPU121: a `torch.cuda` name with no NPU counterpart is reported with what to do instead.

The names are data (`codemods/data/torch_cuda.json`). Aliases are resolved: `th.cuda.X`,
`from torch.cuda import X` (the import moves to `torch.npu`; names without a counterpart stay
in a `torch.cuda` import of their own), and module aliases (`import torch.cuda as tc`,
`from torch import cuda`), whose import is repointed at `torch.npu` when every use of the
alias is a name we rewrite. A `torch.cuda.<name>` in neither list is left to other rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from codemods.framework.data import load_data

DATA = "torch_cuda.json"


@dataclass(frozen=True)
class CudaNames:
    rewrites: dict[str, str]  # torch.cuda name -> attribute of torch.npu
    flags: dict[str, str]  # torch.cuda name -> what to do instead


@cache
def cuda_names() -> CudaNames:
    data = load_data(DATA)
    rewrites, flags = {}, {}
    for entry in data["entries"]:
        name = entry["cuda"].removeprefix("torch.cuda.")
        if entry["action"] == "rewrite":
            rewrites[name] = entry["npu"].removeprefix("torch.npu.")
        elif entry["action"] == "flag":
            flags[name] = entry["note"]
    return CudaNames(rewrites, flags)

