"""A step function of the reprocess run (plan, segment or summarize), with its own role and log
group."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from s3ingest_cdk.constructs.python_function import python_function
from s3ingest_fn.contract import REPROCESS_SERVICE

#: The reprocess run's handlers (``s3ingest_fn.handlers.reprocess``).
PLAN_HANDLER = "s3ingest_fn.handlers.reprocess.plan"
SEGMENT_HANDLER = "s3ingest_fn.handlers.reprocess.segment"
SUMMARIZE_HANDLER = "s3ingest_fn.handlers.reprocess.summarize"
#: ``POWERTOOLS_SERVICE_NAME`` of the three.
REPROCESS_SERVICE_NAME = REPROCESS_SERVICE
#: Where a run's plan and its segments' checkpoints are kept in the checkpoint bucket
#: (``reprocess/<run>/plan.json``, ``reprocess/<run>/<segment>.json``;
#: :data:`s3ingest_fn.services.reprocess.CHECKPOINT_PREFIX`).
CHECKPOINT_PREFIX = "reprocess/"


class ReprocessFunction(Construct):
    """One Lambda step of the reprocess state machine.

    Role, log group and function follow
    :func:`s3ingest_cdk.constructs.python_function.python_function`; the feature
    (:class:`s3ingest_cdk.features.reprocess.Reprocess`) grants what each step reads and
    writes.

    Parameters
    ----------
    scope : constructs.Construct
        Parent construct.
    construct_id : str
        Construct id.
    code : aws_cdk.aws_lambda.Code
        The bundled ``functions/`` package.
    handler : str
        :data:`PLAN_HANDLER`, :data:`SEGMENT_HANDLER` or :data:`SUMMARIZE_HANDLER`.
    description : str
        Function description.
    environment : Mapping[str, str]
        Its variables (``SCOPE``, ``CHECKPOINT_BUCKET_NAME``, the ledger's, the processors').
    timeout : aws_cdk.Duration
        Function timeout (``segment`` returns before it, from its checkpoint).
    memory_size_mib : int
        Function memory, MiB.
    log_retention_days : int
        Log retention, days.
    tracing : bool
        X-Ray tracing (the ``tracing`` setting).

    Attributes
    ----------
    function : aws_cdk.aws_lambda.Function
        The function.
    role : aws_cdk.aws_iam.Role
        Its execution role.
    log_group : aws_cdk.aws_logs.LogGroup
        Its log group.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        handler: str,
        description: str,
        environment: Mapping[str, str],
        timeout: Duration,
        memory_size_mib: int,
        log_retention_days: int,
        tracing: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        parts = python_function(
            self,
            description=f"s3ingest: {description}",
            role_description=f"s3ingest reprocess: {description}",
            handler=handler,
            code=code,
            timeout=timeout,
            memory_size_mib=memory_size_mib,
            log_retention_days=log_retention_days,
            tracing=tracing,
            service_name=REPROCESS_SERVICE_NAME,
            environment=environment,
        )
        self.function = parts.function
        self.role = parts.role
        self.log_group = parts.log_group
