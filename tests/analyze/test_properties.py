"""Property: the scanner accepts any syntactically valid Python without raising, and every
location it reports lies inside the file."""
import ast

import hypothesmith
from hypothesis import HealthCheck, given, settings

from codemods.model.facts import FileFacts
from npu_migrate.analyze.scan import Scanner


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(hypothesmith.from_grammar())
def test_scanner_never_raises(source):
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return  # the grammar is wider than what this Python accepts
    result = Scanner("g.py", source, tree, FileFacts.from_tree(tree)).run()
    lines = source.count("\n") + 1
    for line in [s.line for s in result.sites] + [d.line for d in result.findings] + [at for _, at, _ in result.ops]:
        assert 1 <= line <= lines
