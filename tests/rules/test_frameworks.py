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


# The before/after examples are the CASES of NPU103, NPU120 and NPU520-NPU530 (in the rule modules: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


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


