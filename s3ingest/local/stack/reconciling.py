"""Reconciliation on a local deployment: the reconcile code the Lambda runs, over this
deployment's resources, one bucket or every bucket, and the stack's fan-out state machine
(:class:`Reconciliations`, a part of :class:`~s3ingest.local.stack.runtime.LocalRuntime`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from s3ingest.local.emulator.inventory_writer import write_inventory
from s3ingest.local.machines import RECONCILE_FANOUT
from s3ingest.settings import inventory_report_prefix
from s3ingest_fn import wiring
from s3ingest_fn.contract import METRICS_NAMESPACE
from s3ingest_fn.core.diff import DRIFT_KINDS
from s3ingest_fn.services.attestation_pass import TreeTap
from s3ingest_fn.services.attestation_store import tap_for
from s3ingest_fn.services.reconcile import (
    INVENTORY,
    Progress,
    Reconciler,
    ReconcileReport,
    ReconcileRequest,
    combine_reports,
)

if TYPE_CHECKING:
    from s3ingest.local.emulator.s3faithful import FaithfulS3
    from s3ingest.local.emulator.server import Emulator
    from s3ingest.local.stack.executions import LocalMachines
    from s3ingest.local.stack.provisioning import Resources
    from s3ingest_fn.core.decide import IngestService
    from s3ingest_fn.core.scope import Scope


def combine_fan_out(summaries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The result of fan-out executions over several buckets (one per bucket, as the schedule
    starts them): one bucket's summary (with its ``execution``) unchanged; for several, the
    counters summed (every integer field but ``held_oldest_seconds``, the largest; ``drift``
    by kind), ``bucket`` (None), ``buckets`` (the names), ``samples`` (the first 20, each
    ``{"bucket", "key"}``) and ``reports`` (each bucket's summary, in order)."""
    if len(summaries) == 1:
        return dict(summaries[0])
    out: dict[str, Any] = {
        "source": INVENTORY,
        "bucket": None,
        "buckets": [s.get("bucket") for s in summaries],
        "drift": {kind: sum(int(s["drift"][kind]) for s in summaries) for kind in DRIFT_KINDS},
        "samples": [
            {"bucket": s.get("bucket"), "key": key} for s in summaries for key in s["samples"]
        ][:20],
        "reports": list(summaries),
    }
    counters = {name for s in summaries for name, v in s.items() if type(v) is int}  # no bool
    for name in sorted(counters):
        values = [int(s.get(name, 0)) for s in summaries]
        out[name] = max(values) if name == "held_oldest_seconds" else sum(values)
    return out


class Reconciliations:
    """The reconciliation steps of a :class:`~s3ingest.local.stack.runtime.LocalRuntime` (which sets
    the attributes below and gives :meth:`drain` and :attr:`machines`)."""

    resources: Resources
    emu: Emulator
    s3: Any
    ddb: Any
    sqs: Any
    scope: Scope
    service: IngestService
    buckets: dict[str, FaithfulS3]
    #: Epoch seconds the in-process reconciliations read (None: the real time); a scenario's
    #: ``advance`` step sets it (:mod:`s3ingest.local.rehearsal.clock`).
    reconcile_clock: Callable[[], float] | None = None

    @property
    def machines(self) -> LocalMachines:  # pragma: no cover - LocalRuntime's
        raise NotImplementedError

    def drain(
        self, on_batch: Callable[[int], None] | None = None, timeout_seconds: float = 300.0
    ) -> None:  # pragma: no cover - LocalRuntime's
        raise NotImplementedError

    def reconciler(
        self, bucket: str | None = None, clock: Callable[[], float] | None = None
    ) -> Reconciler:
        """The reconcile code the Lambda runs, bound to this deployment's resources and to
        landing bucket ``bucket`` (the first when None); ``clock`` (epoch seconds) for tests
        that age what the ledger holds."""
        name = self.resources.landing(bucket).name
        return wiring.reconciler(
            s3=self.s3,
            dynamodb=self.ddb,
            sqs=self.sqs,
            bucket=name,
            table=self.resources.table,
            queue_url=self.resources.queue_url,
            inventory_bucket=self.resources.inventory_bucket,
            inventory_prefix=inventory_report_prefix(name),
            scope=self.scope.bucket(name),
            processors=self.service.effects.names if self.service.effects is not None else (),
            targets=tuple(s.target for s in self.service.effects.specs)
            if self.service.effects is not None
            else (),
            clock=clock or self.reconcile_clock or time.time,
        )

    def write_inventory(self, bucket: str | None = None) -> str:
        """Write an S3 Inventory report of landing bucket ``bucket`` (the first when None)
        now; return its manifest key."""
        return write_inventory(
            self.s3,
            source_bucket=self.resources.landing(bucket).name,
            destination_bucket=self.resources.inventory_bucket,
        )

    def reconcile(
        self,
        source: str = INVENTORY,
        *,
        prefix: str = "",
        dry_run: bool = False,
        margin_seconds: int = 0,
        progress: Progress | None = None,
        drain: bool = True,
        bucket: str | None = None,
        tap: TreeTap | None = None,
    ) -> ReconcileReport:
        """Run one reconciliation of landing bucket ``bucket`` (the first when None; writing
        an inventory report first for ``inventory``), then drain the repairs through the
        ingest handler; an ``inventory`` run's pass feeds ``tap`` (the attestation's trees).

        ``margin_seconds`` defaults to 0 here: locally, nothing changes after the snapshot.
        """
        manifest = self.write_inventory(bucket) if source == INVENTORY else None
        request = ReconcileRequest(
            source=source,
            prefix=prefix,
            dry_run=dry_run,
            manifest_key=manifest,
            margin_ms=margin_seconds * 1000,
        )
        report = self.reconciler(bucket).run(request, progress, tap)
        if drain and not dry_run:
            self.drain()
        return report

    def reconcile_fan_out(
        self,
        *,
        prefix: str = "",
        dry_run: bool = False,
        margin_seconds: int = 0,
        drain: bool = True,
        partitions: int | None = None,
        segments: int | None = None,
        bucket: str | None = None,
        attest: bool = False,
    ) -> dict[str, Any]:
        """Reconcile with an execution of the stack's fan-out state machine over an S3
        Inventory report written now, then drain the repairs; ``partitions`` and ``segments``
        are its input (the plan's defaults when None); with ``attest`` (the schedule's
        ``{"attest": true}``), its summarize step attests the bucket once the repairs left the
        ingest queue (the summary's ``attestation``; nothing drains the queue during the
        execution: a run with repairs waits for them as long as the function allows).

        Returns the machine's summary plus ``"execution"``
        (:meth:`~s3ingest.local.stack.executions.Execution.summary`).

        Raises
        ------
        RuntimeError
            When the execution does not succeed.
        """
        event: dict[str, Any] = {
            "manifest": self.write_inventory(bucket),
            "prefix": prefix,
            "dryRun": dry_run,
            "marginSeconds": margin_seconds,
        }
        if partitions is not None:
            event["partitions"] = partitions
        if segments is not None:
            event["segments"] = segments
        if attest:
            event["attest"] = True
        if bucket is not None:
            event["bucket"] = self.resources.landing(bucket).name
        execution = self.machines.run(RECONCILE_FANOUT, event)
        if execution.status != "SUCCEEDED":
            raise RuntimeError(
                f"fan-out reconciliation {execution.status}: {execution.error}: {execution.cause}"
            )
        if drain and not dry_run:
            self.drain()
        return {**(execution.output or {}), "execution": execution.summary()}

    def _record_reconciliation(self, summary: dict[str, Any]) -> None:
        """The run's metrics in the emulator's CloudWatch, as the reconcile functions' EMF
        reaches CloudWatch deployed (:func:`s3ingest.local.emulator.metrics.record_reconciliation`):
        ``s3ingest status`` reads the last drift from there."""
        from s3ingest.local.emulator.metrics import record_reconciliation

        record_reconciliation(self.emu.client("cloudwatch"), self.metrics_stack, summary)

    @property
    def metrics_stack(self) -> str:
        """The stack dimension of this deployment's metrics: ``S3Ingest-local-<ledger table>``,
        one per runtime (the emulator's CloudWatch is the process's: two runtimes' metrics
        never mix, as two deployed stacks' do not)."""
        return f"S3Ingest-local-{self.resources.table}"

    def reconcile_every_bucket(
        self,
        source: str = INVENTORY,
        *,
        fan_out: bool = False,
        prefix: str = "",
        dry_run: bool = False,
        margin_seconds: int = 0,
    ) -> dict[str, Any]:
        """Reconcile every landing bucket in turn, as the schedule does, then drain the repairs.

        Without ``fan_out``, what the scheduled reconcile invocation (an event without
        ``bucket``) does: :meth:`reconcile` of each bucket, the result
        :func:`~s3ingest_fn.services.reconcile.combine_reports` of their reports (one bucket:
        its report unchanged). With ``fan_out`` (``inventory`` only), what the fan-out
        schedule does: one execution of the fan-out machine per bucket
        (:meth:`reconcile_fan_out`), combined by :func:`combine_fan_out`.

        Raises
        ------
        ValueError
            For ``fan_out`` with a ``listing`` source.
        RuntimeError
            When a fan-out execution does not succeed.
        """
        if fan_out and source != INVENTORY:
            raise ValueError("the fan-out reconciliation reads an inventory")
        names = list(self.buckets)
        if fan_out:
            summaries = [
                self.reconcile_fan_out(
                    prefix=prefix,
                    dry_run=dry_run,
                    margin_seconds=margin_seconds,
                    drain=False,
                    bucket=name,
                )
                for name in names
            ]
            combined = combine_fan_out(summaries)
            for summary in summaries:  # each execution's summarize function emits its own
                self._record_reconciliation(summary)
        else:
            taps: dict[str, TreeTap] = {}
            if not dry_run and source == INVENTORY:  # the trees from each run's own pass
                for name in names:
                    tap = tap_for(self.reconciler(name))
                    taps[name] = taps[tap.bucket] = tap
            reports = [
                self.reconcile(
                    source,
                    prefix=prefix,
                    dry_run=dry_run,
                    margin_seconds=margin_seconds,
                    drain=False,
                    bucket=name,
                    tap=taps.get(name),
                )
                for name in names
            ]
            combined = combine_reports(reports)
            self._record_reconciliation(combined)  # the scheduled function's one run
        if not dry_run:
            self.drain()
            if not fan_out:  # as the scheduled function, after its repairs (issue 38)
                self._attest(reports, taps)
        return combined

    def _attest(
        self, reports: Sequence[ReconcileReport], taps: Mapping[str, TreeTap] | None = None
    ) -> None:
        """The scheduled function's attestations (:func:`s3ingest_fn.handlers.reconcile.
        attest_after_repairs`): each bucket's document where attestations are kept (from its
        run's pass where ``taps`` has the bucket's), and ``attestation_differs`` in the
        emulator's CloudWatch."""
        from functools import partial

        from s3ingest_fn.contract import ATTESTATION_DIFFERS_METRIC, metric_dimensions
        from s3ingest_fn.services.attestation_store import scheduled

        taps = taps or {}
        ledger = wiring.ledger(self.ddb, self.resources.table, 0)
        differs = 0
        for report in reports:
            stored = scheduled(
                self.reconciler(report.bucket),
                self.s3,
                store_bucket=self.resources.attestation_store,
                stack=self.metrics_stack,
                source=report.source,
                margin_ms=round(report.margin_s * 1000),
                prefix=report.prefix,
                tap=taps.get(report.bucket),
                read_row=partial(ledger.get, report.bucket),
            )
            differs += not stored["document"]["equal"]
        self.emu.client("cloudwatch").put_metric_data(
            Namespace=METRICS_NAMESPACE,
            MetricData=[
                {
                    "MetricName": ATTESTATION_DIFFERS_METRIC,
                    "Dimensions": [
                        {"Name": k, "Value": v}
                        for k, v in metric_dimensions(self.metrics_stack).items()
                    ],
                    "Unit": "Count",
                    "Value": differs,
                }
            ],
        )
