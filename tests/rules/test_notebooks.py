"""Notebooks: code cells migrated as one Python text; magics, outputs, metadata and the JSON
layout kept byte for byte outside changed cells; diagnostics at `cell N`, cell-relative lines;
`--diff` hunks per cell."""

import json

import pytest

from codemods.api.registry import all_rules, select_rules
from npu_migrate.apply.engine import RuleSet, migrate_text
from npu_migrate.core.diffs import unified_diff
from npu_migrate.core.notebooks import NotebookError, cell_diff, extract, read


def notebook(cells, indent=1, ascii_only=True, source_as_list=True):
    def cell(kind, source, outputs=()):
        text = source if not source_as_list else source.splitlines(keepends=True)
        entry = {"cell_type": kind, "metadata": {"tags": ["x"]}, "source": text}
        if kind == "code":
            entry.update(execution_count=1, outputs=list(outputs))
        return entry

    data = {"cells": [cell(*c) for c in cells], "metadata": {"kernelspec": {"name": "python3"}},
            "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(data, indent=indent, ensure_ascii=ascii_only) + "\n"


OUTPUT = {"output_type": "stream", "name": "stdout", "text": ["cuda:0 ok\n"]}
CELLS = [
    ("markdown", "# Moves the model with `.cuda()`\n"),
    ("code", "%matplotlib inline\nimport torch\n!nvidia-smi\n", [OUTPUT]),
    ("code", "model = torch.nn.Linear(2, 2)\nmodel.cuda()\nprint('on cuda')", [OUTPUT]),
    ("code", "%%bash\necho cuda\n"),
    ("code", "x = 1\ny = x + 1"),
]


def run(text, path="nb.ipynb"):
    outcome = migrate_text(text, path, RuleSet(select_rules(all_rules())))
    assert outcome.error is None, outcome.error
    return outcome


@pytest.mark.parametrize("indent,ascii_only", [(1, True), (2, False), (None, True)])
def test_only_changed_cells_change_byte_for_byte(indent, ascii_only):
    text = notebook(CELLS, indent=indent, ascii_only=ascii_only)
    outcome = run(text)
    new = outcome.new_text
    assert new is not None
    old_data, new_data = json.loads(text), json.loads(new)
    assert "".join(new_data["cells"][2]["source"]) == "model = torch.nn.Linear(2, 2)\nmodel.npu()\nprint('on cuda')"
    for index in (0, 3, 4):  # markdown, a cell magic, a cell with nothing to do
        assert new_data["cells"][index] == old_data["cells"][index]
    assert new_data["cells"][1]["source"][0] == "%matplotlib inline\n"  # magics verbatim
    assert "!nvidia-smi\n" in new_data["cells"][1]["source"]
    assert new_data["cells"][2]["outputs"] == [OUTPUT] and new_data["metadata"] == old_data["metadata"]
    # outside the changed `source` values the text is identical
    assert without_sources(text, {1, 2}) == without_sources(new, {1, 2})


def without_sources(text, cells):
    """The notebook text with the `source` values of `cells` cut out."""
    _, spans = read(text)
    out, at = [], 0
    for index in sorted(cells):
        start, end = spans[index]
        out.append(text[at:start])
        at = end
    return "".join(out) + text[at:]


def test_source_as_one_string_is_kept_a_string():
    text = notebook(CELLS, source_as_list=False)
    new = json.loads(run(text).new_text)
    assert isinstance(new["cells"][2]["source"], str) and "model.npu()" in new["cells"][2]["source"]


def test_diagnostics_and_edits_name_the_cell_and_the_line_in_it():
    text = notebook([("code", "import torch\n"), ("code", "x = 1\ny = torch.cuda.foo_bar()\n")])
    outcome = run(text)
    [diagnostic] = [d for d in outcome.diagnostics if d.code == "NPU599"]
    assert diagnostic.message.startswith("cell 2:") and diagnostic.line == 2 and diagnostic.path == "nb.ipynb"


def test_shell_lines_of_cells_go_through_the_shell_rules_report_only():
    """latent-diffusion's notebook runs `!nvidia-smi`: the Python rules never see an IPython line,
    so the shell rules look at it; a rewrite they would make (a CUDA variable) is reported, and
    the line comes back to the notebook as it was."""
    text = notebook([("code", "import torch\n"),
                     ("code", "x = 1\n  !nvidia-smi\n!CUDA_VISIBLE_DEVICES=0 python train.py\n!ls\n")])
    outcome = run(text)
    found = [(d.code, d.line, d.col) for d in outcome.diagnostics]
    assert ("NPU257", 2, 4) in found and ("NPU251", 3, 2) in found and len(found) == 2
    assert all(d.message.startswith("cell 2:") for d in outcome.diagnostics)
    assert "edit it by hand" in next(d.message for d in outcome.diagnostics if d.code == "NPU251")
    assert outcome.new_text is None


def test_imports_in_one_cell_resolve_names_in_another():
    text = notebook([("code", "import torch as th\n"), ("code", "th.cuda.synchronize()\n")])
    assert "th.npu.synchronize()" in "".join(json.loads(run(text).new_text)["cells"][1]["source"])


def test_diff_shows_cell_relative_hunks():
    text = notebook(CELLS)
    new = run(text).new_text
    diff = unified_diff(text, new, "nb.ipynb")
    assert "--- a/nb.ipynb (cell 3)" in diff and "-model.cuda()" in diff and "+model.npu()" in diff
    assert '"source"' not in diff  # no JSON in the hunks
    assert cell_diff(text, text, "nb.ipynb") == ""


def test_unparsable_cell_is_left_out_and_the_rest_migrated():
    text = notebook([("code", "import torch\n"), ("code", "x = !ls\nx.cuda()\n"), ("code", "y.cuda()\n")])
    new = json.loads(run(text).new_text)
    assert new["cells"][1]["source"] == ["x = !ls\n", "x.cuda()\n"]
    assert new["cells"][2]["source"] == ["y.npu()\n"]


@pytest.mark.parametrize("bad", ["", "[1, 2]", "{\"cells\": 3}", "{\"cells\": []} trailing", "{'cells': []}"])
def test_bad_notebooks_are_one_clear_error(bad):
    outcome = migrate_text(bad, "bad.ipynb", RuleSet(select_rules(all_rules())))
    assert outcome.error is not None and outcome.error.startswith("bad.ipynb:0:0:") and outcome.new_text is None
    with pytest.raises(NotebookError):
        read(bad)


def test_notebook_without_code_is_untouched():
    outcome = run(notebook([("markdown", "cuda\n")]))
    assert outcome.new_text is None and outcome.diagnostics == []


def test_extract_keeps_line_counts_of_cells():
    text = notebook(CELLS)
    extracted = extract(text)
    assert [c.index for c in extracted.cells] == [1, 2, 4]
    line = extracted.text.splitlines().index("model.cuda()") + 1
    assert extracted.locate(line) == (3, 2)


def test_a_notebook_with_large_outputs_is_not_refused_for_its_size(tmp_path):
    """The per-file size limit guards LibCST; a notebook's outputs never reach it."""
    from npu_migrate.apply.runner import MAX_FILE_BYTES, RunPlan, run

    big = {"output_type": "stream", "name": "stdout", "text": ["x" * (MAX_FILE_BYTES + 1024)]}
    path = tmp_path / "big.ipynb"
    path.write_text(notebook([("code", "import torch\nx = torch.ones(1).cuda()\n", [big])]))
    codes = [rule.code for rule in select_rules(all_rules())]
    [result] = list(run([str(path)], RunPlan(codes), jobs=1))
    assert result.outcome.error is None and result.outcome.changed


def test_torch_npu_import_comes_before_an_earlier_cells_use():
    """segment-anything's onnx notebook: an early cell imports torch under `if using_colab:` and
    calls `torch.cuda.is_available()`; the module-level `import torch` is in a later cell. The
    import goes into the first code cell, above that use, not after the later `import torch`."""
    cells = [
        ("code", "using_colab = False\n"),
        ("code", "if using_colab:\n    import torch\n    print('CUDA is available:', torch.cuda.is_available())\n"),
        ("code", "import torch\nimport numpy as np\n"),
        ("code", "sam.to(device='cuda')\n"),
    ]
    new = json.loads(run(notebook(cells)).new_text)
    sources = ["".join(cell["source"]) for cell in new["cells"]]
    assert sources[0] == "import torch_npu  # noqa: F401\nusing_colab = False\n"
    assert "torch.npu.is_available()" in sources[1] and "'CUDA is available:'" in sources[1]
    assert sources[2] == "import torch\nimport numpy as np\n"
