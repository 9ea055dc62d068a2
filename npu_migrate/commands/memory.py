"""`npu-migrate memory`: analyse memory snapshots (torch / torch_npu pickles, msMemScope CSV/DB).

    npu-migrate memory FILE [--format text|json|markdown] [--html report.html]   (= report)
    npu-migrate memory events FILE [filters] [--export events.csv|.json]
    npu-migrate memory blocks FILE [filters] [--export blocks.csv|.json]
    npu-migrate memory pool FILE --event N
    npu-migrate memory flame FILE [--event N] [--by frame|operator|thread|stream] [--folded]
    npu-migrate memory compare A B
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from npu_migrate.memory.model import Snapshot

SUBCOMMANDS = ("report", "events", "blocks", "pool", "flame", "compare")
# the trace actions `--action` accepts (npu_migrate.memory.model.ACTIONS, kept here so that
# `--help` does not import numpy)
ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "snapshot", "workspace_snapshot", "annotate",
           "user_defined", "other")


class DefaultToReport(click.Group):
    """`memory FILE ...` means `memory report FILE ...`; a bad option value is one line."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in SUBCOMMANDS and args[0] not in ("-h", "--help"):
            args = ["report", *args]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            fatal(" ".join(exc.format_message().split()))


class OutputError(Exception):
    """An output path (-o, --html, --export) that cannot be written."""


def fatal(message: str) -> None:
    click.echo(f"npu-migrate memory: error: {message}", err=True)
    sys.exit(2)


def guarded(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn bad input into one line on stderr and exit code 2."""
    import functools

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from npu_migrate.memory.loader import SnapshotError

        try:
            return func(*args, **kwargs)
        except (SnapshotError, OutputError, ValueError) as exc:
            fatal(str(exc))
        except RecursionError:
            fatal("input nested too deeply to analyse")
        except MemoryError:
            fatal("out of memory while analysing the input")
    return wrapper


def load(path: str) -> Snapshot:
    from npu_migrate.memory.loader import load_snapshot

    return load_snapshot(path)


def emit(report: Any, fmt: str, output: str | None, kind: str = "report",
         details: dict[int, dict[str, Any]] | None = None,
         devices: list[dict[str, Any]] | None = None,
         flames: list[dict[str, Any]] | None = None) -> None:
    """Write `report` as text (plain when piped or written to a file), markdown or typed JSON
    (docs/schemas/memory-report.schema.json) to stdout or `output`."""
    from npu_migrate.memory import output as out

    if fmt == "json":
        text = out.to_json_text(out.document(kind, report, details, devices, flames))
    elif fmt == "markdown":
        text = report.to_markdown() + "\n" + out.summary_line(report.findings) + "\n"
    elif output or not sys.stdout.isatty():
        text = out.to_plain_text(report)
    else:  # a terminal: rich tables, then the findings one per line
        from rich.console import Console

        console = Console()
        findings, report.findings = report.findings, []
        report.render(console)
        report.findings = findings
        text = "".join(f.format() + "\n" for f in findings) + out.summary_line(findings) + "\n"
    if output:
        write_text(output, text)
    else:
        click.echo(text, nl=False)


def write_text(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write: {exc.strerror or exc}") from None


FILE = click.argument("file")  # checked by the loader: one line, exit 2
FORMAT = click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]),
                      default="text", help="text (plain when piped), markdown or typed JSON.")
OUTPUT = click.option("-o", "--output",
                      help="Write the output to this file instead of stdout.")
DEVICE = click.option("--device", "devices", type=click.IntRange(min=0), multiple=True,
                      help="Only these device indices (repeatable).")
THRESHOLD_HELP = ("a share of the block's lifetime (e.g. 50%) or a time (200us, 1.5ms, 2s); "
                  "msMemScope exports with ACCESS events")


def chosen_devices(snapshot: Any, file: str, devices: tuple[int, ...]) -> list[int]:
    """The --device values, each of which must be a device of the file."""
    present = snapshot.devices
    missing = [d for d in devices if d not in present]
    if missing:
        raise ValueError(f"{file}: --device {missing[0]}: the file has device(s) "
                         f"{', '.join(map(str, present)) or 'none'}")
    return list(devices) or present


@click.group(cls=DefaultToReport, context_settings={"help_option_names": ["-h", "--help"]})
def command() -> None:
    """Analyse a memory snapshot: peak, leaks, fragmentation, OOMs, wasteful blocks, advice.

    FILE is a pickle from torch.cuda.memory._dump_snapshot or
    torch_npu.npu.memory._dump_snapshot, or an msMemScope memscope_dump CSV/DB export.
    `npu-migrate memory FILE` runs `report`. See docs/memory.md.
    """


@command.command("report")
@FILE
@FORMAT
@click.option("--html", "html_path",
              help="Also write a self-contained offline HTML report here.")
@OUTPUT
@click.option("--step-frame", help="Regex over frames written 'file:line function'; each run "
              "of allocations with a matching frame starts a step (overrides markers), e.g. "
              "'optim/[a-z_]+\\.py:\\d+ step$'.")
@click.option("--lazy", "lazy", default="50%", show_default=True,
              help="lazy_used when the first access comes later than this: " + THRESHOLD_HELP)
@click.option("--delayed", "delayed", default="50%", show_default=True,
              help="delayed_free when the free comes this long after the last access: "
              + THRESHOLD_HELP)
@click.option("--idle", "idle", default="50%", show_default=True,
              help="long_idle when two accesses are this far apart: " + THRESHOLD_HELP)
@DEVICE
@guarded
def report_cmd(file: str, fmt: str, html_path: str | None, output: str | None,
               step_frame: str | None, lazy: str, delayed: str, idle: str,
               devices: tuple[int, ...]) -> None:
    """Findings and tables for FILE (the default subcommand)."""
    from npu_migrate.memory.report import analyze, device_records
    from npu_migrate.memory.waste import Thresholds, parse_threshold

    thresholds = Thresholds(parse_threshold(lazy, "--lazy"), parse_threshold(delayed, "--delayed"),
                            parse_threshold(idle, "--idle"))
    for path, what in ((html_path, "--html"), (output, "-o")):
        if path:
            check_writable(path, what)
    snapshot = load(file)
    report, contexts = analyze(snapshot, chosen_devices(snapshot, file, devices), step_frame,
                               thresholds)
    if html_path:
        from npu_migrate.memory.html import write_html

        try:
            write_html(snapshot, contexts, report, html_path, thresholds)
        except OSError as exc:
            raise OutputError(f"{html_path}: cannot write: {exc.strerror or exc}") \
                from None
        report.summary["html"] = html_path
    details = {k: v for c in contexts for k, v in c.details.items()}
    emit(report, fmt, output, "report", details, device_records(contexts))


def check_writable(path: str, what: str) -> None:
    """Fail before the analysis, not after it, when an output cannot be written."""
    import os

    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise OutputError(f"{path}: cannot write {what}: it is a directory")
    if not os.path.isdir(folder):
        raise OutputError(f"{path}: cannot write {what}: no folder {folder}")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise OutputError(f"{path}: cannot write {what}: permission denied")


def _filters(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed([
        click.option("--min-size", help="Smallest size shown (e.g. 1M)."),
        click.option("--max-size", help="Largest size shown."),
        click.option("--start", type=click.IntRange(min=0), help="First event id."),
        click.option("--end", type=click.IntRange(min=0), help="Last event id."),
        click.option("--since", "since_s", type=click.FloatRange(min=0),
                     help="Seconds after the first event."),
        click.option("--until", "until_s", type=click.FloatRange(min=0),
                     help="Seconds after the first event."),
        click.option("--limit", type=click.IntRange(min=0), default=50, show_default=True,
                     help="Rows printed (exports are not limited)."),
        click.option("--export", "export_path",
                     help="Write all matching rows to a .csv or .json file."),
        FORMAT, OUTPUT, DEVICE,
    ]):
        func = option(func)
    return func


def _view(file: str, devices: tuple[int, ...], kind: str, args: dict[str, Any]) -> None:
    from npu_migrate.core.diagnostics import Report
    from npu_migrate.memory import views
    from npu_migrate.memory.context import DeviceContext
    from npu_migrate.memory.sites import SiteTable

    snapshot = load(file)
    sites = SiteTable(snapshot.stacks)
    report = Report(f"{kind.title()} view: {file}")
    exported: list[dict[str, Any]] = []
    min_size, max_size = views.parse_size(args["min_size"]), views.parse_size(args["max_size"])
    for device in chosen_devices(snapshot, file, devices):
        ctx = DeviceContext.build(snapshot, device, sites)
        lo, hi = views.event_range(ctx, args["start"], args["end"], args["since_s"],
                                   args["until_s"])
        make: Callable[[DeviceContext, Any, bool], list[dict[str, Any]]]
        if kind == "events":
            ids = views.select_events(ctx, lo, hi, min_size, max_size, args["actions"])
            columns = views.EVENT_COLUMNS
            make = views.event_records
        else:
            ids = views.select_blocks(ctx, lo, hi, min_size, max_size, args["states"])
            columns = views.BLOCK_COLUMNS
            make = views.block_records
        report.summary[f"device {device} {kind}"] = len(ids)
        if args["export_path"]:
            exported += [{"device": device, **r} for r in make(ctx, ids, True)]
        shown = make(ctx, ids[:args["limit"]], False)
        report.tables.append(views.as_table(f"Device {device}: {kind} {lo}-{hi - 1}"
                                           f" ({len(ids)} match, {len(shown)} shown)",
                                           columns, shown))
    if args["export_path"]:
        views.export(exported, ["device", *columns], args["export_path"])
        report.summary["exported rows"] = len(exported)
        report.summary["exported to"] = args["export_path"]
    emit(report, args["fmt"], args["output"], kind)


@command.command("events")
@FILE
@_filters
@click.option("--action", "actions", multiple=True, type=click.Choice(ACTIONS),
              help="Only these actions (repeatable).")
@guarded
def events_cmd(file: str, devices: tuple[int, ...], **args: Any) -> None:
    """Event view: ID, action, address, size, stream, allocated, active, reserved, stack."""
    _view(file, devices, "events", args)


@command.command("blocks")
@FILE
@_filters
@click.option("--state", "states", multiple=True,
              type=click.Choice(["active_allocated", "active_pending_free", "freed"]))
@guarded
def blocks_cmd(file: str, devices: tuple[int, ...], **args: Any) -> None:
    """Block view: ID, requested size, size, address, state, alloc/free event, stack."""
    _view(file, devices, "blocks", args)


@command.command("pool")
@FILE
@click.option("--event", type=int, required=True,
              help="Pool state after this event id (-1: before the first event).")
@FORMAT
@OUTPUT
@DEVICE
@guarded
def pool_cmd(file: str, event: int, fmt: str, output: str | None,
             devices: tuple[int, ...]) -> None:
    """Segments and blocks (with states) as they were after an event."""
    from npu_migrate.core.diagnostics import Report, Table
    from npu_migrate.memory.context import Bytes, DeviceContext
    from npu_migrate.memory.replay import STATE_NAMES
    from npu_migrate.memory.sites import SiteTable

    snapshot = load(file)
    sites = SiteTable(snapshot.stacks)
    report = Report(f"Pool after event {event}: {file}")
    for device in chosen_devices(snapshot, file, devices):
        ctx = DeviceContext.build(snapshot, device, sites)
        if not -1 <= event < max(ctx.rep.n_events, 0):
            raise ValueError(f"{file}: --event {event}: device {device} has events "
                             f"-1-{ctx.rep.n_events - 1}")
        pool = ctx.pool(event)
        blocks = ctx.rep.blocks
        allocated = blocks.allocated_at(event)
        rows = []
        for seg in pool.segments:
            rows.append(["segment", hex(seg.address), Bytes(seg.size), None, None, None,
                         Bytes(seg.free), Bytes(seg.largest_gap)])
            for r in seg.rows.tolist():
                state = STATE_NAMES[0] if allocated[r] else STATE_NAMES[1]
                rows.append(["block", hex(int(blocks.addr[r])), Bytes(blocks.size[r]), state, r,
                             sites.site(int(blocks.stack[r])), None, None])
        report.summary[f"device {device} reserved"] = Bytes(pool.reserved)
        report.summary[f"device {device} free"] = Bytes(pool.free)
        report.summary[f"device {device} largest free block"] = Bytes(pool.largest_gap)
        report.tables.append(Table(f"Device {device}", [
            "kind", "address", "size", "state", "block id", "site", "free", "largest free"],
            rows))
    emit(report, fmt, output, "pool")


@command.command("flame")
@FILE
@click.option("--event", type=int, help="Live memory after this event id (default: the peak; "
              "-1: before the first event).")
@click.option("--by", "view", type=click.Choice(["frame", "operator", "thread", "stream"]),
              default="frame", show_default=True,
              help="Group by call stack, operator, thread or stream (then by stack).")
@click.option("--min-share", type=click.FloatRange(0, 100), default=1.0, show_default=True,
              help="Leave out frames holding less than this percentage.")
@click.option("--folded", is_flag=True,
              help="Write folded stacks ('a;b;c bytes', for flamegraph.pl or speedscope).")
@FORMAT
@OUTPUT
@DEVICE
@guarded
def flame_cmd(file: str, event: int | None, view: str, min_share: float, folded: bool,
              fmt: str, output: str | None, devices: tuple[int, ...]) -> None:
    """Live bytes by call stack (an icicle), operator, thread or stream at the peak or any
    event."""
    import numpy as np

    from npu_migrate.core.diagnostics import Report, Table
    from npu_migrate.memory import flame
    from npu_migrate.memory.context import Bytes, DeviceContext
    from npu_migrate.memory.sites import SiteTable

    snapshot = load(file)
    sites = SiteTable(snapshot.stacks)
    report = Report(f"Live memory by {view}: {file}")
    trees, lines = [], []
    for device in chosen_devices(snapshot, file, devices):
        ctx = DeviceContext.build(snapshot, device, sites)
        moment = ctx.rep.peak_index if event is None else event
        if not -1 <= moment < max(ctx.rep.n_events, 0):
            raise ValueError(f"{file}: --event {moment}: device {device} has events "
                             f"-1-{ctx.rep.n_events - 1}")
        root = flame.tree(ctx, np.flatnonzero(ctx.rep.blocks.allocated_at(moment)), view)
        floor = int(root.bytes * min_share / 100)
        trees.append({"device": device, "event": moment, "by": view,
                      "tree": root.to_json(max(floor, 1))})
        lines += [f"device{device};{line}" for line in root.folded()]
        report.summary[f"device {device} event"] = moment
        report.summary[f"device {device} allocated"] = Bytes(root.bytes)
        report.tables.append(Table(
            f"Device {device}: allocated after {ctx.when(moment)} by {view}",
            ["depth", "frame", "bytes", "blocks", "share"],
            [[depth, node.name, Bytes(node.bytes), node.blocks,
              round(100 * node.bytes / max(root.bytes, 1), 1)]
             for depth, node in root.lines(floor)]))
    if folded:
        if output:
            write_text(output, "\n".join(lines) + "\n")
        else:
            click.echo("\n".join(lines))
        return
    emit(report, fmt, output, "flame", flames=trees)


@command.command("compare")
@click.argument("before")
@click.argument("after")
@FORMAT
@OUTPUT
@guarded
def compare_cmd(before: str, after: str, fmt: str, output: str | None) -> None:
    """Peaks and per-site differences at the peak between two snapshots."""
    from npu_migrate.memory.compare import compare

    report, records = compare(load(before), load(after))
    details = {id(f): r for f, r in zip(report.findings, records)}
    emit(report, fmt, output, "compare", details)
