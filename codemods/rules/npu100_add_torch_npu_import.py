"""NPU100: add `import torch_npu` to files the migration makes depend on it."""

from codemods.api.cases import Invalid, Valid
from codemods.api.rule import Fix, Rule


class AddTorchNpuImport(Rule):
    """## What it does

    Adds `import torch_npu` to a file that another rule made depend on it

    ## Why

    `torch.npu`, the `npu` device and the NPU flavours of the torch APIs exist only once
    `torch_npu` is imported: importing it registers the Ascend backend with torch. A rewrite to
    `.npu()`, `"npu"` or `torch.npu.*` is therefore only correct in a file that imports torch_npu.
    This rule makes no edit of its own: when a rule whose edits need torch_npu changed the file,
    the engine adds `import torch_npu  # noqa: F401` once, right after the first `import torch`
    (before a `from torch.cuda import ...` that became `torch.npu`), and records it under NPU100.
    Where that first module-level torch import comes after the first rewritten use (the use sits
    under an `if` that imports torch itself, or in an earlier notebook cell), it goes to the top of
    the file (after the docstring and `__future__` imports) instead.
    The `noqa` comment keeps linters from deleting an import that looks unused.

    A file of module-level assignments only (an mmcv / mmdet / mmengine config file, whose every
    module-level name becomes a setting when the framework loads it) gets no import, which would
    become a setting too (a module object mmcv's `Config` can neither copy nor dump, and a
    duplicate key across `_base_` files); an info diagnostic says the code reading its values
    must import torch_npu.

    ## Example

    ```python
    # before
    import torch
    x = torch.ones(2).cuda()
    # after (with NPU101)
    import torch
    import torch_npu  # noqa: F401
    x = torch.ones(2).npu()
    ```

    ## Fix safety

    Safe: importing torch_npu is what makes the rewritten code run. A file that already imports it
    is left alone, and so is a config file of plain assignments (an mmcv/mmdet config's
    `dist_params = dict(backend='nccl')`, see above), with an info note. Ignore NPU100 only if the
    import happens elsewhere before the file runs.

    ## Targets

    - **npu**: rewrites to the torch_npu form (safe fix)
    - **portable**: never adds `import torch_npu` (torch_npu registers itself through autoload, torch >= 2.5); with a target-version below 2.5 the engine adds the guarded optional import `try: import torch_npu` / `except ImportError: pass` instead (docs/targets.md)
    """

    code = "NPU100"
    supported_targets = frozenset({"npu", "portable"})
    name = "add-torch-npu-import"
    summary = "Add `import torch_npu` once, right after `import torch`, where the rewrite needs it"
    fix = Fix.SAFE
    prefilter = r"(?!)"  # never a reason to parse a file by itself; the engine acts on other rules' edits
    adds_torch_npu_import = True


CASES = [
    Invalid(
        """\
    import torch
    x = torch.ones(2).cuda()
""",
        after="""\
    import torch
    import torch_npu  # noqa: F401
    x = torch.ones(2).npu()
""",
        codes=('NPU100', 'NPU101'),
        with_rules=('NPU101',),
    ),
    # the first module-level `import torch` comes after a rewritten use (segment-anything's
    # notebook: `if using_colab: import torch ... torch.cuda.is_available()` in an early cell):
    # the import goes to the top, above the use
    Invalid(
        """\
using_colab = False
if using_colab:
    import torch
    print("CUDA is available:", torch.cuda.is_available())
import torch
x = torch.ones(2).cuda()
""",
        after="""\
    import torch_npu  # noqa: F401
    using_colab = False
    if using_colab:
        import torch
        print("CUDA is available:", torch.npu.is_available())
    import torch
    x = torch.ones(2).npu()
""",
        codes=('NPU100', 'NPU101', 'NPU120'),
        with_rules=('NPU101', 'NPU120'),
    ),
    # a config file (ControlNet's vendored mmseg `configs/_base_/default_runtime.py`): every
    # module-level name becomes a setting, so no import is added; the reader must import torch_npu
    Invalid(
        """\
log_level = 'INFO'
dist_params = dict(backend='nccl')
""",
        after="""\
log_level = 'INFO'
dist_params = dict(backend='hccl')
""",
        codes=('NPU100', 'NPU140'),
        with_rules=('NPU140',),
    ),
    Valid(
        """\
    import torch
    x = torch.ones(2).npu()
""",
        with_rules=('NPU101',),
    ),
    Invalid(  # ConvNeXt's mmdet/mmseg configs: a config file gets the value, not the import
        """\
    dist_params = dict(backend='nccl')
    log_level = 'INFO'
""",
        after="""\
    dist_params = dict(backend='hccl')
    log_level = 'INFO'
""",
        codes=('NPU100', 'NPU140'),  # NPU100: the info note that the reader must import torch_npu
        with_rules=('NPU140',),
    ),
]
