"""One s3ingest Lambda function built from its row of :mod:`s3ingest.function_roles`: the
construct that owns its ``Role``, ``LogGroup`` and ``Function``
(:func:`~s3ingest_cdk.constructs.python_function.python_function`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from s3ingest.function_roles import FunctionRole
from s3ingest.settings import Settings
from s3ingest_cdk.constructs.ingest_queue import secure_queue
from s3ingest_cdk.constructs.python_function import python_function

#: The function's own variables, or a callable that makes them from the construct (its
#: :attr:`RoleFunction.dead_letter_queue` made).
Environment = Mapping[str, str] | Callable[["RoleFunction"], Mapping[str, str]]


def lambda_handler(handler: str) -> str:
    """The Lambda ``Handler`` of ``"package.module:function"``: ``"package.module.function"``
    (the Python runtime imports everything before the last dot as the module,
    https://docs.aws.amazon.com/lambda/latest/dg/python-handler.html)."""
    module, _, function = handler.partition(":")
    return f"{module}.{function}"


def role_code(scope: Construct, row: FunctionRole, code: lambda_.Code) -> lambda_.Code:
    """``code``, or for a row with its own
    :attr:`~s3ingest.function_roles.FunctionRole.packages` the code the nearest enclosing
    construct with a ``role_code`` method (the pipeline,
    :meth:`s3ingest_cdk.S3IngestPipeline.role_code`) makes of it."""
    if not row.packages:
        return code
    for outer in reversed(scope.node.scopes):
        make = getattr(outer, "role_code", None)
        if callable(make):
            made: lambda_.Code = make(row.packages, code)
            return made
    return code


class RoleFunction(Construct):
    """The function of one :class:`~s3ingest.function_roles.FunctionRole`, with its own role
    and log group; the feature that deploys it grants the rest.

    ``construct_id`` ``None``: the row's. ``environment``: the function's own variables (its
    row's configuration model's ``to_env()``), or a callable that makes them from this construct.
    ``timeout_seconds``, ``handler`` and ``fields`` (filled into the row's descriptions) are a
    processor's own. A row with :attr:`~s3ingest.function_roles.FunctionRole.packages` gets
    the pipeline's code with them (:func:`role_code`).

    Attributes
    ----------
    dead_letter_queue : aws_cdk.aws_sqs.Queue
        Its own dead-letter queue (``DeadLetterQueue``, made before the function), when its row
        has :attr:`~s3ingest.function_roles.FunctionRole.dead_letter_days`.

    Raises
    ------
    ValueError
        When ``logRetentionDays`` is not a CloudWatch Logs retention value.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str | None = None,
        *,
        row: FunctionRole,
        settings: Settings,
        code: lambda_.Code,
        environment: Environment,
        timeout_seconds: int | None = None,
        handler: str | None = None,
        fields: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id or row.construct_id)
        fields = fields or {}
        self.row = row
        self._dead_letter_queue: sqs.Queue | None = None
        if row.dead_letter_days is not None:
            self._dead_letter_queue = secure_queue(
                self, "DeadLetterQueue", retention_period=Duration.days(row.dead_letter_days)
            )
        parts = python_function(
            self,
            description=row.description.format(**fields),
            role_description=row.role_description.format(**fields),
            handler=handler or row.handler,
            code=role_code(self, row, code),
            timeout=Duration.seconds(
                row.timeout(settings) if timeout_seconds is None else timeout_seconds
            ),
            memory_size_mib=row.memory(settings),
            log_retention_days=settings.log_retention_days,
            tracing=settings.tracing,
            service_name=row.service,
            environment=environment(self) if callable(environment) else environment,
        )
        self.function = parts.function
        self.role = parts.role
        self.log_group = parts.log_group

    @property
    def dead_letter_queue(self) -> sqs.Queue:
        """Its own dead-letter queue.

        Raises
        ------
        AttributeError
            When its row has none.
        """
        if self._dead_letter_queue is None:
            raise AttributeError(f"function role {self.row.name} has no dead-letter queue")
        return self._dead_letter_queue
