"""Every newline style round-trips byte for byte, CR-only included (issue 13, defect 5).

LibCST 1.9's parser drops the final `\\r` of a module that ends in a lone CR
(`parse_module("x = 1\\r").code == "x = 1"`); the engine parses statement by statement, so every
statement's piece ends that way, and `x = torch.ones(2).cuda()\\r[0]` became `...npu()[0]`."""

import pytest

from npu_migrate.apply.engine import migrate_source


def test_cr_only_statement_followed_by_a_subscript_keeps_its_newline():
    assert migrate_source("x = torch.ones(2).cuda()\r[0]", select=["NPU101"],
                          ignore=["NPU100"]) == "x = torch.ones(2).npu()\r[0]"


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("final", [True, False])
def test_newline_style_round_trips(newline, final):
    lines = ["import torch", "", "", "def f(x):", "    y = x.cuda()", "    return y", "",
             "z = f(torch.ones(2)).cuda()", "[0]", "# tail"]
    text = newline.join(lines) + (newline if final else "")
    expected = text.replace(".cuda()", ".npu()").replace(
        "import torch" + newline, "import torch" + newline + "import torch_npu  # noqa: F401" + newline, 1)
    assert migrate_source(text, select=["NPU100", "NPU101"]) == expected


def test_untouched_cr_pieces_are_verbatim():
    text = "import os\rx = 1\r\rdef g():\r    return os.getcwd()\r"
    assert migrate_source(text) == text
