"""NPU602 `static-shapes`: `drop_last=True` on training loaders, so that every step has one shape."""

from __future__ import annotations

import libcst as cst

from codemods.analyses.tunefacts import DATALOADERS
from codemods.analyses.loops import append_elements
from codemods.api.cases import Invalid, Valid
from codemods.families.tune import TuneRule, line_of
from codemods.model.cstnodes import keyword

BATCH_SIZE_POSITION = 1  # DataLoader(dataset, batch_size=1, shuffle=None, ...)


class StaticShapes(TuneRule):
    """## What it does

    A training `DataLoader(...)` without `drop_last` gets `drop_last=True`; the diagnostic says why
    the last batch would change shape.

    Opt-in: `npu-migrate apply --enable tune` or `--enable static-shapes`.

    ## Why

    A loader over a data set whose size is not a multiple of `batch_size` ends each epoch with a
    smaller batch: a new input shape for every operator of the step. On the NPU that is a new
    operator compilation where kernels compile online (the Atlas training series, or
    `jit_compile=True`), a new graph for `torch.compile`/TorchAir, and new memory-block sizes in
    the caching allocator. 11 of 16 ModelZoo ports read beside their upstream set it.

    Which loaders train is decided from the code: a
    `DataLoader(...)` bound to a name that a `for` loop with a `.backward()` in its body iterates
    (directly or through `enumerate`/`tqdm`/`iter`, also bound to a name first: `pbar = tqdm(loader)`), or bound to a name that says it trains
    (`train_loader`, not `val_train_loader`). Validation and test loaders are never touched. A
    loader given `drop_last`, a `batch_sampler`, `batch_size=None` or `**kwargs` is left alone.

    ## Example

    ```python
    # before
    from torch.utils.data import DataLoader
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
    # after
    from torch.utils.data import DataLoader
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True, drop_last=True)
    ```

    ## Fix safety

    Unsafe: each epoch trains on up to `batch_size - 1` fewer samples (which ones changes from
    epoch to epoch with `shuffle=True`; always the same last ones without). A data set whose size
    is a multiple of `batch_size` loses nothing. The steps before the end of an epoch compute the
    same numbers (`npu-migrate verify` compares them).

    ## Targets

    - **npu**: rewrites (unsafe fix); opt-in
    - **portable**: the same rewrite (`drop_last` is device-generic); opt-in
    """

    code = "NPU602"
    name = "static-shapes"
    summary = "`drop_last=True` on training `DataLoader`s, so that the last batch does not change the shapes"
    prefilter = r"DataLoader"
    supported_targets = frozenset({"npu", "portable"})

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if self.resolve(original_node.func) not in DATALOADERS:
            return updated_node
        why = self.facts.training_loaders.get(line_of(self, original_node))
        if why is None:
            return updated_node
        keywords = {a.keyword.value: a for a in original_node.args if a.keyword}
        if any(a.star for a in original_node.args) or "drop_last" in keywords or "batch_sampler" in keywords:
            return updated_node
        positional = [a for a in original_node.args if not a.keyword]
        batch = keywords["batch_size"].value if "batch_size" in keywords else (
            positional[BATCH_SIZE_POSITION].value if len(positional) > BATCH_SIZE_POSITION else cst.Integer("1"))
        if isinstance(batch, cst.Name) and batch.value == "None":
            return updated_node
        size = cst.Module([]).code_for_node(batch)
        if size == "1":
            return updated_node  # batches of one never change shape
        self.fixed(original_node, f"added `drop_last=True` ({why}): unless the data set's size is a multiple "
                                  f"of `batch_size` ({size}), the last batch of each epoch is smaller, a new "
                                  "shape for every operator (compiled again where kernels compile online, "
                                  f"new memory-block sizes); at most {size} - 1 samples per epoch are dropped")
        return updated_node.with_changes(args=append_elements(
            list(updated_node.args), [keyword("drop_last", cst.Name("True"))], updated_node.whitespace_before_args))


CASES = [
    Invalid(
        """\
        from torch.utils.data import DataLoader

        loader = DataLoader(dataset, batch_size=32, shuffle=True)
        for x, y in loader:
            loss_fn(model(x), y).backward()
        """,
        after="""\
        from torch.utils.data import DataLoader

        loader = DataLoader(dataset, batch_size=32, shuffle=True, drop_last=True)
        for x, y in loader:
            loss_fn(model(x), y).backward()
        """,
    ),
    Invalid(
        """\
        import torch
        train_loader = torch.utils.data.DataLoader(train_set, 64)
        """,
        after="""\
        import torch
        train_loader = torch.utils.data.DataLoader(train_set, 64, drop_last=True)
        """,
    ),
    # the loop iterates a progress bar over the loader
    Invalid(
        """\
        from torch.utils.data import DataLoader
        from tqdm import tqdm

        dataloader = DataLoader(dataset, batch_size=128, shuffle=True)
        pbar = tqdm(dataloader)
        for x, _ in pbar:
            model(x).sum().backward()
        """,
        after="""\
        from torch.utils.data import DataLoader
        from tqdm import tqdm

        dataloader = DataLoader(dataset, batch_size=128, shuffle=True, drop_last=True)
        pbar = tqdm(dataloader)
        for x, _ in pbar:
            model(x).sum().backward()
        """,
    ),
    # an evaluation loader, and one that already chose
    Valid(
        """\
        from torch.utils.data import DataLoader
        val_loader = DataLoader(val_set, batch_size=32)
        train_loader = DataLoader(train_set, batch_size=32, drop_last=False)
        """,
    ),
]
