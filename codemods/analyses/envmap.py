"""The environment-variable mapping shared by the Python (NPU20x) and shell (NPU25x) rules.

Pure functions over names and values, driven by `data/env_vars.json` and `data/alloc_conf.json`
(fact sheet §3): which name replaces which, how a value is carried over (device ids must be
strictly ascending, NCCL_BUFFSIZE bytes become HCCL_BUFFSIZE megabytes, allocator keys are
checked), and the shell-text scan that finds assignments, expansions and launcher arguments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from itertools import pairwise

from codemods.data.catalogue import env_toggles
from codemods.data.tables import load_data
from codemods.model.shellwords import Word, lex
from npu_migrate.core.diagnostics import Severity

MB = 1 << 20
# launcher / script arguments whose value names the process-group backend
BACKEND_FLAGS = ("--backend", "--dist-backend", "--dist_backend", "--ddp-backend", "--ddp_backend",
                 "--distributed-backend", "--distributed_backend")
# commands whose bare-name arguments name a variable (`export NAME`, `unset NAME`)
_NAMING_COMMANDS = {"export", "unset", "readonly", "declare", "typeset", "local"}
_NAMING_OPTIONS = {"-x", "-e", "--env"}  # mpirun -x NAME, docker run -e NAME
_TEXT_COMMANDS = {"echo", "printf"}  # their `NAME=value` arguments are text, not assignments
_ENV_FILES = (".deepspeed_env",)  # ...unless written to a file a launcher exports
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_EXPANSION = re.compile(r"\$\{?#?(" + _NAME + ")")
_ASSIGNMENT = re.compile("(" + _NAME + ")=")


@dataclass(frozen=True)
class EnvEntry:
    cuda: str
    npu: str | None
    kind: str
    code: str
    shell_code: str
    severity: Severity = Severity.INFO
    message: str = ""
    values: tuple[str, ...] = ()  # a flag only for these values (a toggle set to "0" is fine); () any


@dataclass
class Problem:
    severity: Severity
    message: str


@dataclass
class Plan:
    """What to do with one occurrence of a variable: new name/value (None = keep) and problems."""

    kind: str
    new_name: str | None = None
    new_value: str | None = None
    problems: list[Problem] = field(default_factory=list)
    message: str = ""  # explanation of the edit, when there is one


load = load_data  # the tables this module reads (env_vars.json, alloc_conf.json)


@cache
def _tables() -> tuple[dict[str, EnvEntry], list[EnvEntry], dict[str, str]]:
    data = load("env_vars.json")
    exact: dict[str, EnvEntry] = {}
    prefixes: list[EnvEntry] = []
    # the catalogue's toggles of CUDA-only code (`RWKV_CUDA_ON`) are reported as flags
    toggles = [{**raw, "kind": "flag"} for raw in env_toggles()]
    for raw in [*data["entries"], *toggles]:
        entry = EnvEntry(raw["cuda"], raw.get("npu"), raw["kind"], raw["code"], raw["shell_code"],
                         Severity(raw.get("severity", "info")), raw.get("message", ""), tuple(raw.get("values", ())))
        if entry.cuda.endswith("*"):
            prefixes.append(entry)
        else:
            for name in [entry.cuda, *raw.get("also", ())]:
                exact[name] = entry
    prefixes.sort(key=lambda e: -len(e.cuda))
    return exact, prefixes, dict(data["npu_checks"])


def lookup(name: str) -> EnvEntry | None:
    exact, prefixes, _ = _tables()
    if name in exact:
        return exact[name]
    return next((e for e in prefixes if name.startswith(e.cuda[:-1])), None)


def npu_check(name: str) -> str | None:
    """The value check that applies to an NPU-side name (so a second run still reports it)."""
    return _tables()[2].get(name)


def is_known(name: str) -> bool:
    return lookup(name) is not None or npu_check(name) is not None


def kinds_of_code(code: str) -> frozenset[str]:
    """The entry kinds a rule code handles (its Python or shell code)."""
    exact, prefixes, _ = _tables()
    return frozenset(e.kind for e in [*exact.values(), *prefixes] if code in (e.code, e.shell_code))


def names_pattern(kinds: frozenset[str]) -> str:
    """A prefilter regex for the names of these kinds (NPU-side checked names included)."""
    exact, prefixes, checks = _tables()
    words = {name for name, e in exact.items() if e.kind in kinds}
    words |= {name for name, kind in checks.items() if kind in kinds}
    heads = {e.cuda[:-1] for e in prefixes if e.kind in kinds}
    parts = [re.escape(w) for w in sorted(words)] + [re.escape(h) + "[A-Z0-9_]" for h in sorted(heads)]
    # no leading \b: a literal start lets `re` skip ahead fast (a prefilter may over-match)
    return "|".join(parts) if parts else r"(?!)"


# -- values ------------------------------------------------------------------------------------
def check_device_list(name: str, value: str) -> list[Problem]:
    """ASCEND_RT_VISIBLE_DEVICES: digits and commas, strictly ascending (fact sheet §3)."""
    text = value.strip()
    if not text:
        return []
    if not re.fullmatch(r"\d+(,\d+)*", text):
        prefix = re.match(r"[\d,]*", text).group(0)  # type: ignore[union-attr]
        return [Problem(Severity.WARNING,
                        f"`{name}={value}`: torch_npu reads digits and commas only and stops at the "
                        f"first other character, so it sees `{prefix}`; list device ids like `0,1,2`")]
    ids = [int(part) for part in text.split(",")]
    if any(a >= b for a, b in pairwise(ids)):
        return [Problem(Severity.ERROR,
                        f"`{name}={value}`: NPU device ids must be strictly ascending, otherwise "
                        f"torch_npu sees no device (device_count() == 0); write "
                        f"`{','.join(str(i) for i in sorted(set(ids)))}` and re-map ranks if the order mattered")]
    return []


def bytes_to_mb(value: str) -> tuple[int, bool] | None:
    """NCCL_BUFFSIZE (bytes; decimal or 0x hex as NCCL parses it) -> (MB rounded up, exact?)."""
    text = value.strip()
    try:
        count = int(text, 16) if text.lower().startswith("0x") else int(text, 10)
    except ValueError:
        return None
    if count <= 0:
        return None
    mb = max(1, -(-count // MB))
    return mb, count % MB == 0


def split_alloc_conf(value: str) -> list[tuple[str, str, int, int]]:
    """`k:v,k2:[a:1,b:2]` -> [(key, value, key_start, key_end)]; commas inside [] stay put."""
    items, depth, start = [], 0, 0
    for i, c in enumerate(value + ","):
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
        elif c == "," and depth <= 0:
            token = value[start:i]
            key, _, val = token.partition(":")
            lead = len(key) - len(key.lstrip())
            if key.strip():
                items.append((key.strip(), val.strip(), start + lead, start + lead + len(key.strip())))
            start = i + 1
    return items


def check_alloc_conf(name: str, value: str) -> tuple[str | None, list[Problem], list[str]]:
    """Translate and check allocator keys. Returns (new value or None, problems, translations)."""
    conf = load("alloc_conf.json")
    accepted, translate = conf["accepted"], conf["translate"]
    problems: list[Problem] = []
    done: list[str] = []
    new_value = value
    keys: dict[str, str] = {}
    for key, val, start, end in reversed(split_alloc_conf(value)):
        target = translate.get(key, key)
        if target != key:
            new_value = new_value[:start] + target + new_value[end:]
            done.append(f"`{key}` → `{target}`")
        keys[target] = val
        if target not in accepted:
            problems.append(Problem(Severity.ERROR,
                                    f"`{name}` key `{key}` is CUDA-only: torch_npu's PYTORCH_NPU_ALLOC_CONF "
                                    f"parser refuses unknown keys and the process stops at start-up; "
                                    f"delete `{key}:{val}`"))
        elif not accepted[target]["in_2_9_7_3"]:
            problems.append(Problem(Severity.WARNING,
                                    f"`{name}` key `{target}` needs torch_npu 26.x: the 2.9.0-7.3.0 line "
                                    f"stops with \"Unrecognized CachingAllocator option\""))
    if keys.get("expandable_segments", "").lower() == "true":
        clash = [k for k in conf["not_with_expandable_segments"] if k in keys]
        if clash:
            problems.append(Problem(Severity.ERROR,
                                    f"`{name}`: torch_npu refuses `expandable_segments:True` together with "
                                    f"{', '.join(f'`{k}`' for k in clash)}; keep one of them"))
    problems.reverse()
    return (new_value if new_value != value else None), problems, done


def plan(name: str, value: str | None, *, write: bool) -> Plan | None:
    """What one occurrence of `name` needs. `value` is the literal assigned (None: a read, or a
    value computed at run time); `write` says whether the occurrence sets the variable."""
    entry = lookup(name)
    if entry is None:
        kind = npu_check(name)
        if kind is None or value is None or not write:
            return None
        problems = (check_device_list(name, value) if kind == "device_list"
                    else check_alloc_conf(name, value)[1])
        return Plan(kind, problems=problems) if problems else None
    kind, new = entry.kind, entry.npu
    if kind == "flag":
        if entry.values and value is not None and value not in entry.values:
            return None
        return Plan(kind, problems=[Problem(entry.severity, entry.message.format(name=name))])
    result = Plan(kind, new_name=new, message=f"`{name}` → `{new}`")
    if kind == "device_list":
        if value is not None:
            result.problems = check_device_list(new or name, value)
        elif write:
            result.problems = [Problem(Severity.INFO,
                                       f"`{new}` is computed here: make sure the ids are strictly "
                                       "ascending, or torch_npu sees no device")]
    elif kind == "alloc_conf" and value is not None:
        result.new_value, result.problems, done = check_alloc_conf(new or name, value)
        if done:
            result.message += " (" + ", ".join(done) + ")"
    elif kind == "bytes_to_mb":
        return _plan_buffsize(name, new or "HCCL_BUFFSIZE", value, write)
    return result


def _plan_buffsize(name: str, new: str, value: str | None, write: bool) -> Plan:
    kind = "bytes_to_mb"
    if not write:
        return Plan(kind, problems=[Problem(Severity.WARNING,
                    f"reads `{name}` (bytes); on NPU the buffer size is `{new}`, in MB: "
                    "convert where the value is used")])
    converted = bytes_to_mb(value) if value is not None else None
    if converted is None:
        shown = "computed at run time" if value is None else f"`{value}`, not a byte count"
        return Plan(kind, problems=[Problem(Severity.WARNING,
                    f"`{name}` is {shown}: set `{new}` in MB instead (bytes / 1048576; default 200)")])
    mb, exact = converted
    result = Plan(kind, new_name=new, new_value=str(mb),
                  message=f"`{name}={value}` (bytes) → `{new}={mb}` (MB)")
    if not exact:
        result.problems.append(Problem(Severity.INFO, f"`{name}={value}` is not a whole number of MB; "
                                                      f"rounded up to `{new}={mb}`"))
    return result


# -- shell text --------------------------------------------------------------------------------
@dataclass
class Change:
    """An edit (`replacement` is not None) or a finding at `offset` of a shell text."""

    kind: str
    offset: int
    end: int = 0
    replacement: str | None = None
    message: str = ""
    severity: Severity = Severity.INFO


def shell_changes(text: str, kinds: frozenset[str]) -> list[Change]:
    """Everything the env mapping, the backend and the nvidia-smi checks find in shell `text`,
    limited to `kinds` ("backend" and "nvidia_smi" are kinds of their own)."""
    changes: list[Change] = []
    for words in lex(text):
        _command(text, words, kinds, changes)
    return sorted(changes, key=lambda c: c.offset)


def _command(text: str, words: list[Word], kinds: frozenset[str], changes: list[Change]) -> None:
    literals = [w.literal(text) for w in words]
    head = next((lit for w, lit in zip(words, literals) if not (lit and _ASSIGNMENT.match(lit))), None)
    for i, word in enumerate(words):
        literal = literals[i]
        if not word.segments:
            continue
        first = word.segments[0]
        content = text[first.start:first.end]
        match = _ASSIGNMENT.match(content) if first.quote != "'" or len(word.segments) == 1 else None
        if match and is_known(match.group(1)) and (head not in _TEXT_COMMANDS or writes_env_file(literals)):
            _assignment(text, word, match, kinds, changes)
        elif literal and is_known(literal) and len(word.segments) == 1 and (
                head in _NAMING_COMMANDS or (i and literals[i - 1] in _NAMING_OPTIONS)):
            _apply(plan(literal, None, write=False), kinds, first.start, first.end, None, changes)
        for seg in word.segments:
            if seg.quote != "'":
                _expansions(text, seg.start, seg.end, kinds, changes)
        if "backend" in kinds:
            _backend(text, words, literals, i, changes)
        if "nvidia_smi" in kinds:
            raw = text[word.start:word.end]
            found = raw.find("nvidia-smi")
            if found >= 0:
                changes.append(Change("nvidia_smi", word.start + found, severity=Severity.WARNING,
                                      message="`nvidia-smi` does not exist on Ascend hosts; its counterpart "
                                              "is `npu-smi` (different output format), or ask torch: "
                                              "`python -c 'import torch, torch_npu; print(torch.npu.device_count())'`"))


def writes_env_file(literals: list[str | None]) -> bool:
    """`echo "NCCL_P2P_DISABLE=1" >> ~/.deepspeed_env`: DeepSpeed's launcher exports every
    `NAME=value` line of that file on every node, so the text written there is an assignment."""
    return any(lit is not None and lit.endswith(_ENV_FILES) for lit in literals[1:])


def _assignment(text: str, word: Word, match: re.Match[str], kinds: frozenset[str],
                changes: list[Change]) -> None:
    first = word.segments[0]
    name = match.group(1)
    value_start = first.start + match.end()
    # the value is rewritable when it is one piece: `N=v`, `N='v'` or `"N=v"`
    rest = word.segments[1:]
    value: str | None
    span: tuple[int, int] | None
    if not rest or (value_start == first.end and len(rest) == 1):
        piece = rest[0] if rest else first
        span = (value_start, first.end) if not rest else (piece.start, piece.end)
        value = text[span[0]:span[1]]
        if piece.quote != "'" and any(c in value for c in "$`\\"):  # expanded by the shell
            value, span = None, None
    else:
        tail = Word(value_start, word.end, [type(first)(first.quote, value_start, first.end), *rest])
        value, span = tail.literal(text), None
    _apply(plan(name, value, write=True), kinds, first.start, first.start + len(name), span, changes)


def _apply(found: Plan | None, kinds: frozenset[str], name_start: int, name_end: int,
           value_span: tuple[int, int] | None, changes: list[Change]) -> None:
    if found is None or found.kind not in kinds:
        return
    if found.new_value is not None and value_span is None and found.kind == "bytes_to_mb":
        # a byte count we cannot rewrite in place must not be renamed to a MB variable
        changes.append(Change(found.kind, name_start, severity=Severity.WARNING,
                              message=f"convert this byte count to MB and rename it to `{found.new_name}`"))
        return
    if found.new_name:
        changes.append(Change(found.kind, name_start, name_end, found.new_name, found.message))
    if found.new_value is not None and value_span is not None:
        changes.append(Change(found.kind, value_span[0], value_span[1], found.new_value, found.message))
    for problem in found.problems:
        changes.append(Change(found.kind, name_start, severity=problem.severity, message=problem.message))


def _expansions(text: str, start: int, end: int, kinds: frozenset[str], changes: list[Change]) -> None:
    for match in _EXPANSION.finditer(text, start, end):
        name = match.group(1)
        if is_known(name):
            _apply(plan(name, None, write=False), kinds, match.start(1), match.end(1), None, changes)


def _backend(text: str, words: list[Word], literals: list[str | None], i: int,
             changes: list[Change]) -> None:
    literal = literals[i]
    if literal is None:
        return
    target: Word | None = None
    if literal in BACKEND_FLAGS and i + 1 < len(words) and literals[i + 1] == "nccl":
        target = words[i + 1]
    elif literal.partition("=")[0] in BACKEND_FLAGS and literal.endswith("=nccl"):
        target = words[i]
    if target is None:
        return
    last = target.segments[-1]
    if text[last.start:last.end].endswith("nccl"):
        changes.append(Change("backend", last.end - 4, last.end, "hccl",
                              "`--backend nccl` → `--backend hccl` (the NPU collective backend)"))


def apply_changes(text: str, changes: list[Change]) -> str:
    """Apply the edits among `changes` (non-overlapping, any order) to `text`."""
    edits = sorted((c for c in changes if c.replacement is not None), key=lambda c: c.offset, reverse=True)
    last = len(text) + 1
    for change in edits:
        if change.end > last:
            continue  # overlapping edit: keep the first one only
        text = text[:change.offset] + (change.replacement or "") + text[change.end:]
        last = change.offset
    return text
