"""The ingest queue and its dead-letter queue."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest_fn.adapters.sqs import DEAD_LETTER_MAX_MESSAGE_BYTES, INGEST_QUEUE_MAX_MESSAGE_BYTES

#: The ``Sid`` of the ingest queue's statement that denies every other sender.
ONLY_STACK_SENDS_SID = "OnlyTheStackSends"


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
    Removed with the stack: a queue holds messages in flight, the ledger is the record; the
    pipeline retains its dead-letter queues (their messages are evidence).
    ``max_message_size_bytes``: its ``MaximumMessageSize`` (None: SQS's default).
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


#: Retention of a rule target's dead-letter queue (SQS's maximum, 14 days).
RULE_DLQ_RETENTION = Duration.days(14)


def rule_dead_letter_queue(scope: Construct, construct_id: str) -> sqs.Queue:
    """A rule target's dead-letter queue (events EventBridge could not deliver after its
    retries, https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html): a
    :func:`secure_queue` kept 14 days and retained with the stack (its messages are evidence),
    its cdk-nag finding acknowledged."""
    from s3ingest_cdk.features.evidence import acknowledge_dead_letter_queue
    from s3ingest_cdk.nag import acknowledge

    queue = secure_queue(scope, construct_id, retention_period=RULE_DLQ_RETENTION)
    queue.apply_removal_policy(RemovalPolicy.RETAIN)
    acknowledge(
        queue,
        "AwsSolutions-SQS3",
        "This queue is a dead-letter queue: a rule target's DeadLetterConfig "
        "(https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html); "
        "cdk-nag only recognises SQS redrive and Lambda DLQs.",
    )
    acknowledge_dead_letter_queue(queue, "a rule target's DeadLetterConfig")
    return queue


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
    visibility_timeout : aws_cdk.Duration
        Visibility timeout of the ingest queue; at least six times the function timeout
        (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html).
    dead_letter_retention_period : aws_cdk.Duration
        Message retention of the dead-letter queue; not shorter than ``retention_period``, because a
        standard queue keeps a message's original enqueue timestamp when it is moved.
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

    def admit_only(
        self,
        *,
        rules: Sequence[events.IRule],
        roles: Sequence[iam.IRole],
        operator_role_arns: Sequence[str] = (),
    ) -> iam.PolicyStatement:
        """Deny ``sqs:SendMessage`` on the ingest queue to every principal but ``rules`` (their
        EventBridge target), ``roles`` (the stack's own senders) and ``operator_role_arns``.

        ``sqs:SendMessage`` also authorises ``SendMessageBatch``
        (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-api-permissions-reference.html).
        A Deny wins over any Allow, identity policies of the account included
        (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html).

        Returns
        -------
        aws_cdk.aws_iam.PolicyStatement
            The statement added to the queue's policy.
        """
        # How the Deny applies (https://docs.aws.amazon.com/IAM/latest/UserGuide/
        # reference_policies_elements_condition_operators.html and
        # reference_policies_condition-logic-multiple-context-keys-or-values.html):
        # - the two keys under the one ArnNotEquals AND together: the Deny applies only when
        #   the request is exempt by neither (an exemption by either key is enough);
        # - the values of one key under a negated operator NOR together: a key is true when its
        #   value equals none of the listed ARNs;
        # - a key absent from the request makes a negated operator TRUE for that key (the
        #   "not present" rule of the page above; no ...IfExists here). A role's request carries
        #   no aws:SourceArn (that key is set only when a service acts for a resource), so only
        #   its aws:PrincipalArn (the role's ARN, not the session's) can exempt it; EventBridge
        #   delivering for the rule carries aws:SourceArn = the rule's ARN, which exempts it
        #   whatever its aws:PrincipalArn. The account root, any other role or user, another rule
        #   or another service match neither key and are denied.
        statement = iam.PolicyStatement(
            sid=ONLY_STACK_SENDS_SID,
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=["sqs:SendMessage"],
            resources=[self.queue.queue_arn],
            conditions={
                "ArnNotEquals": {
                    "aws:SourceArn": [rule.rule_arn for rule in rules],
                    "aws:PrincipalArn": [
                        *(role.role_arn for role in roles),
                        *operator_role_arns,
                    ],
                }
            },
        )
        self.queue.add_to_resource_policy(statement)
        return statement
