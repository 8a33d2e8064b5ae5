"""Output shared by the command groups: the consoles (results on standard output, progress and
errors on standard error), progress bars, and the reports more than one command prints
(reconciliation, backfill, onboarding), as a table or as JSON.

Text output is whole: a table's cells wrap and are never cut with "…" (:class:`Table`); off a
terminal (a pipe, a file) lines are as long as their content (:class:`WholeConsole`); values
print as text, never as a Python repr (:func:`plain`).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any

from rich import table as rich_table
from rich.console import Console, ConsoleDimensions
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

#: The width of standard output off a terminal: wide enough that no line wraps.
UNBOUNDED_WIDTH = 1_000_000


class WholeConsole(Console):
    """A console as wide as a terminal on one; off a terminal (piped, redirected) as wide as
    its longest line, so a script or a log reads every line whole, unwrapped."""

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        if self.is_terminal:
            return size
        return ConsoleDimensions(UNBOUNDED_WIDTH, size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size


class Table(rich_table.Table):
    """rich's table whose columns wrap (fold) a cell too wide for them instead of cutting it
    with an ellipsis (rich's default): ids, keys and ARNs are read whole."""

    def add_column(self, header: Any = "", *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("overflow", "fold")
        super().add_column(header, *args, **kwargs)


def plain(value: Any) -> str:
    """A value as text: None as ``-``, a mapping as ``name: value, ...``, a list as
    ``a, b`` (``none`` when empty), a datetime as ISO-8601, nested alike; never a repr."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return ", ".join(f"{k}: {plain(v)}" for k, v in value.items()) or "none"
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(plain(v) for v in value) or "none"
    return str(value)


console = Console(stderr=True, soft_wrap=True)
out = WholeConsole()


def task_bar(*, hidden: bool) -> Progress:
    """The progress bar of a long operation (description, bar, done/total, elapsed) on standard
    error; ``hidden`` for ``--json`` output, so a script reads only the JSON."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=hidden,
    )


def skipped_rows(rep: dict[str, Any]) -> list[tuple[str, Any]]:
    """The rows and objects a reconciliation skipped as recent, as what they are: changed after
    the snapshot, or within the margin before it (their events may still be in flight); one
    row, labelled as both, for a report that does not tell them apart."""
    total = rep["skipped_recent"]
    after = rep.get("skipped_after_snapshot")
    if after is None:
        return [("skipped (changed after the snapshot or in the margin before it)", total)]
    margin = rep.get("margin_s")
    within = f"in the {margin:g} s before the snapshot" if margin else "in the margin before it"
    return [
        ("skipped (changed after the snapshot)", after),
        (f"skipped (changed {within}: events may be in flight)", total - after),
    ]


def render_reconciliation(rep: dict[str, Any]) -> None:
    """A reconciliation's report (:func:`s3ingest.commands.reconcile.reconcile`, or a local or
    fan-out run's) as a table of figures."""
    table = Table(
        title=f"reconciliation ({rep['source']}"
        + (", fan-out" if rep.get("execution") else "")
        + (", dry run)" if rep.get("dry_run") else ")")
    )
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [
        ("bucket rows read", rep.get("bucket_rows")),
        ("bucket keys", rep["bucket_keys"]),
        ("ledger rows", rep["ledger_rows"]),
        ("ledger requests", rep["ledger_requests"]),
        *skipped_rows(rep),
    ]
    rows += [(f"drift: {kind}", n) for kind, n in rep["drift"].items()]
    rows += [
        ("effects pending (re-run by a repair)", rep.get("pending_effects", 0)),
        ("effects behind the row (re-run by a repair)", rep.get("effects_behind", 0)),
    ]
    rows += [
        (f"behind processor {name} (s3ingest reprocess)", n)
        for name, n in sorted((rep.get("effects_behind_by_processor") or {}).items())
    ]
    rows += [
        ("resolved on HEAD", rep["resolved_on_head"]),
        ("repairs queued", rep["repairs_queued"]),
        ("seconds", rep.get("duration_s")),
    ]
    execution = rep.get("execution")
    if execution:
        rows += [("execution", execution["status"]), ("execution arn", execution["arn"])]
    for name, value in rows:
        if value is not None:
            table.add_row(name, plain(value))
    out.print(table)


def emit_backfill(report: dict[str, Any], as_json: bool) -> None:
    """A backfill's status or report: one JSON line, or a table and its first 20 failures."""
    if as_json:
        sys.stdout.write(json.dumps(report, default=str) + "\n")
        return
    table = Table(title="backfill")
    table.add_column("figure")
    table.add_column("value", justify="right")
    execution = report.get("execution")
    if isinstance(execution, dict):  # a fresh local runtime's report: the execution's summary
        table.add_row("execution", str(execution["status"]))
    elif execution:  # a deployed or running local stack's status: the execution's ARN
        table.add_row("execution arn", execution)
    for name in (
        "status",
        "jobId",
        "jobStatus",
        "total",
        "succeeded",
        "failed",
        "effects_pending",
        "temporary_retries",
        "report",
        "converged",
        "error",
        "cause",
    ):
        if name in report and report[name] is not None:
            table.add_row(name, plain(report[name]))
    for text, count in sorted(report.get("result_strings", {}).items()):
        table.add_row(f"tasks: {text}", plain(count))
    out.print(table)
    if report.get("effects_pending"):
        from s3ingest_fn.services.backfill import EFFECTS_FINISH

        out.print(
            f"[yellow]{report['effects_pending']} objects recorded with their effects "
            f"pending[/] (a processor failed after their rows were written): {EFFECTS_FINISH}"
        )
    for failure in report.get("failures", [])[:20]:
        out.print(
            f"  failed: {failure['key']!r} {failure['resultCode']}: {failure['resultString']}"
        )


def foreign_entries(configuration: dict[str, Any]) -> str:
    """The notification configurations other than EventBridge, as ``Queue: id, ...``."""
    notification = configuration.get("notification") or {}
    parts = [
        f"{kind.removesuffix('Configurations')}: {entry.get('Id', '?')}"
        for kind in ("QueueConfigurations", "TopicConfigurations", "LambdaFunctionConfigurations")
        for entry in notification.get(kind, [])
    ]
    return ", ".join(parts)


class OnboardBar:
    """The onboarding's progress bar on standard error: shards done/total and objects
    recorded during the backfill, rows read during the reconciliation."""

    def __init__(self, *, hidden: bool) -> None:
        self._bar = task_bar(hidden=hidden)
        self._task: Any = None

    def __enter__(self) -> Any:
        self._bar.__enter__()
        self._task = self._bar.add_task("checking EventBridge delivery", total=None)
        return self.update

    def update(self, phase: str, done: int, total: int | None, objects: int) -> None:
        if phase == "backfill":
            description = f"listing backfill: shards ({objects} objects recorded)"
        else:
            description = f"{phase} rows"
        self._bar.update(self._task, description=description, completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        self._bar.__exit__(*exc)  # type: ignore[arg-type]


def emit_onboard(report: dict[str, Any], as_json: bool) -> None:
    """An onboarding's report (:func:`s3ingest.onboard.onboard`): one JSON line, or its figures
    and its requests by kind as tables."""
    if as_json:
        sys.stdout.write(json.dumps(report, default=str) + "\n")
        return
    if report["status"] == "declined":
        why = report.get("reason") or "EventBridge delivery left off"
        out.print(f"{report['bucket']}: {why}; nothing done")
        return
    table = Table(title=f"onboarding {report['bucket']}")
    table.add_column("figure")
    table.add_column("value", justify="right", overflow="fold")
    eb = report["event_bridge"]
    backfill = report["backfill"]
    rows = [
        ("EventBridge delivery", "switched on" if eb["switched_on"] else "was on"),
        ("backfill run", backfill["run"]),
        ("execution", f"{backfill['status']} (attempt {backfill['attempt']})"),
        ("shards done", backfill["shards"]["done"]),
        ("objects listed", report["objects"]),
    ]
    rec = report.get("reconciliation")
    if rec and rec.get("skipped"):
        rows.append(("reconciliation", "skipped (--no-reconcile)"))
    elif rec:
        rows += [(f"reconciliation drift: {k}", v) for k, v in rec["drift"].items()]
        rows.append(("repairs queued", rec["repairs_queued"]))
    rows.append(("elapsed seconds", report["elapsed_s"]))
    cost = report["cost"]
    rows.append(
        (
            "estimated cost (USD)",
            f"{cost['usd']:.6f} ({cost['region']} list prices, {cost['prices_as_of']})",
        )
    )
    for name, value in rows:
        table.add_row(name, plain(value))
    out.print(table)
    requests = Table(title=f"requests by kind ({report['requests_source']})")
    requests.add_column("kind")
    requests.add_column("requests", justify="right")
    for kind, n in sorted(report["requests"].items(), key=lambda kv: -kv[1]):
        requests.add_row(kind, str(n))
    out.print(requests)
    pending = report.get("effects_pending") or {}
    if pending.get("count"):
        out.print(
            f"[yellow]{pending['count']} objects recorded with their effects pending[/] (a "
            f"processor failed after their rows were written): {pending['finish']}"
        )
    if report["status"] != "done":
        out.print(
            f"[red]onboarding stopped:[/] execution {backfill['status']}: "
            f"{plain(backfill.get('error'))}: {plain(backfill.get('cause'))}; re-run to resume"
        )


def to_json(doc: Any) -> str:
    """JSON for ``--json`` output (datetimes as ISO-8601)."""
    return json.dumps(doc, default=lambda o: o.isoformat() if isinstance(o, datetime) else str(o))
