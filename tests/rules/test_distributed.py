"""NPU140-NPU143: torch.distributed on HCCL."""


import pytest
import rule_cases

from codemods.data.tables import load_data
from codemods.families.distributed import DATA, dist_table
from codemods.rules.npu140_nccl_backend import backend_text

CODES = ["NPU140", "NPU141", "NPU142", "NPU143"]
D = "import torch.distributed as dist\n"


_RULES = rule_cases.for_codes(CODES)
migrate, after = _RULES.migrate, _RULES.after


REWRITES = [
    (D + 'dist.init_process_group("nccl")\n', D + 'dist.init_process_group("hccl")\n'),
    (D + "dist.init_process_group('nccl', init_method='tcp://nccl-host:1')\n",
     D + "dist.init_process_group('hccl', init_method='tcp://nccl-host:1')\n"),
    (D + 'dist.init_process_group(backend="nccl", rank=r)  # go\n',
     D + 'dist.init_process_group(backend="hccl", rank=r)  # go\n'),
    (D + 'dist.init_process_group(backend="cuda:nccl,cpu:gloo")\n',
     D + 'dist.init_process_group(backend="npu:hccl,cpu:gloo")\n'),
    ("import torch\ntorch.distributed.init_process_group(\n    backend='nccl' if torch.cuda.is_available() else 'gloo')\n",
     "import torch\ntorch.distributed.init_process_group(\n    backend='hccl' if torch.cuda.is_available() else 'gloo')\n"),
    ("from torch.distributed import init_process_group\ninit_process_group('nccl')\n",
     "from torch.distributed import init_process_group\ninit_process_group('hccl')\n"),
    (D + 'g = dist.new_group([0, 1], None, "nccl")\n', D + 'g = dist.new_group([0, 1], None, "hccl")\n'),
    (D + 'g = dist.new_group(ranks, backend="nccl")\n', D + 'g = dist.new_group(ranks, backend="hccl")\n'),
    ('deepspeed.init_distributed(dist_backend="nccl")\n', 'deepspeed.init_distributed(dist_backend="hccl")\n'),
    ('kw = InitProcessGroupKwargs(backend="NCCL")\n', 'kw = InitProcessGroupKwargs(backend="HCCL")\n'),
    # comparisons
    (D + 'if dist.get_backend() == "nccl":\n    pass\n', D + 'if dist.get_backend() == "hccl":\n    pass\n'),
    ('ok = backend != "nccl"\n', 'ok = backend != "hccl"\n'),
    ('ok = "nccl" == args.dist_backend\n', 'ok = "hccl" == args.dist_backend\n'),
    ("ok = self.backend in ('nccl', 'gloo')\n", "ok = self.backend in ('hccl', 'gloo')\n"),
    # names that hold a backend
    ('backend = "nccl"\n', 'backend = "hccl"\n'),
    ('def setup(rank, backend="nccl"):\n    pass\n', 'def setup(rank, backend="hccl"):\n    pass\n'),
    ("cfg = {'dist_backend': 'nccl', 'name': 'nccl'}\n", "cfg = {'dist_backend': 'hccl', 'name': 'nccl'}\n"),
    ("from torch.distributed import is_nccl_available\nself.backend: str = 'nccl' if is_nccl_available() else 'gloo'\n",
     "from torch.distributed import is_hccl_available\nself.backend: str = 'hccl' if is_hccl_available() else 'gloo'\n"),
    # argparse
    ('p.add_argument("--dist-backend", default="nccl", choices=["nccl", "gloo"], help="nccl")\n',
     'p.add_argument("--dist-backend", default="hccl", choices=["hccl", "gloo"], help="nccl")\n'),
    ("p.add_argument('--backend', type=str, default='nccl')\n",
     "p.add_argument('--backend', type=str, default='hccl')\n"),
    # Backend.NCCL (NPU141)
    ("from torch.distributed import Backend\nb = Backend.NCCL\n",
     "from torch.distributed import Backend\nb = Backend.HCCL\n"),
    (D + "dist.init_process_group(dist.Backend.NCCL)\n", D + "dist.init_process_group(dist.Backend.HCCL)\n"),
    # is_nccl_available (NPU142)
    (D + "if dist.is_nccl_available():\n    pass\n", D + "if dist.is_hccl_available():\n    pass\n"),
    ("from torch.distributed import is_nccl_available\nok = is_nccl_available()\n",
     "from torch.distributed import is_hccl_available\nok = is_hccl_available()\n"),
    ("from torch.distributed import is_nccl_available as ok\nx = ok()\n",
     "from torch.distributed import is_hccl_available as ok\nx = ok()\n"),
]

UNCHANGED = [
    'print("using nccl")\n',
    'p.add_argument("--use-nccl", action="store_true")\n',
    'os.environ["NCCL_DEBUG"] = "INFO"\n',  # environment variables are other rules' business
    D + 'dist.init_process_group("gloo")\n',
    D + 'dist.init_process_group(init_method="file:///tmp/nccl")\n',
    'ok = kind == "nccl"\n',
    'x = lib.Backend.NCCL\n',
    'ok = mylib.is_nccl_available()\n',
    'b = "nccl"\n',
    'msg = {"text": "nccl"}\n',
    D + 'dist.init_process_group(backend="hccl")\n',
    'p.add_argument("--device", default="nccl")\n',
]


test_rewrites, test_idempotent, test_unchanged = rule_cases.table_tests(_RULES, REWRITES, UNCHANGED)


@pytest.mark.parametrize(("text", "expected"), [
    ("nccl", "hccl"), ("NCCL", "HCCL"), ("cuda:nccl", "npu:hccl"),
    ("cuda:nccl,cpu:gloo", "npu:hccl,cpu:gloo"), ("cpu:gloo, cuda:nccl", "cpu:gloo, npu:hccl"),
    ("gloo", None), ("Nccl", None), ("nccl2", None), ("cuda:nccl;cpu:gloo", None), ("", None),
])
def test_backend_text(text, expected):
    assert backend_text(text, dist_table()) == expected


def test_unknown_backend_string_in_a_backend_position_is_reported():
    outcome = migrate(D + 'dist.init_process_group(backend="nccl+sharp")\n')
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU140", 2)]


def test_process_group_nccl_is_reported():
    outcome = migrate(D + "opts = dist.ProcessGroupNCCL.Options()\n"
                      "from torch.distributed import ProcessGroupNCCL\n")
    assert outcome.new_text is None
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU143", 2), ("NPU143", 3)]
    assert "ProcessGroupHCCL" in outcome.diagnostics[0].message


def test_edit_messages():
    outcome = migrate(D + 'dist.init_process_group("nccl")\nb = dist.Backend.NCCL\n')
    assert [(e.code, e.line, e.message) for e in outcome.edits] == [
        ("NPU140", 2, '`"nccl"` → `"hccl"` (the backend argument)'),
        ("NPU141", 3, "`dist.Backend.NCCL` → `dist.Backend.HCCL`"),
    ]


def test_table_follows_the_coverage_schema():
    data = load_data(DATA)
    for entry in data["entries"]:
        assert {"cuda", "npu", "action", "code", "transfer_to_npu"} <= entry.keys()
        assert entry["code"] in CODES
