"""NPU400 `amp`: autocast around the forward pass and loss; GradScaler with fp16."""

from pathlib import Path
from textwrap import dedent

import pytest
import rule_cases

from codemods.api.registry import all_rules, select_rules


def migrate(src: str, dtype: str | None = None, enable=("amp",), select=("NPU100",)):
    return rule_cases.migrate(dedent(src), list(select), "train.py", enable=enable,
                              options={"amp_dtype": dtype} if dtype else {})


def after(src: str, dtype: str | None = None, **kwargs) -> str:
    outcome = migrate(src, dtype, **kwargs)
    return outcome.new_text if outcome.new_text is not None else dedent(src)


# The bf16 insertions and the sources the rule leaves alone are CASES of NPU400 (in its rule module: run by
# test_rule_cases.py, shown on the rule pages); the tests here check what a case cannot.


FP16_LOOP = """\
    import torch

    def train(model, loader, optimizer, scheduler, epochs):
        model.train()
        for epoch in range(epochs):
            for step, (x, y) in enumerate(loader):
                logits = model(x)
                loss = torch.nn.functional.cross_entropy(logits, y) / 2
                loss.backward()
                if (step + 1) % 2 == 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
            torch.save({
                'model': model.state_dict(),
                'optimizer': optimizer.state_dict(),
            }, "ckpt.pt")
    """

FP16_EXPECTED = """\
    import torch
    import torch_npu  # noqa: F401

    def train(model, loader, optimizer, scheduler, epochs):
        model.train()
        scaler = torch.amp.GradScaler("npu")
        for epoch in range(epochs):
            for step, (x, y) in enumerate(loader):
                with torch.autocast(device_type="npu", dtype=torch.float16):
                    logits = model(x)
                    loss = torch.nn.functional.cross_entropy(logits, y) / 2
                scaler.scale(loss).backward()
                if (step + 1) % 2 == 0:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    scaler.step(optimizer)
                    scaler.update()
                    scheduler.step()
                    optimizer.zero_grad()
            torch.save({
                'model': model.state_dict(),
                'optimizer': optimizer.state_dict(),
                'scaler': scaler.state_dict(),
            }, "ckpt.pt")
    """


def test_fp16_scaler_accumulation_clipping_and_checkpoint():
    outcome = migrate(FP16_LOOP, "float16")
    assert outcome.new_text == dedent(FP16_EXPECTED)
    lines = {e.line: e.message for e in outcome.edits if e.code == "NPU400"}
    assert "GradScaler" in lines[5] and "unscale_" in lines[11] and "scaler.step" in lines[12]
    assert "checkpoint" in lines[15]
    assert after(FP16_EXPECTED, "float16") == dedent(FP16_EXPECTED)


def test_fp16_top_level_script_loop_and_one_line_checkpoint():
    src = """\
    import torch
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        for x, y in loader:
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        torch.save({"opt": opt.state_dict()}, "c.pt")
    """
    assert after(src, "fp16") == dedent("""\
    import torch
    import torch_npu  # noqa: F401
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("npu")
    for epoch in range(3):
        for x, y in loader:
            with torch.autocast(device_type="npu", dtype=torch.float16):
                loss = crit(model(x), y)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        torch.save({"opt": opt.state_dict(), "scaler": scaler.state_dict()}, "c.pt")
    """)


def test_fp16_scaler_name_avoids_existing_names():
    src = """\
    import torch
    scaler = MinMaxScaler()
    for x in loader:
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
    """
    text = after(src, "float16")
    assert 'npu_scaler = torch.amp.GradScaler("npu")' in text
    assert "npu_scaler.scale(loss).backward()" in text and "scaler = MinMaxScaler()" in text


def test_fp16_needs_a_loop_for_the_scaler():
    src = """\
    import torch
    def train_step(model, x, opt):
        loss = model(x).mean()
        loss.backward()
        opt.step()
    """
    outcome = migrate(src, "float16")
    assert outcome.new_text is None
    [diag] = outcome.diagnostics
    assert diag.code == "NPU400" and diag.line == 4 and "GradScaler" in diag.message
    # bf16 needs no scaler: the same step is wrapped
    assert "with torch.autocast(" in after(src)


def test_fp16_closure_step_and_several_optimizers_are_left_alone():
    closure = """\
    import torch
    for x in loader:
        loss = model(x).sum()
        loss.backward()
        optimizer.step(closure)
    """
    outcome = migrate(closure, "float16")
    assert outcome.new_text is None and "plain statement" in outcome.diagnostics[0].message
    two = """\
    import torch
    for x in loader:
        loss = model(x).sum()
        loss.backward()
        opt_a.step()
        opt_b.step()
    """
    outcome = migrate(two, "float16")
    assert outcome.new_text is None and "several optimizers" in outcome.diagnostics[0].message


UNRECOGNISED = [
    ("""\
     import torch
     for x, y in loader:
         criterion(model(x), y).backward()
         optimizer.step()
     """, "inside the `.backward()` call"),
    ("""\
     import torch
     for x, y in loader:
         loss = criterion(model(x), y)
         loss.backward()
     """, "no optimizer `.step()`"),
    ("""\
     import torch
     for real in loader:
         d_loss = disc(real).mean() - disc(gen(noise())).mean()
         d_loss.backward()
         d_opt.step()
         g_loss = -disc(gen(noise())).mean()
         g_loss.backward()
         g_opt.step()
     """, "several `.backward()`"),
    ("""\
     import torch
     def fit(model, loss, optimizer):
         loss.backward()
         optimizer.step()
     """, "not computed in the statements just above"),
    ("""\
     import torch
     for x in loader:
         loss = model(x); loss.backward()
         optimizer.step()
     """, "not a statement of its own"),
]


@pytest.mark.parametrize("src,why", UNRECOGNISED)
def test_unrecognised_shapes_are_left_alone_with_a_reason(src, why):
    outcome = migrate(src)
    assert outcome.new_text is None
    assert outcome.diagnostics and {d.code for d in outcome.diagnostics} == {"NPU400"}
    assert all(why in d.message and d.line > 2 for d in outcome.diagnostics)


ALREADY_AMP = [
    """\
    import torch
    scaler = torch.cuda.amp.GradScaler()
    for x, y in loader:
        with torch.cuda.amp.autocast():
            loss = crit(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    """,
    """\
    import torch
    from apex import amp
    model, opt = amp.initialize(model, opt, opt_level="O1")
    for x, y in loader:
        loss = crit(model(x), y)
        with amp.scale_loss(loss, opt) as scaled:
            scaled.backward()
        opt.step()
    """,
    """\
    import torch
    from apex import amp
    for x, y in loader:
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
    """,
]


@pytest.mark.parametrize("src", ALREADY_AMP)
def test_code_already_using_amp_is_left_alone(src):
    outcome = migrate(src)
    assert outcome.new_text is None
    assert all(d.code == "NPU400" and "already" in d.message for d in outcome.diagnostics)


def test_suppression_comment_leaves_the_loop_alone():
    src = """\
    import torch
    for x, y in loader:  # npu-migrate: ignore[NPU400]
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
    """
    assert migrate(src).new_text is None


def test_unknown_dtype_is_an_error():
    outcome = migrate("import torch\nfor x in l:\n    loss = m(x)\n    loss.backward()\n    o.step()\n",
                      "int8")
    assert outcome.new_text is None
    assert [d.severity.name for d in outcome.diagnostics] == ["ERROR"]
    assert "amp_dtype" in outcome.diagnostics[0].message


def test_works_together_with_default_rules_in_the_same_block():
    src = """\
    import torch
    for x, y in loader:
        x = x.cuda()
        out = model(x.cuda())
        loss = crit(out, y)
        loss.backward()
        opt.step()
    """
    text = after(src, select=("NPU100", "NPU101"))
    assert text == dedent("""\
    import torch
    import torch_npu  # noqa: F401
    for x, y in loader:
        x = x.npu()
        with torch.autocast(device_type="npu", dtype=torch.bfloat16):
            out = model(x.npu())
            loss = crit(out, y)
        loss.backward()
        opt.step()
    """)


def test_selected_by_name_and_code_but_not_by_default():
    names = {r.code for r in select_rules(all_rules())}
    assert "NPU400" not in names
    # NPU400's `device_type="npu"` needs `import torch_npu`: selecting it brings NPU100, which adds it
    assert [r.code for r in select_rules(all_rules(), select=["amp"])] == ["NPU400", "NPU100"]
    enabled = select_rules(all_rules(), enable=["amp", "pin-memory", "memory-snapshot"])
    assert {"NPU400", "NPU410", "NPU420"} <= {r.code for r in enabled}


def test_fp16_top_level_loop_with_step_markers_is_idempotent():
    src = """\
    import torch
    # train
    for x, y in loader:
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
    """
    enable = ("amp", "memory-snapshot")
    once = after(src, "float16", enable=enable)
    assert 'scaler = torch.amp.GradScaler("npu")\nfor npu_migrate_step, (x, y) in enumerate(loader):' in once
    assert "ProfilerStep#" in once and "scaler.scale(loss).backward()" in once
    assert after(once, "float16", enable=enable) == once


def test_forward_is_found_across_zero_grad_transfers_and_logging():
    src = """\
    import torch
    for x, y in loader:
        x, y = batch
        out = model(x.to(device))
        optimizer.zero_grad()
        y = y.to(device)
        log.debug("step")
        loss = crit(out, y)
        loss.backward()
        optimizer.step()
    """
    assert after(src) == dedent("""\
    import torch
    import torch_npu  # noqa: F401
    for x, y in loader:
        x, y = batch
        with torch.autocast(device_type="npu", dtype=torch.bfloat16):
            out = model(x.to(device))
            optimizer.zero_grad()
            y = y.to(device)
            log.debug("step")
            loss = crit(out, y)
        loss.backward()
        optimizer.step()
    """)


def test_a_backward_pass_without_optimizer_is_only_an_info():
    outcome = migrate("import torch\nx = torch.ones(2, requires_grad=True)\ndef grad(f):\n"
                      "    y = f(x).sum()\n    y.backward()\n    return x.grad\n")
    assert outcome.new_text is None
    assert [(d.code, d.severity.name) for d in outcome.diagnostics] == [("NPU400", "INFO")]
    functional = "import torch\nfor x in data:\n    loss = m(x)\n    torch.autograd.backward(loss)\n    opt.step()\n"
    assert migrate(functional).diagnostics == [] and migrate(functional).new_text is None


def test_a_transformers_style_loop_with_all_three_rules():
    """Accumulation, clipping, a scheduler, `**batch`, an eval loop and a checkpoint together."""
    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "insertion"
    src = (fixtures / "hf_style.py").read_text()
    enable = ("amp", "pin-memory", "memory-snapshot")
    outcome = migrate(src, "fp16", enable=enable)
    assert outcome.new_text == (fixtures / "hf_style.fp16.expected").read_text()
    assert after(outcome.new_text, "fp16", enable=enable) == outcome.new_text
    assert [(d.code, d.line) for d in outcome.diagnostics] == [("NPU410", 8)]


# -- generated training loops: the rewrite always parses, is idempotent and keeps every line ------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

PREPARE = ["x, y = batch", "x = x.to(device)", "optimizer.zero_grad()", "# a comment", "",
           "log.info('step %d', i)"]
FORWARD = ["out = model(x)", "out = model(x)  # forward", "feats = encoder(x)\n{i}out = head(feats)"]
LOSS = ["loss = criterion(out, y)", "loss = criterion(out, y) / accum",
        "loss = criterion(\n{i}    out, y)"]
AFTER = ["", "total += loss.item()", "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"]


@st.composite
def training_loops(draw):
    in_function = draw(st.booleans())
    indent = "        " if in_function else "    "
    lines = ["import torch", ""]
    if in_function:
        lines.append("def train(model, loader, optimizer, criterion, device, accum=2):")
    header = draw(st.sampled_from(["for batch in loader:", "for i, batch in enumerate(loader):"]))
    lines.append(indent[:-4] + header)
    body = draw(st.lists(st.sampled_from(PREPARE), max_size=3))
    body += [draw(st.sampled_from(FORWARD)), draw(st.sampled_from(LOSS)), "loss.backward()"]
    body.append(draw(st.sampled_from(AFTER)))
    if draw(st.booleans()):
        body += ["if (i + 1) % accum == 0:", "    optimizer.step()", "    optimizer.zero_grad()"]
    else:
        body.append("optimizer.step()")
    for line in body:
        lines.append((indent + line.replace("{i}", indent)) if line else "")
    return "\n".join(lines) + "\n"


@settings(max_examples=40, deadline=None)
@given(training_loops(), st.sampled_from(["bfloat16", "float16"]))
def test_generated_loops(src, dtype):
    import ast

    outcome = migrate(src, dtype)
    text = outcome.new_text if outcome.new_text is not None else src
    ast.parse(text)
    if dtype == "float16" and "clip_grad_norm_" in src and "accum == 0" in src:
        # clipping on every micro-step would call `scaler.unscale_` twice before `update()`
        assert outcome.new_text is None and "clip next to" in outcome.diagnostics[0].message
        return
    assert "with torch.autocast(" in text, outcome.diagnostics
    if dtype == "float16":
        assert "scaler.scale(loss).backward()" in text and "scaler.step(optimizer)\n" in text
        assert ("scaler.unscale_(optimizer)" in text) == ("clip_grad_norm_" in src)
    assert after(text, dtype) == text
    # nothing the user wrote is lost: every original line survives (indented, at most)
    kept = [line.strip() for line in text.splitlines()]
    for line in src.splitlines():
        if line.strip() and line.strip() not in ("loss.backward()", "optimizer.step()"):
            assert line.strip() in kept, line
