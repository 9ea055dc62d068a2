"""NPU511 across files: a CUDA guard that selects the project's own CUDA-only code (a function
that imports a module of the project that imports Triton) stays on CUDA and is reported, in a
real `apply` run over a project on disk. The shape is openai/whisper's `timing.py`, where
`x.is_cuda` selects Triton kernels from `triton_ops.py`."""

from __future__ import annotations

import ast
import os
from pathlib import Path

from click.testing import CliRunner

from codemods.analyses.cudaonly import CudaOnlyNames, _top_level_reads, project_cuda_only_modules
from codemods.model.filemodel import FileModel
from npu_migrate.commands.apply import command

KERNELS = "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef kernel(x):\n    pass\n"
TIMING = '''\
import torch


def filter_cuda(x):
    from .kernels import kernel
    return kernel(x)


def median(x):
    if x.is_cuda:
        return filter_cuda(x)
    return x.median()


def smooth(x):
    if x.is_cuda:
        from .kernels import kernel
        return kernel(x)
    return x


def place(x):
    if x.is_cuda:
        from .plain import helper
        return helper(x)
    return x.cuda()
'''
PLAIN = "import torch\n\n\ndef helper(x):\n    return x + 1\n"


def _project(root: Path) -> dict[str, Path]:
    files = {"kernels": root / "pkg" / "kernels.py", "timing": root / "pkg" / "timing.py",
             "plain": root / "pkg" / "plain.py", "init": root / "pkg" / "__init__.py",
             "reexport": root / "pkg" / "fast.py", "lazy": root / "pkg" / "lazy.py"}
    texts = {"kernels": KERNELS, "timing": TIMING, "plain": PLAIN, "init": "",
             "reexport": "from .kernels import kernel as fast_kernel\n",
             "lazy": "def later():\n    from . import kernels\n    return kernels\n"}
    for name, path in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(texts[name])
    return files


def test_the_index_follows_module_level_imports_only(tmp_path):
    files = _project(tmp_path)
    index = project_cuda_only_modules([str(p) for p in files.values()], str(tmp_path))
    found = {os.path.basename(p) for p in index["files"]}
    # kernels imports triton; fast re-exports it at import time; lazy imports it only when called
    assert found == {"kernels.py", "fast.py"}
    assert index["files"][str(files["reexport"])] == "`triton` (in `pkg/kernels.py`)"
    assert index["modules"]["pkg.kernels"] == index["modules"]["kernels"] == "`triton` (in `pkg/kernels.py`)"


def test_an_optional_import_does_not_make_a_module_cuda_only(tmp_path):
    """timm's `utils/cuda.py` tries apex and falls back: it works without apex, so calling into it
    selects nothing CUDA-only. A `try` whose handler raises again (whisper) still requires it."""
    texts = {
        "optional.py": "try:\n    from apex import amp\n    has_apex = True\nexcept ImportError:\n    amp = None\n",
        "conditional.py": "import os\nif os.environ.get('USE_TRITON'):\n    import triton\n",
        "required.py": "try:\n    import triton\nexcept ImportError:\n    raise RuntimeError('needs triton')\n",
        "other_error.py": "try:\n    import triton\nexcept KeyError:\n    pass\n",
    }
    paths = []
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    index = project_cuda_only_modules(paths, str(tmp_path))
    assert {os.path.basename(p) for p in index["files"]} == {"required.py", "other_error.py"}


def test_a_guarded_import_the_module_uses_anyway_is_required(tmp_path):
    """litgpt's unsloth kernels: `if _TRITON_AVAILABLE: import triton`, then `@triton.jit` on a
    top-level function (or `triton.next_power_of_2` at module level): the module cannot be
    imported without Triton. A use under the same kind of guard, or inside a function, is not."""
    texts = {
        "decorated.py": "if AVAILABLE:\n    import triton\n\n@triton.jit\ndef k(x):\n    pass\n",
        "bound.py": "if AVAILABLE:\n    import triton\nnext_power_of_2 = triton.next_power_of_2\n",
        "guarded.py": "if AVAILABLE:\n    import triton\nif AVAILABLE:\n    @triton.jit\n    def k(x):\n        pass\n",
        "called.py": "if AVAILABLE:\n    import triton\n\ndef f(n):\n    return triton.cdiv(n, 2)\n",
    }
    paths = []
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    index = project_cuda_only_modules(paths, str(tmp_path))
    assert {os.path.basename(p) for p in index["files"]} == {"decorated.py", "bound.py"}


def test_functions_reaching_cuda_only_code_are_followed_within_a_file(tmp_path):
    import ast

    files = _project(tmp_path)
    index = project_cuda_only_modules([str(p) for p in files.values()], str(tmp_path))
    names = CudaOnlyNames.of(ast.parse(TIMING), str(files["timing"]), index)
    # median calls filter_cuda, which imports the kernels: both reach Triton, place does not
    assert set(names.functions) == {"filter_cuda", "median", "smooth"}
    assert CudaOnlyNames.of(ast.parse(TIMING), str(files["timing"]), {}).functions == {}


def test_guards_selecting_project_cuda_only_code_stay_on_cuda(tmp_path, monkeypatch):
    files = _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(command, ["--isolated", "--no-cache", "pkg"], catch_exceptions=False)
    text = files["timing"].read_text()
    # the two guards in front of Triton code keep their CUDA test (the NPU takes the fallback) ...
    assert text.count("if x.is_cuda:") == 2 and "if x.is_npu:" in text
    lines = {int(line.split(":")[1]): line for line in result.stdout.splitlines() if " NPU511 " in line}
    assert sorted(lines) == [10, 16]
    assert "`filter_cuda`, which uses `triton` (in `pkg/kernels.py`)" in lines[10]
    assert "`triton` (in `pkg/kernels.py`)" in lines[16]
    # ... while the guard in front of plain project code is migrated with the rest of the function
    assert "    return x.npu()\n" in text


def test_the_same_file_alone_gives_the_same_result(tmp_path, monkeypatch):
    """In a configured project the index is built over the whole project folder, so migrating
    one file (as pre-commit does with the staged ones) reaches the same verdict as migrating all."""
    files = _project(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.npu-migrate]\n")
    monkeypatch.chdir(tmp_path)
    CliRunner().invoke(command, ["--no-cache", "pkg/timing.py"], catch_exceptions=False)
    alone = files["timing"].read_text()
    files = _project(tmp_path / "again")
    monkeypatch.chdir(tmp_path / "again")
    (tmp_path / "again" / "pyproject.toml").write_text("[tool.npu-migrate]\n")
    CliRunner().invoke(command, ["--no-cache", "pkg"], catch_exceptions=False)
    assert "if x.is_cuda:" in alone and alone == files["timing"].read_text() == files["timing"].read_text()


def test_a_module_of_a_cuda_only_package_is_cuda_only(tmp_path):
    """Importing `kernels.ops` runs `kernels/__init__.py` first, which needs Triton."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "__init__.py").write_text("import triton\n")
    (tmp_path / "kernels" / "ops.py").write_text("import math\n")
    (tmp_path / "plain.py").write_text("import math\n")
    paths = [str(tmp_path / "kernels" / "__init__.py"), str(tmp_path / "kernels" / "ops.py"), str(tmp_path / "plain.py")]
    index = project_cuda_only_modules(paths, str(tmp_path))
    assert sorted(os.path.relpath(p, tmp_path) for p in index["files"]) == ["kernels/__init__.py", "kernels/ops.py"]
    assert index["modules"]["kernels.ops"] == "`triton` (in `kernels/__init__.py`)"


def test_the_project_facts_do_not_depend_on_the_working_folder(tmp_path, monkeypatch):
    """`apply /elsewhere/project/pkg` under no configuration: the files are a project of the folder
    above their package, as when the run starts there. The index used to be empty (every module
    name began with `..` relative to the working folder), so `from pkg.kernels import ...` in a
    CUDA branch was not seen as Triton code and its guard was migrated."""
    _project(tmp_path / "project")
    absolute = tmp_path / "project" / "pkg" / "absolute.py"
    absolute.write_text("import torch\n\n\ndef run(x):\n    if x.is_cuda:\n"
                        "        from pkg.kernels import kernel\n        return kernel(x)\n    return x\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = CliRunner().invoke(command, ["--isolated", "--no-cache", "--diff", str(tmp_path / "project" / "pkg")],
                                catch_exceptions=False)
    reported = [line for line in result.output.splitlines() if " NPU511 [" in line]
    assert sorted((os.path.basename(line.split(":")[0]), int(line.split(":")[1])) for line in reported) == [
        ("absolute.py", 5), ("timing.py", 10), ("timing.py", 16)]


SETUP = ("from setuptools import setup\nfrom torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
         "setup(name='fused', ext_modules=[CUDAExtension('fused_ops', ['ops.cpp', 'ops_kernel.cu']),\n"
         "                                 CUDAExtension(name='pkg._C', sources=['c.cu'])])\n")
WRAPPER = "import torch\nimport fused_ops\n\n\ndef fused(x):\n    return fused_ops.forward(x)\n"
MODEL = ("import torch\nfrom .wrapper import fused\nfrom . import _C\n\n\ndef run(x):\n    if x.is_cuda:\n"
         "        return fused(x)\n    return x.cuda()\n")


def _extension_project(root: Path, with_setup: bool = True) -> None:
    (root / "pkg").mkdir()
    if with_setup:
        (root / "setup.py").write_text(SETUP)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "wrapper.py").write_text(WRAPPER)
    (root / "pkg" / "model.py").write_text(MODEL)


def test_the_cuda_extensions_a_project_builds_are_cuda_only(tmp_path):
    """Swin-Transformer: `kernels/window_process/setup.py` builds `swin_window_process` with
    CUDAExtension, and `window_process.py` imports it: on an Ascend host that module cannot exist."""
    _extension_project(tmp_path)
    paths = [str(p) for p in tmp_path.rglob("*.py")]
    index = project_cuda_only_modules(paths, str(tmp_path))
    assert index["extensions"] == {"fused_ops": "`fused_ops`, a CUDA extension (built in `setup.py`)",
                                   "pkg._C": "`pkg._C`, a CUDA extension (built in `setup.py`)"}
    assert {os.path.basename(p) for p in index["files"]} == {"wrapper.py", "model.py"}


def test_imports_of_a_cuda_extension_are_reported_and_guards_kept(tmp_path, monkeypatch):
    _extension_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(command, ["--isolated", "--no-cache", "."], catch_exceptions=False)
    lines = sorted(line.split(" [")[0] for line in result.stdout.splitlines() if " NPU311 " in line or " NPU511 " in line)
    assert lines == ["pkg/model.py:3:15: NPU311", "pkg/model.py:7:5: NPU511", "pkg/wrapper.py:2:8: NPU311",
                     "setup.py:2:55: NPU311", "setup.py:3:34: NPU311", "setup.py:4:34: NPU311"]
    text = (tmp_path / "pkg" / "model.py").read_text()
    assert "    if x.is_cuda:\n" in text and "    return x.npu()\n" in text


def test_without_the_setup_script_the_same_imports_are_nothing(tmp_path, monkeypatch):
    _extension_project(tmp_path, with_setup=False)
    assert project_cuda_only_modules([str(p) for p in tmp_path.rglob("*.py")], str(tmp_path)) == {}
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(command, ["--isolated", "--no-cache", "."], catch_exceptions=False)
    assert " NPU311 " not in result.stdout and " NPU511 " not in result.stdout


def test_reads_of_module_level_scopes_follow_each_scope_s_own_walk() -> None:
    """What makes a function CUDA-only is read off the file's one walk; the first reason found
    must stay the one `ast.walk` of the function meets first, whichever analysis walked the file
    first (the parser shares `ast.Load()` and the operators between places)."""
    source = TIMING + "\n\nclass Op:\n    @staticmethod\n    def forward(x, y=kernel_default):\n" \
                      "        return [kernel(v) for v in (x, y)] + ['a.cu', f'{x}.cuh']\n"
    for first in ("of_type", "parents"):
        tree = ast.parse(source)
        model = FileModel("timing.py", source, tree)
        model.of_type(ast.If) if first == "of_type" else model.parents
        reads = _top_level_reads(model)
        for scope in tree.body:
            if isinstance(scope, (ast.FunctionDef, ast.ClassDef)):
                walked = [n.id if isinstance(n, ast.Name) else n.value if isinstance(n, ast.Constant) else n
                          for n in ast.walk(scope)
                          if (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)) or isinstance(n, ast.ImportFrom)
                          or (isinstance(n, ast.Constant) and isinstance(n.value, str))]
                assert [value for _, value in reads[id(scope)]] == walked
                assert walked


def test_a_file_whose_import_lines_lead_nowhere_is_not_parsed_for_the_merge(tmp_path: Path) -> None:
    """The merge reads a file a second time only when one of its import lines, read alone, can
    lead to CUDA-only code: a line that merely names a found module's stem is answered from the
    summary. A multi-line import and an import after `;` still get their parse, and are found."""
    from codemods.analyses.cudaonly import CUDA_ONLY_MODULES
    from codemods.api.facts import Project, local_project, read_file

    files = {
        "kernels.py": KERNELS,
        "user.py": "from kernels import kernel\n",
        "elsewhere.py": "from other.kernels import tool  # names the stem, means another module\n",
        "multi.py": "from kernels import (\n    kernel,\n)\n",
        "inline.py": "import other.kernels\nx = 1; import kernels\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    paths = [str(tmp_path / name) for name in files]
    reads: list[str] = []
    project = local_project([CUDA_ONLY_MODULES], paths, str(tmp_path))

    def counted(path: str) -> bytes | None:
        reads.append(os.path.basename(path))
        return read_file(path)

    summaries = {path: {CUDA_ONLY_MODULES.key: summary} for path, summary in project.summaries(CUDA_ONLY_MODULES)}
    project = Project(project.root, project.files(), summaries, counted)
    index = CUDA_ONLY_MODULES.merge(project)
    found = {os.path.basename(p) for p in index["files"]}
    assert found == {"kernels.py", "user.py", "multi.py", "inline.py"}
    assert "elsewhere.py" not in reads  # answered by its line alone
    assert {"user.py", "multi.py", "inline.py"} <= set(reads)  # parsed, for the reason in their order
