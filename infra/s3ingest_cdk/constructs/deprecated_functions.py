"""The per-role function classes, deprecated: each is now a row of
:mod:`s3ingest.function_roles` built by :class:`~s3ingest_cdk.constructs.function.RoleFunction`.

Kept one release with their keywords; each warns (``DeprecationWarning``) and builds the same
construct as before (ids, properties).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest import function_roles as roles
from s3ingest.function_roles import FunctionRole
from s3ingest.settings import inventory_report_prefix
from s3ingest_cdk.constructs.function import Environment, RoleFunction, lambda_handler
from s3ingest_fn import config as fn_config


class _Deprecated(RoleFunction):
    """A per-role class: warns, then builds its row's function with explicit sizes."""

    def _deprecated(
        self,
        scope: Construct,
        construct_id: str,
        row: FunctionRole,
        environment: Environment,
        timeout: Duration,
        memory_size_mib: int,
        log_retention_days: int,
        tracing: bool,
        **more: object,
    ) -> None:
        warnings.warn(
            f"{type(self).__name__} is deprecated: use s3ingest_cdk.constructs.function."
            f"RoleFunction with s3ingest.function_roles.{row.name.upper().replace('-', '_')}",
            DeprecationWarning,
            stacklevel=3,
        )
        self._make(
            scope,
            construct_id,
            row=row,
            code=more.pop("code"),  # type: ignore[arg-type]
            environment=environment,
            timeout_seconds=int(timeout.to_seconds()),
            memory_size_mib=memory_size_mib,
            log_retention_days=log_retention_days,
            tracing=tracing,
            **more,  # type: ignore[arg-type]
        )


class IngestFunction(_Deprecated):
    """Deprecated: :data:`s3ingest.function_roles.INGEST`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        ledger_table: dynamodb.ITable,
        bucket: s3.IBucket,
        dead_letter_queue: sqs.IQueue,
        tombstone_ttl_seconds: int,
        record_concurrency: int,
        timeout: Duration,
        memory_size_mib: int,
        log_retention_days: int,
        tracing: bool,
    ) -> None:
        env = fn_config.IngestConfig(
            ledger_table_name=ledger_table.table_name,
            dead_letter_queue_url=dead_letter_queue.queue_url,
            tombstone_ttl_seconds=tombstone_ttl_seconds,
            record_concurrency=record_concurrency,
            bucket_name=bucket.bucket_name,
        ).to_env()
        sizes = (timeout, memory_size_mib, log_retention_days, tracing)
        self._deprecated(scope, construct_id, roles.INGEST, env, *sizes, code=code)


class BackfillFunction(_Deprecated):
    """Deprecated: :data:`s3ingest.function_roles.BACKFILL`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        ledger_table: dynamodb.ITable,
        bucket: s3.IBucket,
        dead_letter_queue: sqs.IQueue,
        tombstone_ttl_seconds: int,
        record_concurrency: int,
        timeout: Duration,
        memory_size_mib: int,
        log_retention_days: int,
        tracing: bool,
    ) -> None:
        env = fn_config.BackfillConfig(
            ledger_table_name=ledger_table.table_name,
            dead_letter_queue_url=dead_letter_queue.queue_url,
            tombstone_ttl_seconds=tombstone_ttl_seconds,
            bucket_name=bucket.bucket_name,
            record_concurrency=record_concurrency,
        ).to_env()
        sizes = (timeout, memory_size_mib, log_retention_days, tracing)
        self._deprecated(scope, construct_id, roles.BACKFILL, env, *sizes, code=code)


class ReconcileFunction(_Deprecated):
    """Deprecated: :data:`s3ingest.function_roles.RECONCILE` (or ``RECONCILE_FANOUT``, by
    ``handler``)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        handler: str,
        description: str,
        ledger_table: dynamodb.ITable,
        queue: sqs.IQueue,
        bucket: s3.IBucket,
        inventory_bucket: s3.IBucket | None,
        timeout: Duration,
        memory_size_mib: int,
        log_retention_days: int,
        tracing: bool,
    ) -> None:
        base = (
            roles.RECONCILE_FANOUT if handler == roles.RECONCILE_FANOUT.handler else roles.RECONCILE
        )
        row = replace(base, handler=handler)
        row = _described(row, description, description)
        env = fn_config.ReconcileConfig(
            ledger_table_name=ledger_table.table_name,
            ingest_queue_url=queue.queue_url,
            bucket_name=bucket.bucket_name,
            inventory_bucket_name=inventory_bucket.bucket_name if inventory_bucket else None,
            inventory_prefix=(
                inventory_report_prefix(bucket.bucket_name) if inventory_bucket else None
            ),
        ).to_env()
        sizes = (timeout, memory_size_mib, log_retention_days, tracing)
        self._deprecated(scope, construct_id, row, env, *sizes, code=code)


class BackfillControlFunction(_Deprecated):
    """Deprecated: :data:`s3ingest.function_roles.BACKFILL_CONTROL`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        ledger_table: dynamodb.ITable,
        queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        bucket: s3.IBucket,
        inventory_bucket: s3.IBucket,
        tombstone_ttl_seconds: int,
        timeout: Duration,
        memory_size_mib: int,
        log_retention_days: int,
        tracing: bool,
    ) -> None:
        env = {
            fn_config.LEDGER_TABLE_NAME: ledger_table.table_name,
            fn_config.INGEST_QUEUE_URL: queue.queue_url,
            fn_config.DEAD_LETTER_QUEUE_URL: dead_letter_queue.queue_url,
            fn_config.TOMBSTONE_TTL_SECONDS: str(tombstone_ttl_seconds),
            fn_config.BUCKET_NAME: bucket.bucket_name,
            fn_config.INVENTORY_BUCKET_NAME: inventory_bucket.bucket_name,
            fn_config.INVENTORY_PREFIX: inventory_report_prefix(bucket.bucket_name),
            fn_config.REPORT_BUCKET_NAME: inventory_bucket.bucket_name,
        }
        sizes = (timeout, memory_size_mib, log_retention_days, tracing)
        self._deprecated(scope, construct_id, roles.BACKFILL_CONTROL, env, *sizes, code=code)


class ChangeRelayFunction(_Deprecated):
    """Deprecated: :data:`s3ingest.function_roles.CHANGE_RELAY`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        bus: events.IEventBus,
        timeout: Duration,
        memory_size_mib: int,
        log_retention_days: int,
        tracing: bool,
    ) -> None:
        def env(owner: RoleFunction) -> Mapping[str, str]:
            queue_url = owner.dead_letter_queue.queue_url
            return fn_config.ChangeRelayConfig(bus.event_bus_name, queue_url).to_env()

        sizes = (timeout, memory_size_mib, log_retention_days, tracing)
        self._deprecated(scope, construct_id, roles.CHANGE_RELAY, env, *sizes, code=code)


class DeliveryCheckFunction(_Deprecated):
    """Deprecated: :data:`s3ingest.function_roles.DELIVERY_CHECK` (its grant and its schedule
    are :class:`s3ingest_cdk.features.monitoring.Monitoring`'s)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        buckets: Sequence[s3.IBucket],
        log_retention_days: int,
        tracing: bool,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        env = {
            **fn_config.DeliveryCheckConfig(tuple(b.bucket_name for b in buckets)).to_env(),
            **(environment or {}),
        }
        row = roles.DELIVERY_CHECK
        sizes = (Duration.seconds(30), 256, log_retention_days, tracing)
        self._deprecated(scope, construct_id, row, env, *sizes, code=code)
        iam.Grant.add_to_principal(
            grantee=self.function,
            actions=["s3:GetBucketNotification"],
            resource_arns=[b.bucket_arn for b in buckets],
        )
        self.rule = events.Rule(
            self,
            "Schedule",
            description="s3ingest: checks the landing bucket's EventBridge delivery",
            schedule=events.Schedule.rate(Duration.minutes(15)),
            targets=[targets.LambdaFunction(self.function)],
        )


class ProcessorFunction(_Deprecated):
    """Deprecated: :data:`s3ingest.function_roles.PROCESSOR` (the output grant is
    :class:`s3ingest_cdk.features.processors.Processors`')."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        handler: str,
        code: lambda_.Code,
        timeout_seconds: int,
        memory_size_mib: int,
        log_retention_days: int,
        tracing: bool,
        output_bucket: s3.IBucket | None,
    ) -> None:
        env = {} if output_bucket is None else {fn_config.OUTPUT_BUCKET: output_bucket.bucket_name}
        sizes = (Duration.seconds(timeout_seconds), memory_size_mib, log_retention_days, tracing)
        self._deprecated(
            scope,
            construct_id,
            roles.PROCESSOR,
            env,
            *sizes,
            code=code,
            handler=lambda_handler(handler),
            fields={"name": name, "handler": handler},
        )


class StepFunction(_Deprecated):
    """Deprecated: a checkpointed run's step, now rows of :mod:`s3ingest.function_roles`
    (``LISTING_*``, ``REPROCESS_*``)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        run: str,
        service_name: str,
        code: lambda_.Code,
        handler: str,
        description: str,
        environment: Mapping[str, str],
        timeout: Duration,
        memory_size_mib: int,
        log_retention_days: int,
        tracing: bool,
    ) -> None:
        row = FunctionRole(construct_id, construct_id, handler, service_name, None, "", "")
        row = _described(row, f"s3ingest: {description}", f"s3ingest {run}: {description}")
        sizes = (timeout, memory_size_mib, log_retention_days, tracing)
        self._deprecated(scope, construct_id, row, environment, *sizes, code=code)


def _described(row: FunctionRole, description: str, role_description: str) -> FunctionRole:
    """``row`` with these descriptions (braces escaped: they are format strings)."""
    escape = str.maketrans({"{": "{{", "}": "}}"})
    return replace(
        row,
        description=description.translate(escape),
        role_description=role_description.translate(escape),
    )
