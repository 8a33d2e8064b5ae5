"""A processor function the stack deploys from this repository's bundle (a ``processors`` entry
with a ``handler``), with its own role and log group."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from s3ingest_cdk.constructs.python_function import python_function
from s3ingest_cdk.nag import acknowledge, wildcard_resource_finding
from s3ingest_fn import config as fn_config
from s3ingest_fn.contract import PROCESSOR_SERVICE

#: ``POWERTOOLS_SERVICE_NAME`` of the deployed processor functions.
PROCESSOR_SERVICE_NAME = PROCESSOR_SERVICE


def lambda_handler(handler: str) -> str:
    """The Lambda ``Handler`` of ``"package.module:function"``: ``"package.module.function"``
    (the Python runtime imports everything before the last dot as the module,
    https://docs.aws.amazon.com/lambda/latest/dg/python-handler.html)."""
    module, _, function = handler.partition(":")
    return f"{module}.{function}"


class ProcessorFunction(Construct):
    """One processor function deployed by the stack: ``handler`` of the bundled package, invoked
    synchronously by the ingest-side functions under the claim (``docs/processor-api.md``).

    It reads the change's bytes through the presigned GET in its request, so its role has no
    permission on the landing buckets. With ``output_bucket`` it gets ``OUTPUT_BUCKET`` and
    ``s3:PutObject`` / ``s3:DeleteObject`` on that bucket's objects (the example sidecar
    processor writes one output per key and deletes it on removal), nothing else but its log
    group. Role, log group and function follow
    :func:`s3ingest_cdk.constructs.python_function.python_function`.

    Parameters
    ----------
    scope : constructs.Construct
        Parent construct.
    construct_id : str
        Construct id (the processor's name).
    name : str
        The processor's name (descriptions).
    handler : str
        ``"package.module:function"`` in the bundled package.
    code : aws_cdk.aws_lambda.Code
        The bundled ``functions/`` package (with the handler's package).
    timeout_seconds : int
        The function's timeout (the entry's ``timeoutSeconds``), 1 to 900.
    memory_size_mib : int
        Function memory, MiB.
    log_retention_days : int
        Log retention, days.
    tracing : bool
        X-Ray tracing (the ``tracing`` setting).
    output_bucket : aws_cdk.aws_s3.IBucket, optional
        The processor output bucket.

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
        name: str,
        handler: str,
        code: lambda_.Code,
        timeout_seconds: int,
        memory_size_mib: int,
        log_retention_days: int,
        tracing: bool,
        output_bucket: s3.IBucket | None,
    ) -> None:
        super().__init__(scope, construct_id)
        environment = (
            {} if output_bucket is None else {fn_config.OUTPUT_BUCKET: output_bucket.bucket_name}
        )
        parts = python_function(
            self,
            description=f"s3ingest: processor {name} ({handler}), invoked under the claim",
            role_description=f"s3ingest processor function {name}",
            handler=lambda_handler(handler),
            code=code,
            timeout=Duration.seconds(timeout_seconds),
            memory_size_mib=memory_size_mib,
            log_retention_days=log_retention_days,
            tracing=tracing,
            service_name=PROCESSOR_SERVICE_NAME,
            environment=environment,
        )
        self.function = parts.function
        self.role = parts.role
        self.log_group = parts.log_group
        if output_bucket is None:
            return
        outputs_arn = output_bucket.arn_for_objects("*")
        iam.Grant.add_to_principal(
            grantee=self.function,
            actions=["s3:PutObject", "s3:DeleteObject"],
            resource_arns=[outputs_arn],
        )
        acknowledge(
            self.role,
            wildcard_resource_finding(self, outputs_arn),
            f"The processor function {name} writes (and deletes) one output per object whose "
            "change it is invoked for: s3:PutObject and s3:DeleteObject on the processor output "
            "bucket's objects only (keys made from the landing keys at run time).",
        )
