"""The history table on the local runtime (``historyTable``): the stack's history writer
(:func:`s3ingest_fn.handlers.history.write_batch`) fed by the history queue, which a rule on the
change bus fills, as deployed; the catalog is pyiceberg's SQLite ``sql`` catalog and the
warehouse a folder, both under the run directory's ``history/`` (deployed: Glue and S3).

A folder, not the emulator's S3: pyiceberg writes through pyarrow's S3 file system, which needs
an HTTP endpoint, and the scenarios' emulator runs in-process without one; the folder also
outlives the emulator, so ``s3ingest history ... --local`` reads the table after a scenario.
One table per run directory: a fresh local deployment (a scenario, ``local up``) starts it
empty, as its ledger starts.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from s3ingest.local.stack.sources import SqsEventSource, replay_archive

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from s3ingest.local.stack.provisioning import Resources

#: The run directory's folder of the local history table, its catalog file and warehouse.
HISTORY_DIR = "history"
CATALOG_FILE = "catalog.db"
WAREHOUSE_DIR = "warehouse"
#: The table, ``namespace.name`` (deployed: the stack's Glue database and table).
TABLE = "s3ingest.history"


def history_dir(directory: Path | None = None) -> Path:
    """The local history folder: ``directory``, else the run directory's ``history/``
    (:func:`s3ingest.local.stack.run_directory.run_dir`)."""
    from s3ingest.local.stack.run_directory import run_dir

    return directory if directory is not None else run_dir() / HISTORY_DIR


def local_env(directory: Path) -> dict[str, str]:
    """The history writer's environment for the table in ``directory`` (``HISTORY_CATALOG``,
    ``HISTORY_TABLE``), as the stack gives the function its Glue catalog's."""
    from s3ingest_fn.services.history import HISTORY_CATALOG, HISTORY_TABLE

    catalog = {
        "type": "sql",
        "uri": f"sqlite:///{directory / CATALOG_FILE}",
        "warehouse": (directory / WAREHOUSE_DIR).resolve().as_uri(),
    }
    return {HISTORY_CATALOG: json.dumps(catalog), HISTORY_TABLE: TABLE}


def local_table(directory: Path | None = None, *, fresh: bool = False) -> Table:
    """The local history table (``fresh``: what the folder held removed first, the table
    created empty).

    Raises
    ------
    LookupError
        Not ``fresh`` and no table there (no local deployment with ``historyTable`` ran).
    """
    from s3ingest_fn.services.history import catalog_from_env, ensure_table

    where = history_dir(directory)
    if fresh:
        shutil.rmtree(where, ignore_errors=True)
    elif not (where / CATALOG_FILE).is_file():
        raise LookupError(
            f"no local history table in {where}: run a local deployment with the history table "
            'on (a scenario whose set-up line has "history": true, or '
            "s3ingest local up -c historyTable=true -c changeStream=true)"
        )
    (where / WAREHOUSE_DIR).mkdir(parents=True, exist_ok=True)
    catalog, identifier, location = catalog_from_env(local_env(where))
    return ensure_table(catalog, identifier, location)


def event_source(sqs: Any, resources: Resources) -> SqsEventSource | None:
    """The history writer's SQS event source (batches of 10, partial batch responses), over a
    fresh local table; None without ``historyTable``."""
    from s3ingest_fn import wiring
    from s3ingest_fn.handlers.history import write_batch

    url = resources.history_queue_url
    if not url:
        return None
    table = local_table(fresh=True)
    dead = wiring.change_dead_letters(sqs, resources.history_dlq_url)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return SqsEventSource(
        sqs, url, arn, 10, lambda event: write_batch(table.refresh(), event, dead)
    )


def replay_changes(rt: Any, start: datetime | None, end: datetime | None) -> dict[str, Any]:
    """Replay the change bus's archive (default: everything archived so far) to the history
    rule only, as a redrive of the history does deployed, then drain the history queue, on
    ``rt`` (a :class:`~s3ingest.local.stack.runtime.LocalRuntime`). Returns ``{"replay",
    "from", "to"}``.

    Raises
    ------
    ValueError
        No history table in the deployment (``historyTable`` off).
    """
    from s3ingest.commands.replay import ReplayTarget

    events, resources = rt.events, rt.resources
    bus = resources.change_bus
    if not bus or not resources.history_queue_url:
        raise ValueError("no history table in this deployment (historyTable is off)")
    suffix = bus.removeprefix("s3ingest-changes-")
    target = ReplayTarget(
        archive_arn=events.describe_archive(ArchiveName=f"changes-archive-{suffix}")["ArchiveArn"],
        bus_arn=events.describe_event_bus(Name=bus)["Arn"],
        rule_arn=events.describe_rule(Name=f"history-{suffix}", EventBusName=bus)["Arn"],
    )
    now = datetime.now(UTC)
    start = start or now - timedelta(days=1)
    end = min(end or now, now) + timedelta(seconds=1)
    result = replay_archive(events, target, start, end)
    rt.pump_changes()
    return result


def history_summary(rt: Any) -> dict[str, Any] | None:
    """What the local history table holds at the end of a run on ``rt`` (a
    :class:`~s3ingest.local.stack.runtime.LocalRuntime`): ``{"rows", "change_keys",
    "duplicate_keys", "by_kind", "dead_letters"}`` (``duplicate_keys``: change keys of more
    than one row, 0 when exactly once held; ``dead_letters``: messages in the history
    dead-letter queue); None without ``historyTable``."""
    from collections import Counter

    resources = rt.resources
    if not resources.history_queue_url:
        return None
    rows = local_table().scan(selected_fields=("change_key", "kind")).to_arrow().to_pylist()
    keys = Counter(r["change_key"] for r in rows)
    dead = rt.sqs.get_queue_attributes(
        QueueUrl=resources.history_dlq_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]["ApproximateNumberOfMessages"]
    return {
        "rows": len(rows),
        "change_keys": len(keys),
        "duplicate_keys": sum(1 for n in keys.values() if n > 1),
        "by_kind": dict(sorted(Counter(r["kind"] for r in rows).items())),
        "dead_letters": int(dead),
    }
