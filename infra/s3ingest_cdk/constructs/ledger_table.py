"""The DynamoDB ledger: one item per (bucket, key)."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

# The table's key and TTL attribute, as the ledger adapter (the one owner of the row) writes them.
from s3ingest_fn.adapters.dynamo_ledger import PARTITION_KEY, TTL_ATTRIBUTE


class LedgerTable(Construct):
    """The ledger table.

    Partition key ``pk`` (string) only; on-demand capacity; point-in-time recovery
    (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Point-in-time-recovery.html);
    TTL on ``expires_at`` so tombstones expire
    (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/TTL.html); deletion
    protection on and retained when the stack is deleted: the ledger is the product's state.

    With ``stream`` the table has a DynamoDB stream of that view type: the change stream's outbox
    (``NEW_IMAGE``: the relay reads the row as written, :mod:`s3ingest_fn.services.changes`;
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Streams.html). Adding or
    removing it updates the table in place.

    Parameters
    ----------
    warm_write_units : int, optional
        Pre-warmed write request units per second (DynamoDB warm throughput,
        ``WarmThroughput.WriteUnitsPerSecond``,
        https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput.html;
        the ``ledgerWarmWriteUnits`` setting): a large backfill writes at that rate from its
        start instead of waiting for on-demand scaling. None: no warm throughput.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stream: dynamodb.StreamViewType | None = None,
        warm_write_units: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(
                name=PARTITION_KEY, type=dynamodb.AttributeType.STRING
            ),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=TTL_ATTRIBUTE,
            stream=stream,
            deletion_protection=True,
            removal_policy=RemovalPolicy.RETAIN,
            warm_throughput=(
                dynamodb.WarmThroughput(write_units_per_second=warm_write_units)
                if warm_write_units is not None
                else None
            ),
        )
