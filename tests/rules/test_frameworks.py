"""NPU520-NPU522 (Lightning, Hugging Face), NPU530 (test mocks), `device_map=` for NPU103."""

import pytest
import rule_cases

CODES = ["NPU103", "NPU120", "NPU520", "NPU521", "NPU522", "NPU530"]
T = "import torch\n"
L = "import lightning as L\n"
HF = "from transformers import TrainingArguments, AutoModel\n"
MOCK = "from unittest import mock\n"


def migrate(src):
    return rule_cases.migrate(src, CODES)


def after(src):
    return rule_cases.after(src, CODES)


REWRITES = [
    ("from lightning.pytorch.strategies import DDPStrategy\ns = DDPStrategy(process_group_backend='nccl')\n",
     "from lightning.pytorch.strategies import DDPStrategy\ns = DDPStrategy(process_group_backend='hccl')\n"),
    (HF + "a = TrainingArguments(output_dir='o', no_cuda=True)\n",
     HF + "a = TrainingArguments(output_dir='o', use_cpu=True)\n"),
    (HF + "m = AutoModel.from_pretrained('x', device_map='cuda:0')\n",
     HF + "m = AutoModel.from_pretrained('x', device_map='npu:0')\n"),
    # test doubles follow the code they mock
    (T + MOCK + "@mock.patch('torch.cuda.is_available', return_value=True)\ndef test_a(m):\n    pass\n",
     T + MOCK + "@mock.patch('torch.npu.is_available', return_value=True)\ndef test_a(m):\n    pass\n"),
    (T + MOCK + "def test_b():\n    with mock.patch.object(torch.cuda, 'synchronize'):\n        pass\n",
     T + MOCK + "def test_b():\n    with mock.patch.object(torch.npu, 'synchronize'):\n        pass\n"),
    (T + "def test_c(monkeypatch):\n    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 2)\n",
     T + "def test_c(monkeypatch):\n    monkeypatch.setattr(torch.npu, 'device_count', lambda: 2)\n"),
    (T + "def test_d(monkeypatch):\n    monkeypatch.setattr('torch.cuda.is_available', lambda: True)\n",
     T + "def test_d(monkeypatch):\n    monkeypatch.setattr('torch.npu.is_available', lambda: True)\n"),
    # skip markers: the call moves with the code, the reason text stays as written
    (T + "import pytest\n@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs cuda')\ndef test_e():\n    pass\n",
     T + "import pytest\n@pytest.mark.skipif(not torch.npu.is_available(), reason='needs cuda')\ndef test_e():\n    pass\n"),
]


@pytest.mark.parametrize("src,expected", REWRITES)
def test_rewrites(src, expected):
    assert after(src) == expected


@pytest.mark.parametrize("src,fragment", [
    (L + "t = L.Trainer(accelerator='gpu', devices=2)\n", "accelerator='gpu'"),
    (L + "t = L.Fabric(accelerator='cuda')\n", "accelerator='cuda'"),
    (L + "t = L.Trainer(accelerator='gpu' if on_gpu else 'cpu')\n", "accelerator='gpu'"),
    ("import pytorch_lightning as pl\nt = pl.Trainer(gpus=2)\n", "gpus="),
    ("from lightning.pytorch.accelerators import CUDAAccelerator\na = CUDAAccelerator()\n", "CUDAAccelerator"),
    # Lightning 1.x (latent-diffusion's main.py): from the command line, from a dict
    ("import pytorch_lightning as pl\nt = pl.Trainer.from_argparse_args(opt, **kw)\n", "--gpus"),
    ("import pytorch_lightning as pl\ncfg['accelerator'] = 'ddp'\n", "'ddp'"),
    ("import pytorch_lightning as pl\ncfg['accelerator'] = 'gpu'\n", "'gpu'"),
    ("import pytorch_lightning as pl\ncfg['gpus'] = '0,'\n", "`gpus`"),
])
def test_lightning_cuda_choices_are_reported_with_the_route(src, fragment):
    outcome = migrate(src)
    assert outcome.new_text is None
    reports = [d for d in outcome.diagnostics if d.code == "NPU520"]
    assert len(reports) == 1 and fragment in reports[0].message and "Accelerator" in reports[0].message


def test_mock_of_a_name_torch_npu_lacks_is_reported():
    outcome = migrate(T + "def test_f(monkeypatch):\n    monkeypatch.setattr('torch.cuda.jiterator', None)\n")
    assert outcome.new_text is None
    assert [d.code for d in outcome.diagnostics] == ["NPU530"]


UNTOUCHED = [
    L + "t = L.Trainer(accelerator='cpu', devices=1)\n",
    "t = Trainer(accelerator='gpu')\n",  # not Lightning's Trainer (nothing imported)
    "t = Trainer.from_argparse_args(opt)\ncfg['gpus'] = 2\n",  # no Lightning imported
    "import pytorch_lightning as pl\nif cfg['gpus'] == 2:\n    pass\ncfg['accelerator'] = 'cpu'\n",
    "import pytorch_lightning as pl\ncfg['gpus'] = 0\ncfg['gpus'] = None\n",  # the CPU
    "from transformers import TrainingArguments\na = TrainingArguments(output_dir='o', no_cuda=True, use_cpu=False)\n",
    "def no_cuda(no_cuda=True):\n    return no_cuda\n",
    T + "setattr(torch.cuda, 'x', 1)\n",  # builtin setattr is no test double
    MOCK + "mock.patch('os.getcwd')\n",
    "from lightning.pytorch.strategies import DDPStrategy\ns = DDPStrategy(process_group_backend='gloo')\n",
]


@pytest.mark.parametrize("src", UNTOUCHED)
def test_untouched(src):
    outcome = rule_cases.migrate(src, ["NPU520", "NPU521", "NPU522", "NPU530"])
    assert outcome.new_text is None and outcome.diagnostics == []
