"""The engine: prefilter, chunked single parse, suppression, import insertion, re-parse."""

import ast

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from codemods.api.positions import node_positions
from codemods.api.prefilter import Prefilter
from codemods.api.registry import RuleError, all_rules, select_rules
from codemods.api.rule import Fix, Rule
from codemods.model.imports import split_lines
from npu_migrate.apply import engine as engine_module
from npu_migrate.apply.engine import PieceMatch, RuleSet, migrate_source, migrate_text, plan_pieces

CORE = ["NPU100", "NPU101", "NPU102"]


def run(text, select=CORE, path="x.py"):
    return migrate_text(text, path, RuleSet(select_rules(all_rules(), select)))


def test_file_without_cuda_is_never_parsed():
    outcome = run("import torch\nx = torch.zeros(3)\n")
    assert outcome.new_text is None and not outcome.parsed and not outcome.edits


def test_only_matching_chunks_are_rewritten_rest_verbatim():
    text = ("import torch\n\n\ndef a(x):\n    return x.cuda()   # odd  spacing kept\n\n\n"
            "def b(y):\n    return y  +  1\n")
    outcome = run(text)
    assert outcome.new_text == text.replace("x.cuda()", "x.npu()").replace(
        "import torch\n", "import torch\nimport torch_npu  # noqa: F401\n")
    assert [(e.code, e.line, e.col) for e in outcome.edits] == [("NPU100", 2, 1), ("NPU101", 5, 12)]


def test_pieces_cover_the_text_and_nest_into_matching_defs():
    text = ('"""doc"""\n# c\n@dec\n\n@dec2\ndef f():\n    pass\nx = 1; y = 2\n'
            "class A:\n    z = 3\n\n    def g(self, t):\n        a = 1\n        return t.cuda()\n# tail\n")
    lines = split_lines(text)
    match = PieceMatch(lines, Prefilter(r"\.cuda"), lines, None)
    pieces = plan_pieces(lines, ast.parse(text).body, 1, len(lines) + 1, "", match)
    assert "".join("".join(lines[p.start - 1:p.end - 1]) for p in pieces) == text
    assert [(p.start, p.end, p.indent, p.parse) for p in pieces] == [
        (1, 3, "", False), (3, 8, "", False), (8, 9, "", False),
        (9, 10, "", False), (10, 12, "    ", False),
        (12, 13, "    ", False), (13, 14, "        ", False), (14, 16, "        ", True),
    ]


NESTED_CASES = [
    # a method inside a class: only the statement is parsed, indentation restored
    ("import torch\n\nclass A:\n    x = 1\n\n    def f(self, t):\n        y = 2\n        return t.cuda()  # c\n",
     "import torch\nimport torch_npu  # noqa: F401\n\nclass A:\n    x = 1\n\n    def f(self, t):\n"
     "        y = 2\n        return t.npu()  # c\n"),
    # a comment at column 0 and a string with lines further left inside the body
    ('def f(t):\n    s = """doc\nleft\n  mid\n"""\n# col0\n    return t.cuda()\n',
     'def f(t):\n    s = """doc\nleft\n  mid\n"""\n# col0\n    return t.npu()\n'),
    # tabs
    ("def f(t):\n\ta = 1\n\treturn t.cuda()\n", "def f(t):\n\ta = 1\n\treturn t.npu()\n"),
    # whitespace-only lines inside a string, and a call spread over lines
    ("def f(t):\n    s = '''a\n    \n    b'''\n    return t.cuda(\n        0)\n",
     "def f(t):\n    s = '''a\n    \n    b'''\n    return t.npu(\n        0)\n"),
    # a string rewritten inside a nested statement keeps lines further left
    ("def f(t):\n    a = 1\n    return (t.cuda(), '''x\ny''')\n",
     "def f(t):\n    a = 1\n    return (t.npu(), '''x\ny''')\n"),
]


@pytest.mark.parametrize("before, after", NESTED_CASES)
def test_nested_pieces_round_trip(before, after):
    if "import torch" not in before:
        after = "import torch_npu  # noqa: F401\n" + after
    assert migrate_source(before, select=CORE) == after


def test_nested_positions_are_file_positions():
    text = "class A:\n    a = 1\n\n    def f(self, t):\n        b = 2\n        return t.cuda()\n"
    outcome = run(text, select=["NPU101"])
    assert [(e.line, e.col) for e in outcome.edits if e.code == "NPU101"] == [(6, 16)]



def test_form_feed_does_not_shift_chunk_lines():
    text = "import torch\n\x0c\ndef f(x):\n    return x.cuda()\n"
    outcome = run(text)
    assert outcome.new_text.endswith("return x.npu()\n")
    assert outcome.edits[-1].line == 4  # positions refer to the original text


def test_syntax_error_is_reported_and_file_left_alone():
    outcome = run("x = y.cuda(\n")
    assert outcome.new_text is None
    assert outcome.error.startswith("x.py:1:")
    assert "syntax error" in outcome.error


def test_line_suppression_drops_fix_and_skip_file_skips_everything():
    text = ("import torch\na = x.cuda()  # npu-migrate: ignore[NPU101]\nb = x.cuda()  # npu-migrate: ignore\n"
            "c = x.cuda()\n")
    outcome = run(text)
    assert outcome.new_text.splitlines()[2:] == text.splitlines()[1:3] + ["c = x.npu()"]
    assert [e.line for e in outcome.edits if e.code == "NPU101"] == [4]
    assert run("# npu-migrate: skip-file\n" + text).new_text is None


def test_suppressing_other_code_does_not_suppress():
    outcome = run("a = x.cuda()  # npu-migrate: ignore[NPU102]\n")
    assert "x.npu()" in outcome.new_text


def test_import_added_once_and_idempotent():
    text = "import os\nimport torch as th\n\ndef f(m):\n    return m.cuda(), m.is_cuda\n"
    once = migrate_source(text, select=CORE)
    assert once.count("import torch_npu") == 1
    assert once.splitlines()[2] == "import torch_npu  # noqa: F401"
    assert migrate_source(once, select=CORE) == once


def test_import_goes_before_first_torch_import_when_it_is_not_plain_import_torch():
    text = "from torch import nn\nx = y.cuda()\n"
    assert migrate_source(text, select=CORE) == "import torch_npu  # noqa: F401\nfrom torch import nn\nx = y.npu()\n"


def test_import_after_docstring_and_future_when_no_torch_import():
    text = '"""Doc."""\nfrom __future__ import annotations\n\nx = y.cuda()\n'
    assert migrate_source(text, select=CORE).splitlines()[2] == "import torch_npu  # noqa: F401"


def test_existing_torch_npu_import_is_respected():
    text = "import torch\nimport torch_npu\nx = y.cuda()\n"
    assert migrate_source(text, select=CORE) == "import torch\nimport torch_npu\nx = y.npu()\n"


def test_ignoring_npu100_adds_no_import():
    assert migrate_source("x = y.cuda()\n", select=["NPU101"], ignore=["NPU100"]) == "x = y.npu()\n"


def test_selecting_a_rule_whose_fix_needs_torch_npu_adds_the_import():
    assert migrate_source("x = y.cuda()\n", select=["NPU101"]) == "import torch_npu  # noqa: F401\nx = y.npu()\n"


class _BrokenRule(Rule):
    code = "NPX999"
    name = "broken-for-test"
    summary = "produces invalid code"
    fix = Fix.SAFE
    prefilter = r"boom"

    def leave_Name(self, original_node, updated_node):
        if updated_node.value == "boom":
            self.fixed(original_node, "boom")
            return updated_node.with_changes(value="lambda")
        return updated_node


def test_rewrite_that_does_not_parse_is_never_returned():
    outcome = migrate_text("boom = 1\n", "b.py", RuleSet([_BrokenRule]))
    assert outcome.new_text is None and outcome.edits == []
    assert "would not parse" in outcome.error and outcome.error.startswith("b.py:")


def test_unknown_selector_is_an_error():
    with pytest.raises(RuleError, match="NPU9"):
        select_rules(all_rules(), ["NPU9"])


@pytest.mark.parametrize("source", [
    "import torch\n\nclass A:\n    def f(self, x):\n        return [x.cuda(0), (y.cuda()\n  )]\n",
    "x = f(a)[1].cuda(non_blocking=True)\nif t.is_cuda: pass\n",
])
def test_positions_match_libcst_position_provider(source):
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    expected = wrapper.resolve(PositionProvider)
    nodes = [n for n in expected if isinstance(n, (cst.Call, cst.Attribute, cst.Name))]
    ours = node_positions(module, nodes)
    for node in nodes:
        start = expected[node].start
        assert ours[id(node)] == (start.line, start.column + 1)


class _CrashingRule(_BrokenRule):
    code = "NPX998"
    name = "crashing-for-test"

    def leave_Name(self, original_node, updated_node):
        raise RuntimeError("rule bug")


def test_a_crashing_rule_fails_the_file_not_the_run():
    outcome = migrate_text("boom = 1\n", "c.py", RuleSet([_CrashingRule]))
    assert outcome.new_text is None
    assert outcome.error.startswith("c.py:0:0: internal error") and "rule NPX998 crashed" in outcome.error
    assert "rule bug" in outcome.error


def test_parsed_but_unchanged_nested_piece_keeps_its_indentation():
    # the second statement matches the prefilter (".cuda" in a string) but is not rewritten
    text = "def f(t):\n    a = 1\n    log('.cuda here')\n    return t.cuda()\n"
    assert migrate_source(text, select=["NPU101"], ignore=["NPU100"]) == text.replace("t.cuda()", "t.npu()")


class _SynchronizeRule(Rule):
    """A test rule keyed on the qualified name, with a prefilter that only an import shows."""

    code = "NPX997"
    name = "sync-for-test"
    summary = "flags torch.cuda.synchronize calls"
    fix = Fix.NONE
    prefilter = r"\bcuda\b"

    def visit_Call(self, node):
        if self.resolve(node.func) == "torch.cuda.synchronize":
            self.report(node, "sync")


@pytest.fixture
def parsed(monkeypatch) -> list[str]:
    """The pieces the engine hands to LibCST during the test, in order."""
    pieces: list[str] = []
    original = engine_module._run_piece

    def run_piece(piece, chunk, *args):  # type: ignore[no-untyped-def]
        pieces.append(chunk)
        return original(piece, chunk, *args)

    monkeypatch.setattr(engine_module, "_run_piece", run_piece)
    return pieces


def test_a_nested_piece_a_rule_drops_a_line_from_keeps_its_other_lines_indentation(parsed):
    """NPU161 removes a no-op flag from a function body: the piece's other lines take back their
    own indentation (a string and a comment further left included) without migrating the file
    a second time as one piece."""
    text = ("import torch\n\n\ndef f(t):\n    a = 1\n    torch.backends.cudnn.benchmark = True\n"
            "    s = '''x\ny'''\n# a comment further left\n    return t.cuda()\n")
    result = migrate_source(text, select=["NPU101", "NPU161"], ignore=["NPU100"])
    assert result == text.replace("    torch.backends.cudnn.benchmark = True\n", "").replace("t.cuda()", "t.npu()")
    assert parsed and all("def f" not in chunk for chunk in parsed), parsed


def test_aliased_names_make_their_pieces_parsed():
    text = ("from torch.cuda import synchronize as sync\n\n\ndef f():\n    a = 1\n    sync()\n\n\n"
            "class A:\n    b = 2\n\n    def g(self):\n        c = 3\n        sync()\n")
    outcome = migrate_text(text, "s.py", RuleSet([_SynchronizeRule]))
    assert [(d.line, d.col) for d in outcome.diagnostics] == [(6, 5), (14, 9)]


def test_statement_starting_on_the_line_another_ends_stays_in_its_piece():
    text = "import torch\nx = (\n    1); y = t.cuda()\n"
    assert migrate_source(text, select=CORE).endswith("    1); y = t.npu()\n")


def test_attribute_and_subscript_assignments_do_not_hide_imports():
    from codemods.model.facts import FileFacts

    facts = FileFacts.from_tree(ast.parse(
        "import os\nimport torch\ntorch.backends.cudnn.benchmark = True\nos.environ['A'] = '1'\n"
        "a, (b, *c) = 1, (2, 3)\nDEVICE = 'cuda'\n"))
    assert facts.aliases == {"os": "os", "torch": "torch"}
    assert facts.constants == {"DEVICE": "cuda"}


CODE_ONLY = (
    'def helper(x):\n'
    '    """Moves `x` to the GPU: see torch.cuda.synchronize() and x.cuda() in the CUDA docs, which\n'
    '    explain streams."""\n'
    '    return x + 1\n'
    '\n'
    '\n'
    'def other(y):\n'
    '    message = "a long help text that names torch.cuda.synchronize() and y.cuda() as its examples"\n'
    '    return y\n'
    '\n'
    '\n'
    'def real(z):\n'
    '    print(f"on {z.cuda()} with a long f-string whose code part must still be migrated, always")\n'
    '    return z.cuda()\n'
)


def test_statements_whose_only_cuda_is_in_long_strings_are_not_parsed_for_code_rules(parsed):
    """A docstring or a help text that names CUDA APIs does not make the engine parse its
    statement for the rules that act on code alone; f-strings hold code and still count."""
    from codemods.api.registry import all_rules, select_rules

    ruleset = RuleSet(select_rules(all_rules(), (), (), ()), {})
    outcome = migrate_text(CODE_ONLY, "lib.py", ruleset)
    assert outcome.new_text is not None
    assert "{z.npu()}" in outcome.new_text and "return z.npu()" in outcome.new_text
    assert "torch.cuda.synchronize() and x.cuda()" in outcome.new_text  # text stays text
    assert "torch.cuda.synchronize() and y.cuda()" in outcome.new_text
    assert parsed and all("def helper" not in c and "message =" not in c for c in parsed), parsed


def test_comments_and_long_strings_are_blanked_in_place():
    from codemods.model.filemodel import FileModel
    from codemods.model.astnodes import LONG_STRING

    text = ('s = "short cuda # not a comment"  # a cuda comment\n'
            f't = "{"é" * LONG_STRING}cuda"\n'
            f'u = """doc\ncuda{"-" * LONG_STRING}\n"""  # cuda\n'
            f'v = f"{{x.cuda()}}{"w" * LONG_STRING}"\n'
            'w = b"#cuda" + x.cuda()  # cuda\n')
    lines = split_lines(text)
    blanked = FileModel("f.py", text, ast.parse(text)).code_lines(lines)
    assert [len(a) for a in blanked] == [len(a) for a in lines]
    assert blanked[0] == 's = "short cuda # not a comment"' + " " * len("  # a cuda comment") + "\n"
    assert blanked[1].startswith("t = ") and "cuda" not in blanked[1] and blanked[1].endswith("\n")
    assert blanked[2].startswith("u = ") and "cuda" not in blanked[3] and "cuda" not in blanked[4]
    assert blanked[5] == lines[5]  # an f-string holds code
    assert blanked[6] == 'w = b"#cuda" + x.cuda()' + " " * len("  # cuda") + "\n"
