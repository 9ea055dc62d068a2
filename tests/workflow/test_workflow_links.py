"""Every link the documentation gives and every pointer the tool prints resolves (issue 29):
relative links in README.md, bench/README.md and docs/ name files of the repository (and, with an
anchor, a heading of that file); SARIF `helpUri`s name pages that exist; every code the tool can
print has the page that `(npu-migrate rules CODE)` promises; the `docs/...` paths and data files
named in messages exist; rule pages cite no fact sheet the project does not ship, show no
`{placeholder}` and name no internal module."""

from __future__ import annotations

import ast
import json
import re
import urllib.parse
from pathlib import Path

import pytest

from workflow_helpers import REPO, apply, cli, write

DOCS = sorted([REPO / "README.md", REPO / "bench" / "README.md", *(REPO / "docs").rglob("*.md")])
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
# addresses of other projects that the docs give; ours are never among them (no release of
# npu-migrate is published, so no address of it could be checked)
EXTERNAL = {"https://download.pytorch.org/whl/cpu", "https://github.com/pytorch/examples", "https://pre-commit.com"}
# the reference notes under ../shared: not part of the project, so never cited to its users
FACT_SHEETS = ("torch_npu_api.md", "memory_snapshot.md", "emulated_device.md", "shared/")


def prose(text: str) -> str:
    """The text outside fenced and inline code."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.DOTALL))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.MULTILINE)}


def links(page: Path) -> list[str]:
    return LINK.findall(prose(page.read_text(encoding="utf-8")))


@pytest.mark.parametrize("page", DOCS, ids=[str(p.relative_to(REPO)) for p in DOCS])
def test_every_link_of_the_docs_resolves(page):
    for target in links(page):
        if re.match(r"[a-z]+:", target):
            assert target in EXTERNAL, f"{page.name}: {target}: an address nobody checked"
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / urllib.parse.unquote(path)).resolve() if path else page
        assert resolved.exists(), f"{page.relative_to(REPO)}: {target}: no such file"
        assert REPO in resolved.parents or resolved == REPO, f"{page.name}: {target} leaves the repository"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{page.relative_to(REPO)}: {target}: no such heading"


def test_external_addresses_are_the_known_ones():
    found = {m.group(0).rstrip(".,;:") for page in DOCS
             for m in re.finditer(r"https?://[^\s)`>\]\"']+", page.read_text(encoding="utf-8"))}
    unknown = {url for url in found - EXTERNAL if not url.startswith("https://download.pytorch.org/whl/cu")}
    assert unknown <= {"https://pypi.nvidia.com"}  # CUDA wheel indexes are named as what NPU315 reports


RULE_PAGES = sorted((REPO / "docs" / "rules").glob("*.md"))


@pytest.mark.parametrize("page", RULE_PAGES, ids=[p.stem for p in RULE_PAGES])
def test_rule_pages_cite_what_ships_and_show_no_placeholders(page):
    text = page.read_text(encoding="utf-8")
    outside_code = prose(text)
    assert not [s for s in FACT_SHEETS if s in text], "cites a reference note the project does not ship"
    assert not re.findall(r"\{[A-Za-z_]\w*\}", outside_code), "a template placeholder"
    for inline in re.findall(r"`([^`\n]*)`", re.sub(r"```.*?```", "", text, flags=re.DOTALL)):
        assert not re.fullmatch(r"\{[A-Za-z_]\w*\}", inline), f"a template placeholder: {inline}"
    # internal modules are not a user's business; the data files a page names ship in the package
    assert not re.findall(r"\b(?:codemods|npu_migrate)[./][\w./]*\.py\b|\bcodemods\.\w+\.\w+", text)
    for shipped in re.findall(r"\b((?:codemods|npu_migrate)/[\w/]+\.(?:json|tsv))\b", text):
        assert (REPO / shipped).is_file(), f"names {shipped}, which does not exist"


def string_constants(path: Path) -> list[str]:
    """The string constants of a module that are not docstrings (what it may print)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_paths_and_notes_named_in_messages_exist():
    modules = sorted([*(REPO / "codemods").rglob("*.py"), *(REPO / "npu_migrate").rglob("*.py")])
    for module in modules:
        for text in string_constants(module):
            for named in re.findall(r"\bdocs/[\w/.-]+\.md\b", text):
                assert (REPO / named).is_file(), f"{module.relative_to(REPO)} names {named}"
            assert not [s for s in FACT_SHEETS[:3] if s in text], f"{module.relative_to(REPO)} cites a reference note"


def every_code() -> list[str]:
    from codemods.api.registry import all_rules
    from npu_migrate.commands.docgen import wing_pages

    return sorted({r.code for r in all_rules()} | set(wing_pages()))


def test_every_code_the_tool_can_print_has_its_page():
    """`(npu-migrate rules CODE)` ends every diagnostic line: it must print a page for each."""
    from npu_migrate.commands.rules import code_page, doc_page

    from codemods.api.registry import all_rules

    rules = {r.code: r for r in all_rules()}
    for code in every_code():
        page = doc_page(rules[code]) if code in rules else code_page(code)
        assert page and page.startswith(f"# {code}"), code
        assert (REPO / "docs" / "rules" / f"{code}.md").read_text(encoding="utf-8") == page


def test_sarif_help_uris_of_apply_and_analyze_name_existing_pages(tmp_path, monkeypatch):
    write(tmp_path / "a.py", "import os\nimport torch\nos.environ['CUDA_VISIBLE_DEVICES'] = '1,0'\n"
                             "x = torch.ones(2).cuda()\nfor b in loader:\n    loss = model(b)\n    loss.item()\n")
    logs = [json.loads(apply("--isolated", "--no-cache", "--check", "--output-format", "sarif", "a.py",
                             cwd=tmp_path, monkeypatch=monkeypatch).stdout)]
    analysed = cli("analyze", "--isolated", "--format", "sarif", "a.py", cwd=tmp_path)
    assert analysed.returncode == 0, analysed.stderr
    logs.append(json.loads(analysed.stdout))
    for log in logs:
        rules = log["runs"][0]["tool"]["driver"]["rules"]
        assert rules and all("helpUri" in r for r in rules)
        for rule in rules:
            uri = urllib.parse.urlparse(rule["helpUri"])
            assert uri.scheme == "file" and Path(urllib.parse.unquote(uri.path)).is_file(), rule["helpUri"]
