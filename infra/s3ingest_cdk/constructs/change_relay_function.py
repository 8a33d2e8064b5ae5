"""The change-stream relay: the ledger's DynamoDB stream in, events on the change bus out; with
its own role, log group and on-failure dead-letter queue."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from s3ingest_cdk.constructs.ingest_queue import secure_queue
from s3ingest_cdk.constructs.python_function import python_function
from s3ingest_fn import config as fn_config
from s3ingest_fn.contract import CHANGE_RELAY_SERVICE

#: Entry point of the relay (``{"Records": [<DynamoDB stream record>, ...]}``).
CHANGE_STREAM_HANDLER = "s3ingest_fn.handlers.change_stream.handler"
#: ``POWERTOOLS_SERVICE_NAME``: the relay's logger and metrics use the ingest's service.
CHANGE_STREAM_SERVICE_NAME = CHANGE_RELAY_SERVICE
#: How long the dead-letter queue keeps a dead-lettered change or a dropped batch's position:
#: SQS's maximum. The stream itself keeps records 24 hours; this is the time left to re-publish
#: from the ledger.
DEAD_LETTER_RETENTION = Duration.days(14)


class ChangeRelayFunction(Construct):
    """The function that publishes the ledger's applied changes to the change bus (CONTRACT C11).

    It reads the ledger table's stream (new images) through an event source mapping the stack
    adds, filtered to applied changes, and answers with a partial batch response naming the first
    record it could not publish (``s3ingest_fn.handlers.change_stream``). Role, log group and
    function follow :func:`s3ingest_cdk.constructs.python_function.python_function`; the stack
    grants
    ``events:PutEvents`` on the bus and adds the stream.

    The dead-letter queue (``DEAD_LETTER_QUEUE_URL``) holds two kinds of message: the relay's
    own, one per change it can never publish (JSON with ``reason`` and the change itself,
    ``s3ingest_fn.services.changes.dead_letter_body``); and the mapping's on-failure records:
    when Lambda gives up on a batch (retries or record age spent), it sends the batch's
    position (shard, first and last sequence numbers, arrival times), not the records
    (https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html). SSE-SQS,
    TLS only (:func:`s3ingest_cdk.constructs.ingest_queue.secure_queue`), kept 14 days.

    Parameters
    ----------
    scope : constructs.Construct
        Parent construct.
    construct_id : str
        Construct id.
    code : aws_cdk.aws_lambda.Code
        The bundled ``functions/`` package (the ingest function's asset).
    bus : aws_cdk.aws_events.IEventBus
        The change bus (``CHANGE_BUS_NAME``).
    timeout : aws_cdk.Duration
        Function timeout.
    memory_size_mib : int
        Function memory, MiB.
    log_retention_days : int
        Log retention, days; one of CloudWatch Logs' allowed values.
    tracing : bool
        X-Ray tracing (the ``tracing`` setting).

    Attributes
    ----------
    function : aws_cdk.aws_lambda.Function
        The relay.
    role : aws_cdk.aws_iam.Role
        Its execution role.
    log_group : aws_cdk.aws_logs.LogGroup
        Its log group.
    dead_letter_queue : aws_cdk.aws_sqs.Queue
        The event source mapping's on-failure destination.
    """

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
        super().__init__(scope, construct_id)
        self.dead_letter_queue = secure_queue(
            self, "DeadLetterQueue", retention_period=DEAD_LETTER_RETENTION
        )
        description = "s3ingest: publishes the ledger's applied changes to the change bus"
        parts = python_function(
            self,
            description=description,
            role_description="s3ingest change-stream relay",
            handler=CHANGE_STREAM_HANDLER,
            code=code,
            timeout=timeout,
            memory_size_mib=memory_size_mib,
            log_retention_days=log_retention_days,
            tracing=tracing,
            service_name=CHANGE_STREAM_SERVICE_NAME,
            environment=fn_config.ChangeRelayConfig(
                bus.event_bus_name, self.dead_letter_queue.queue_url
            ).to_env(),
        )
        self.function = parts.function
        self.role = parts.role
        self.log_group = parts.log_group
