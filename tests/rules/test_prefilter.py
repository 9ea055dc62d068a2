"""Prefilters gated by the words every match must contain: the same answer as the regex, on
every rule's prefilter."""

from __future__ import annotations

import random
import re

import pytest

from codemods.api import prefilter as prefilter_module
from codemods.api.prefilter import Prefilter, TextWords, required_words
from codemods.api.registry import all_rules


@pytest.mark.parametrize(("pattern", "words"), [
    (r"cuda", {"cuda"}),
    (r"\bamp\b", {"amp"}),
    (r"\.(?:(?<=cuda\.)nvtx\b|(?<=nvtx\.)mark\b|(?<=nvtx\.)range\b)", {"cuda.", "nvtx."}),
    (r"(?!)", set()),  # matches nowhere
    (r"x(?:abc)?", None),  # an optional part says nothing; "x" is too short
    (r"(?:abcd)+y", {"abcd"}),
    (r"(?i)cuda", None),  # case-insensitive: no plain word to look for
    (r"gpu(?i:cuda)", {"gpu"}),
    (r"import\s+x", None),  # a keyword is in every file; "x" is too short
    (r"\.(?:major|minor)\b", {"ajor", "inor"}),  # `re` factors out the shared `m`
])
def test_required_words(pattern: str, words: set[str] | None) -> None:
    found = required_words(pattern)
    assert (set(found) if found is not None else None) == words


def _texts() -> list[str]:
    """Rule cases, plus every gate word dropped into noise with and without what the regex wants
    around it: the places where a wrong gate would say no to a text the regex matches."""
    texts = []
    for rule in all_rules():
        for case in getattr(__import__(rule.__module__, fromlist=["CASES"]), "CASES", []):
            texts.append(case.source)
    rng = random.Random(7)
    words = sorted({w for rule in all_rules() if rule.prefilter
                    for gate, _ in Prefilter(rule.prefilter).parts if gate for w in gate})
    for word in words:
        for around in ("{} ", "x.{}(", "torch.cuda.{}", "'{}'", "import {}", "from torch.cuda import {}\n"):
            texts.append("noise = 1\n" + around.format(word) + f"\n# {rng.random()}\n")
    return texts


def test_every_rule_prefilter_agrees_with_its_regex() -> None:
    texts = _texts()
    assert len(texts) > 500
    checked = 0
    for pattern in sorted({rule.prefilter for rule in all_rules() if rule.prefilter}):
        prefilter, regex = Prefilter(pattern), re.compile(pattern)
        for text in texts:
            assert prefilter.search(text) == (regex.search(text) is not None), (pattern, text)
            checked += 1
    assert checked > 20_000


def test_rules_sharing_word_lookups_over_one_text_agree() -> None:
    """The engine looks each gate word up once per text, for all prefilters together."""
    prefilters = [(Prefilter(p), re.compile(p)) for p in sorted({r.prefilter for r in all_rules() if r.prefilter})]
    for text in _texts()[::7]:
        words: dict[str, bool] = {}
        assert [p.search(text, words) for p, _ in prefilters] == [r.search(text) is not None for _, r in prefilters]


def test_a_text_indexed_by_its_identifiers_gives_the_same_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """`TextWords` answers a large text from its distinct identifiers (here every text is taken
    as large): every rule's prefilter must still agree with its regex, words with punctuation
    (`cuda.`), inside longer identifiers (`clamp` holds `amp`), whole identifiers (`\\bamp\\b`)
    and non-ASCII ones included."""
    monkeypatch.setattr(prefilter_module, "_INDEXED_SIZE", 0)
    prefilters = [(Prefilter(p), re.compile(p)) for p in sorted({r.prefilter for r in all_rules() if r.prefilter})]
    padding = "value = clamp(example, ünïcode_1)\n"
    checked = 0
    for text in _texts()[::3] + ["x = amp.autocast()\n", "ampère = 1\n", "torch.cuda .synchronize()\n"]:
        for large in (padding + text, text + padding):
            words = TextWords(large)
            assert words.indexed
            found = [p.search(large, words) for p, _ in prefilters]
            assert found == [r.search(large) is not None for _, r in prefilters], text
            checked += 1
    assert checked > 300


def test_top_level_cut_keeps_character_classes_and_groups_whole() -> None:
    prefilter = Prefilter(r"a[|\]]b|(c|d)e|[]|]f")
    assert [regex.pattern for _, regex in prefilter.parts] == [r"a[|\]]b", "(c|d)e", "[]|]f"]
    for text in ("a|b", "a]b", "ce", "de", "|f", "]f", "ab", "e", "f"):
        assert prefilter.search(text) == bool(re.search(prefilter.pattern, text))


def test_union_matches_where_any_does() -> None:
    joined = Prefilter.union([Prefilter("autocast"), Prefilter(r"\bamp\b")])
    assert joined is not None
    assert joined.search("with amp:") and joined.search("autocast()") and not joined.search("example")
    assert Prefilter.union([Prefilter("x"), None]) is None
    never = Prefilter.union([])
    assert never is not None and not never.search("anything")


@pytest.mark.parametrize("pattern", [r"\bamp\b", r"\bcuda\b(?:\.[A-Za-z_]|\s*[,)])", r"\bcudas?x", r"\btf32\s*=",
                                     r"\b_amp", r"\bx{2}", r"\b(?:a|b)c"])
def test_a_leading_word_boundary_spelled_literal_first_matches_the_same(pattern: str) -> None:
    rewritten = re.compile(prefilter_module.literal_first(pattern))
    original = re.compile(pattern)
    for word in ("amp", "cuda", "cudax", "cudasx", "tf32 =", "_amp", "xx", "ac", "bc"):
        for before in ("", " ", "_", "9", "é", ".", "(", "x"):
            for after in ("", " ", "_", "9", ".x", ",", "é"):
                text = f"{before}{word}{after}"
                assert (rewritten.search(text) is None) == (original.search(text) is None), (pattern, text)
    assert prefilter_module.literal_first(r"\bamp\b") == r"amp(?<!\wamp)\b"  # it opens with the literal
