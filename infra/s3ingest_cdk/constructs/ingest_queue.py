"""The ingest queue and its dead-letter queue."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest_fn.adapters.sqs import DEAD_LETTER_MAX_MESSAGE_BYTES, INGEST_QUEUE_MAX_MESSAGE_BYTES


def secure_queue(
    scope: Construct,
    construct_id: str,
    *,
    retention_period: Duration,
    visibility_timeout: Duration | None = None,
    dead_letter_queue: sqs.DeadLetterQueue | None = None,
    max_message_size_bytes: int | None = None,
) -> sqs.Queue:
    """A standard queue with SQS-managed server-side encryption and a TLS-only queue policy.

    SSE-SQS (not the ``alias/aws/sqs`` KMS key) so EventBridge can send to it without a key policy
    (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-troubleshooting.html#eb-sqs-encrypted);
    ``enforce_ssl`` denies any request with ``aws:SecureTransport`` false
    (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-security-best-practices.html).
    Removed with the stack (CDK's default): a queue holds messages in flight; the ledger is the
    record. ``max_message_size_bytes``: its ``MaximumMessageSize`` (None: SQS's default).
    """
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=retention_period,
        visibility_timeout=visibility_timeout,
        dead_letter_queue=dead_letter_queue,
        max_message_size_bytes=max_message_size_bytes,
        removal_policy=RemovalPolicy.DESTROY,
    )


class IngestQueue(Construct):
    """The queue the ingest rule feeds and the ingest function drains, with its dead-letter queue.

    A message received ``max_receive_count`` times without being deleted moves to the dead-letter
    queue (redrive policy,
    https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html);
    the function also sends invalid messages there itself, with their reason (CONTRACT C9).
    The queue takes bodies up to ``INGEST_QUEUE_MAX_MESSAGE_BYTES`` (256 KiB), its dead-letter
    queue up to ``DEAD_LETTER_MAX_MESSAGE_BYTES`` (1 MiB): any body the queue accepts can be
    forwarded with its reason attributes (:mod:`s3ingest_fn.adapters.sqs`).

    Parameters
    ----------
    scope : constructs.Construct
        Parent construct.
    construct_id : str
        Construct id.
    visibility_timeout : aws_cdk.Duration
        Visibility timeout of the ingest queue; at least six times the function timeout
        (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html).
    retention_period : aws_cdk.Duration
        Message retention of the ingest queue.
    dead_letter_retention_period : aws_cdk.Duration
        Message retention of the dead-letter queue; not shorter than ``retention_period``, because a
        standard queue keeps a message's original enqueue timestamp when it is moved.
    max_receive_count : int
        Receives before a message moves to the dead-letter queue.

    Attributes
    ----------
    queue : aws_cdk.aws_sqs.Queue
        The ingest queue.
    dead_letter_queue : aws_cdk.aws_sqs.Queue
        Its dead-letter queue.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        visibility_timeout: Duration,
        retention_period: Duration,
        dead_letter_retention_period: Duration,
        max_receive_count: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = secure_queue(
            self,
            "DeadLetterQueue",
            retention_period=dead_letter_retention_period,
            max_message_size_bytes=DEAD_LETTER_MAX_MESSAGE_BYTES,
        )
        self.queue = secure_queue(
            self,
            "Queue",
            retention_period=retention_period,
            visibility_timeout=visibility_timeout,
            max_message_size_bytes=INGEST_QUEUE_MAX_MESSAGE_BYTES,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=max_receive_count
            ),
        )
