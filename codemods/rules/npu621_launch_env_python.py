"""NPU621 `launch-env-python`: a training script sets the Ascend launch environment itself, unless
its launcher does."""

from __future__ import annotations

import libcst as cst

from codemods.api.cases import Invalid, Valid
from codemods.api.targets import api_table
from codemods.families.tune import TuneRule, launch_settings


class LaunchEnvPython(TuneRule):
    """## What it does

    A Python training script (a `__main__` guard, or module-level code that calls `.backward()`,
    in a file that calls `.backward()` or builds the optimizer: a `torch.optim` class or a helper
    named `build_optimizer`/`create_optimizer`..., as scripts whose step runs in an `engine.py`
    behind a loss scaler do) gets `os.environ.setdefault(NAME, VALUE)` after its imports for each Ascend launch variable
    it does not name yet: `TASK_QUEUE_ENABLE=2`, `CPU_AFFINITY_CONF=1`,
    `PYTORCH_NPU_ALLOC_CONF=expandable_segments:True`, `ACL_OP_COMPILER_CACHE_MODE=enable`. What
    each does and from which torch_npu release is on NPU620's page (the launch-script twin).

    Opt-in: `npu-migrate apply --enable tune` or `--enable launch-env-python`.

    ## Why

    Scripts started without a launch script (`python train.py`, a notebook, a scheduler) still
    get the environment every ModelZoo port launches with. torch_npu reads these variables when
    the device is first used (the dispatch queue, core binding and the allocator start lazily),
    so setting them after the imports and before the first device call takes effect.
    `setdefault` keeps whatever the launcher exported.

    ## Example

    ```python
    # before
    import torch

    if __name__ == "__main__":
        for x, y in loader:
            loss_fn(model(x), y).backward()

    # after
    import torch
    import os
    os.environ.setdefault("ACL_OP_COMPILER_CACHE_MODE", "enable")
    os.environ.setdefault("CPU_AFFINITY_CONF", "1")
    os.environ.setdefault("PYTORCH_NPU_ALLOC_CONF", "expandable_segments:True")
    os.environ.setdefault("TASK_QUEUE_ENABLE", "2")

    if __name__ == "__main__":
        for x, y in loader:
            loss_fn(model(x), y).backward()
    ```

    ## Fix safety

    Safe for the values computed (speed and memory layout only); `setdefault` never overrides the
    launcher's value. A script that names `PYTORCH_NPU_ALLOC_CONF` already is left to its own
    setting.

    ## Targets

    - **npu**: inserts the settings (safe fix); opt-in; per variable, the torch_npu release on NPU620's page
    - **portable**: reports only (the variables are read by torch_npu only)
    """

    code = "NPU621"
    name = "launch-env-python"
    summary = "Training scripts `os.environ.setdefault` the Ascend launch environment"
    prefilter = r"\.backward\(|optim"
    api = "TASK_QUEUE_ENABLE=2"

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not self.training_start(original_node):
            return updated_node
        wanted, too_new = launch_settings(self.context.source, self.context.options)
        for entry in too_new:
            self.report(original_node, f"`{entry['name']}={entry['value']}` not set: it needs torch_npu "
                                       f"{api_table()[entry['api']]['since']}, target-version is "
                                       f"{self.context.options.get('target_version')}")
        if not wanted:
            return updated_node
        if not self.report_only:  # under --target portable the insertion is only reported
            self.context.require_import("os")
            for entry in wanted:
                self.context.definitions.add(f'os.environ.setdefault("{entry["name"]}", "{entry["value"]}")')
        self.fixed(original_node, "set the Ascend launch environment after the imports (the launcher's "
                                  "values win): " + "; ".join(f"`{e['name']}={e['value']}`" for e in wanted))
        return updated_node


CASES = [
    Invalid(
        """\
        import torch

        if __name__ == "__main__":
            for x, y in loader:
                loss_fn(model(x), y).backward()
        """,
        after="""\
        import torch
        import os
        os.environ.setdefault("ACL_OP_COMPILER_CACHE_MODE", "enable")
        os.environ.setdefault("CPU_AFFINITY_CONF", "1")
        os.environ.setdefault("PYTORCH_NPU_ALLOC_CONF", "expandable_segments:True")
        os.environ.setdefault("TASK_QUEUE_ENABLE", "2")

        if __name__ == "__main__":
            for x, y in loader:
                loss_fn(model(x), y).backward()
        """,
        codes=("NPU621", "NPU100"),
    ),
    # the step runs in another module (an engine behind a loss scaler): the script builds the optimizer
    Invalid(
        """\
        import torch
        from engine import train_one_epoch

        def main():
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            train_one_epoch(model, optimizer)

        if __name__ == "__main__":
            main()
        """,
        after="""\
        import torch
        import os
        from engine import train_one_epoch
        os.environ.setdefault("ACL_OP_COMPILER_CACHE_MODE", "enable")
        os.environ.setdefault("CPU_AFFINITY_CONF", "1")
        os.environ.setdefault("PYTORCH_NPU_ALLOC_CONF", "expandable_segments:True")
        os.environ.setdefault("TASK_QUEUE_ENABLE", "2")

        def main():
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            train_one_epoch(model, optimizer)

        if __name__ == "__main__":
            main()
        """,
        codes=("NPU621", "NPU100"),
    ),
    # an evaluation script: an entry point that neither trains nor builds an optimizer
    Valid(
        """\
        import torch

        if __name__ == "__main__":
            print(model(torch.ones(2)).argmax())
        """,
    ),
    # a library module: no entry point, nothing to set
    Valid(
        """\
        def train_step(model, x, y):
            loss_fn(model(x), y).backward()
        """,
    ),
]
