"""A Lambda step of a checkpointed run's state machine (the listing backfill's, the reprocess
run's: plan, work, summarize), with its own role and log group."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from s3ingest_cdk.constructs.python_function import python_function


class StepFunction(Construct):
    """One Lambda step of a checkpointed run's state machine.

    Role, log group and function follow
    :func:`s3ingest_cdk.constructs.python_function.python_function`; the feature that owns the
    run (:class:`s3ingest_cdk.features.listing.ListingBackfill`,
    :class:`s3ingest_cdk.features.reprocess.Reprocess`) grants what each step reads and writes.

    Parameters
    ----------
    scope : constructs.Construct
        Parent construct.
    construct_id : str
        Construct id.
    run : str
        The run's name in the role's description (``"listing backfill"``, ``"reprocess"``).
    service_name : str
        ``POWERTOOLS_SERVICE_NAME`` (:mod:`s3ingest_fn.contract`).
    code : aws_cdk.aws_lambda.Code
        The bundled ``functions/`` package.
    handler : str
        The step's handler (``module.function``).
    description : str
        Function description.
    environment : Mapping[str, str]
        Its variables.
    timeout : aws_cdk.Duration
        Function timeout (a work step returns before it, from its checkpoint).
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
        super().__init__(scope, construct_id)
        parts = python_function(
            self,
            description=f"s3ingest: {description}",
            role_description=f"s3ingest {run}: {description}",
            handler=handler,
            code=code,
            timeout=timeout,
            memory_size_mib=memory_size_mib,
            log_retention_days=log_retention_days,
            tracing=tracing,
            service_name=service_name,
            environment=environment,
        )
        self.function = parts.function
        self.role = parts.role
        self.log_group = parts.log_group
