"""A role's function made with its cdk-nag acknowledgements (:mod:`.evidence`), and an SQS
queue as its trigger."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest_cdk.constructs.function import RoleFunction
from s3ingest_cdk.features.evidence import acknowledge_function, synchronous_evidence
from s3ingest_cdk.nag import acknowledge


def acknowledged_function(
    scope: Construct, construct_id: str | None = None, *, dead_letters: str, **kwargs: Any
) -> RoleFunction:
    """A :class:`RoleFunction` (``kwargs``: its keywords) with :func:`acknowledge_function`'s
    acknowledgements (``dead_letters``; tracing: its ``settings``')."""
    owner = RoleFunction(scope, construct_id, **kwargs)
    tracing = kwargs["settings"].tracing
    acknowledge_function(owner.function, owner.role, tracing=tracing, dead_letters=dead_letters)
    return owner


def add_queue_source(
    role_function: RoleFunction,
    queue: sqs.IQueue,
    *,
    name: str,
    tracing: bool,
    dead_letters: str | None = None,
    **props: Any,
) -> None:
    """``queue`` (``name``: ``"ingest"``) as the function's trigger, an SQS event source with
    partial batch responses and ``props`` (``batch_size``, ...), with the function's
    acknowledgements (:func:`acknowledge_function`; ``dead_letters``, default: the queue is its
    only trigger) and its mapping's."""
    function = role_function.function
    acknowledge_function(
        function,
        role_function.role,
        tracing=tracing,
        dead_letters=dead_letters
        or synchronous_evidence(
            f"the {name} queue's event source mapping (a failed record returns to the queue "
            f"and, after maxReceiveCount receives, moves to the {name} dead-letter queue)"
        ),
    )
    function.add_event_source(
        event_sources.SqsEventSource(queue, report_batch_item_failures=True, **props)
    )
    (mapping,) = (c for c in function.node.children if isinstance(c, lambda_.EventSourceMapping))
    acknowledge(
        mapping,
        "Serverless-LambdaEventSourceMappingDestination",
        "An SQS event source mapping takes no on-failure destination (DestinationConfig is "
        "for Kinesis, DynamoDB Streams and Kafka sources only: "
        "https://docs.aws.amazon.com/lambda/latest/api/API_CreateEventSourceMapping.html); "
        f"a record that keeps failing moves to the {name} dead-letter queue by the queue's "
        "redrive policy (maxReceiveCount), whose age is alarmed.",
    )
