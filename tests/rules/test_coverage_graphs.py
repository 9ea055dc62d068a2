"""NPU175 compile backends, NPU176 CUDA graphs → NPU graphs, NPU177 graph() arguments."""

from __future__ import annotations

import inspect

import torch
from rule_cases import codes_at, for_codes

_RULES = for_codes(with_import=True)
migrate = _RULES.migrate
after = _RULES.after
assert_idempotent = _RULES.assert_idempotent

CODES = ["NPU175", "NPU176", "NPU177"]
N = "import torch_npu  # noqa: F401\n"


# The before/after examples are the CASES of NPU175-NPU177 (in the rule modules: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


def test_a_whole_cuda_graph_capture_with_caveats() -> None:
    src = ("import torch\n\ng = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g):\n    y = model(x)\n"
           "g.replay()\nf = torch.cuda.make_graphed_callables(model, (x,))\n")
    outcome = migrate(src, CODES)
    assert outcome.new_text.endswith("g = torch.npu.NPUGraph()\nwith torch.npu.graph(g):\n    y = model(x)\n"
                                     "g.replay()\nf = torch.npu.make_graphed_callables(model, (x,))\n")
    assert codes_at(outcome) == [("NPU176", 3), ("NPU176", 4), ("NPU176", 7)]
    assert all("inference only" in d.message for d in outcome.diagnostics)


def test_from_import_of_cuda_graph() -> None:
    src = "from torch.cuda import CUDAGraph, graph\ng = CUDAGraph()\nwith graph(g, None, None, 'global'):\n    pass\n"
    text = after(src, CODES)
    assert "from torch_npu.npu import NPUGraph as CUDAGraph, graph\n" in text
    assert "with graph(g, None, None, capture_error_mode='global'):" in text
    assert_idempotent(src, CODES)


def test_tensorrt_backend_is_reported() -> None:
    outcome = migrate("import torch\nm = torch.compile(model, backend='tensorrt')\n", CODES)
    assert outcome.new_text is None and codes_at(outcome) == [("NPU175", 2)]


def test_unchanged() -> None:
    src = ("import torch\nm = torch.compile(model)\nm = torch.compile(model, backend='inductor')\n"
           "m = torch.compile(model, mode='reduce-overhead')\nlog('cudagraphs')\n"
           "with torch.npu.graph(g, None, None, True):\n    pass\n")  # NPU's own 4th parameter
    outcome = migrate(src, CODES)
    assert outcome.new_text is None and outcome.diagnostics == []


def test_cuda_graph_signature_is_what_the_rule_assumes() -> None:
    """torch.cuda.graph's first three parameters are (graph, pool, stream); the fourth is
    capture_error_mode, which torch.npu.graph takes as its fifth."""
    params = list(inspect.signature(torch.cuda.graph.__init__).parameters)[1:]
    assert params[:4] == ["cuda_graph", "pool", "stream", "capture_error_mode"]
    from codemods.rules.npu177_cuda_graph_arguments import _NPU_GRAPH_LACKS
    assert set(_NPU_GRAPH_LACKS) <= set(params)


def test_compile_backend_is_registered_upstream() -> None:
    """"cudagraphs" is a real dynamo backend name (the rule's CUDA side)."""
    from torch._dynamo.backends.registry import list_backends
    assert "cudagraphs" in list_backends(exclude_tags=())
