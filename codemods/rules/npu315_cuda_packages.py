"""NPU315: the cuda-packages rule."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from codemods.api.cases import Invalid, Valid
from codemods.data.catalogue import package_entry, package_patterns
from codemods.families.third_party import ThirdPartyRule, entries

if TYPE_CHECKING:
    from packaging.requirements import Requirement

# conda's `- name=1.0`, `- nvidia::cuda-toolkit`, `- pip:` (pip's lines are PEP 508: `packaging`)
_REQUIREMENT = re.compile(r"(?:-\s+)?(?:(?P<channel>[A-Za-z0-9][\w.\-]*)::)?(?P<name>[A-Za-z0-9][\w.\-]*)")
_CUDA_BUILD = re.compile(r"\+cu\d+\b")  # `torch==2.1.0+cu118`
_CUDA_INDEX = re.compile(r"download\.pytorch\.org/whl/(?:nightly/)?cu\d+|pypi\.nvidia\.com|pypi\.ngc\.nvidia\.com")
_INDEX_OPTIONS = ("--extra-index-url", "--index-url", "-i", "--find-links", "-f")
_CHANNELS = frozenset({"nvidia"})


def _pep508(text: str) -> Requirement | None:
    """A pip requirement line as pip reads it (`packaging`), its options (`--hash=...`) and line
    continuation left out; None for what is not one (a conda spec such as `cudatoolkit=11.3`,
    `-r other.txt`, `-e .`)."""
    # imported here: `packaging` costs more to import than most rules, and only requirement
    # files (rare in a run) need it
    from packaging.requirements import InvalidRequirement, Requirement

    text = re.split(r"\s--?[a-z]", text, maxsplit=1)[0].rstrip("\\ \t")
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


def _cuda_build(requirement: Requirement) -> bool:
    from packaging.version import InvalidVersion, Version

    if requirement.url is not None:
        return bool(_CUDA_INDEX.search(requirement.url) or _CUDA_BUILD.search(requirement.url.replace("%2B", "+")))
    for spec in requirement.specifier:
        try:
            local = Version(spec.version).local or ""
        except InvalidVersion:  # `==2.1.*`
            continue
        if re.fullmatch(r"cu\d+", local):
            return True
    return False


def _build_entry() -> dict[str, Any]:
    return next(e for e in entries() if e.get("code") == "NPU315" and not e.get("also"))


class CudaPackages(ThirdPartyRule):
    """## What it does

    Dependency manifests: CUDA packages, CUDA-only libraries and CUDA wheel indexes in pip requirements and conda environment files are reported.

    ## Why

    A migrated project still installs what its manifests name. `cudatoolkit`, `pytorch-cuda`, the `nvidia-*` wheels, a `torch==X+cu118` build or a `--extra-index-url https://download.pytorch.org/whl/cu118` line bring NVIDIA's runtime, which an Ascend host cannot use: it needs CANN and the torch_npu wheel that matches its torch. CUDA-only libraries (xformers, triton, flash-attn, bitsandbytes, apex, TensorRT, onnxruntime-gpu, NVML bindings) do not run on NPU; the code that uses them is reported by NPU301-NPU314. Discovery reads `*requirements*.txt`, `environment*.yml`/`.yaml` and `conda*.yml`/`.yaml` files (other `.txt` and YAML files are not read); each line is read on its own, comments left out.

    ## Example

    ```yaml
    # environment.yaml (ControlNet)
    dependencies:
      - cudatoolkit=11.3   # NPU315
      - pytorch=1.12.1
    ```

    ## Fix safety

    No fix: diagnostic only (warning). Which torch, torch_npu and CANN versions go together is a choice for the environment's owner. Suppress a line with `# npu-migrate: ignore[NPU315]`.

    ## Targets

    - **npu**: reports (diagnostic only)
    - **portable**: the same report (nothing is rewritten under either target; the advice is what running the code on Ascend needs)
    """

    code = "NPU315"
    supported_targets = frozenset({"npu", "portable"})
    name = "cuda-packages"
    summary = "Requirements and conda environments: CUDA packages, CUDA-only libraries and CUDA wheel indexes are reported"
    language = "manifest"  # a text rule: the engine hands it the requirements / environment files
    # the CUDA words of the build entries, and the catalogue's package names (up to a glob's `*`)
    prefilter = "(?i:cuda|cu\\d|nvidia|" + "|".join(sorted({re.escape(p.split("*")[0].replace("-", "_")).replace("_", "[-_]")
                                                       for p, _ in package_patterns() if p.split("*")[0]})) + ")"

    def rewrite_text(self, text: str) -> str:
        for number, line in enumerate(text.splitlines(), 1):
            code = re.split(r"(?:^|\s)#", line, maxsplit=1)[0]
            if code.strip():
                self._check_line(number, code)
        return text

    def _check_line(self, number: int, code: str) -> None:
        stripped = code.lstrip()
        col = len(code) - len(stripped) + 1
        words = stripped.split()
        if words[:1] == ["-"] and len(words) > 1 and words[1].split("=")[0] in _INDEX_OPTIONS:
            words = words[1:]  # a conda environment's `pip:` list: `- --extra-index-url https://...`
        if words and words[0].split("=")[0] in _INDEX_OPTIONS:
            found = _CUDA_INDEX.search(stripped)
            if found:
                self._report(number, col, _build_entry(), found.group(0))
            return
        match = _REQUIREMENT.match(stripped)
        if match is None:
            return
        name, channel = match.group("name"), match.group("channel")
        if name in _CHANNELS and stripped.startswith("-") and not channel:
            self._report(number, col, _build_entry(), f"the {name} conda channel")
            return
        requirement = _pep508(stripped.removeprefix("-").strip() if stripped.startswith("- ") else stripped)
        if requirement is not None:
            self._check_requirement(number, col, requirement)
            return
        if channel in _CHANNELS:
            self._report(number, col, package_entry(name) or _build_entry(), f"{channel}::{name}")
            return
        entry = package_entry(name)
        if entry is not None:
            self._report(number, col, entry, name)
        elif _CUDA_BUILD.search(stripped):
            self._report(number, col, _build_entry(), stripped.split(";")[0].strip("- ").strip())

    def _check_requirement(self, number: int, col: int, requirement: Requirement) -> None:
        """A pip requirement: a CUDA package or library by its name, or a CUDA build by the local
        version it pins (`+cu118`) or the wheel index its URL names."""
        entry = package_entry(requirement.name)
        if entry is not None:
            self._report(number, col, entry, requirement.name)
        elif _cuda_build(requirement):
            self._report(number, col, _build_entry(), str(requirement).split(";")[0].strip())

    def _report(self, line: int, col: int, entry: dict[str, Any], name: str) -> None:
        self.report_at(line, col, entry["message"].replace("{name}", name))


CASES = [
    # ControlNet's environment.yaml
    Invalid(
        """\
name: control
channels:
  - pytorch
dependencies:
  - cudatoolkit=11.3
  - pytorch=1.12.1
  - pip:
      - xformers==0.0.16  # attention kernels
""",
        path="environment.yaml",
    ),
    # dinov2's conda.yaml: NVIDIA's index and a RAPIDS wheel in the pip section
    Invalid(
        """\
dependencies:
  - pip:
    - --extra-index-url https://pypi.nvidia.com
    - cuml-cu11
""",
        path="conda.yaml",
    ),
    # dinov2's requirements.txt, whisper's triton line, a CUDA build pinned by its local version
    Invalid(
        """\
--extra-index-url https://download.pytorch.org/whl/cu117
torch==2.0.0+cu117
xformers==0.0.18
triton>=2.0.0;platform_machine=="x86_64"
""",
        path="requirements.txt",
    ),
    Valid(
        """\
# tensorrt  # TensorRT export
torch>=2.1
numpy
""",
        path="requirements.txt",
    ),
]
