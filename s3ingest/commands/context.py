"""The one place the CLI's commands get their clients and adapters.

:func:`connect` turns the parsed global options (``--profile``, ``--region``) and ``--stack``
into a :class:`Deployed`: a boto3 session, the stack's CloudFormation outputs, and the adapters
built over them (ledger, bucket, reconciler, verify pipeline); :func:`connect_local` does the
same for the stack ``s3ingest local up`` runs. Command functions take what these return; a test
passes the same built over moto or stand-ins. Nothing here imports the local runtime: the CLI
chooses local or deployed clients and passes them in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from s3ingest.outputs import BUCKET_NAME, LEDGER_TABLE_NAME

if TYPE_CHECKING:
    from s3ingest.commands.verify import DeployedPipeline
    from s3ingest.deployed import DeployedStack
    from s3ingest_fn.adapters.dynamo_ledger import DynamoLedger
    from s3ingest_fn.adapters.s3_objects import S3Objects
    from s3ingest_fn.services.reconcile import Reconciler


@dataclass
class AwsOptions:
    """The global options of every command against AWS (``--profile``, ``--region``,
    ``--pipeline``); None leaves the choice to the default boto3 chain (and the stack's one
    pipeline)."""

    profile: str | None = None
    region: str | None = None
    #: The pipeline of the stack, by stage (``--pipeline``), for a stack that holds several.
    pipeline: str | None = None
    #: ``s3ingest --stack NAME COMMAND``: the stack, when the command is given none of its own.
    stack: str | None = None


@dataclass
class Deployed:
    """A deployed stack as the operator's credentials see it: the session, the stack's outputs
    (:class:`s3ingest.deployed.DeployedStack`) and the clients and adapters commands use.

    Clients are made on first use and kept (one per service).
    """

    session: Any
    stack: DeployedStack
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        """The stack's name (its StackName, even when given as an ARN)."""
        return self.stack.name

    @property
    def outputs(self) -> dict[str, str]:
        """The stack's CloudFormation outputs, by output key."""
        return self.stack.outputs

    def require(self, *names: str) -> list[str]:
        """The named outputs; :class:`s3ingest.deployed.StackNotFoundError` names the missing."""
        return self.stack.require(*names)

    def client(self, service: str) -> Any:
        """The boto3 client of ``service`` (``"sqs"``, ``"stepfunctions"`` …) in the session's
        region and credentials (``s3``: :meth:`~s3ingest.deployed.DeployedStack.s3`, reading
        each bucket of another account through its read role)."""
        if service not in self._clients:
            self._clients[service] = (
                self.stack.s3(self.session) if service == "s3" else self.session.client(service)
            )
        return self._clients[service]

    def ledger(self) -> DynamoLedger:
        """The ledger table's adapter (output ``LedgerTableName``)."""
        from s3ingest_fn import wiring

        (table,) = self.require(LEDGER_TABLE_NAME)
        return wiring.ledger(self.client("dynamodb"), table, 0)

    def objects(self) -> S3Objects:
        """The bucket adapter (current state of an object: HEAD, versions)."""
        from s3ingest_fn import wiring

        return wiring.objects(self.client("s3"))

    def reconciler(self, bucket: str | None = None) -> Reconciler:
        """Reconciliation against one of the stack's buckets (the first when None), its ledger
        and its ingest queue."""
        return self.stack.reconciler(self.session, bucket)

    def verify_pipeline(self) -> DeployedPipeline:
        """The deploy check's view of the stack (outputs ``BucketName``, ``LedgerTableName``,
        optionally ``ChangeAuditLogGroupName``)."""
        from s3ingest.commands.verify import DeployedPipeline

        self.require(BUCKET_NAME, LEDGER_TABLE_NAME)
        return DeployedPipeline(self.session, self.outputs)


def connect(options: AwsOptions, stack: str) -> Deployed:
    """Open ``stack`` with the session of ``options`` (``--profile``, ``--region``, else the
    default chain: environment, profile, SSO, instance role) and read its outputs
    (``cloudformation:DescribeStacks``).

    Raises
    ------
    botocore.exceptions.BotoCoreError
        No region, no credentials, an unknown profile.
    s3ingest.deployed.StackNotFoundError
        The stack does not exist or cannot be read, or holds no pipeline of
        ``options.pipeline`` (:meth:`~s3ingest.deployed.DeployedStack.pipeline`).
    """
    import boto3

    from s3ingest.deployed import DeployedStack

    session = boto3.session.Session(profile_name=options.profile, region_name=options.region)
    found = DeployedStack.load(session.client("cloudformation"), stack)
    return Deployed(session, found.pipeline(options.pipeline))


class EndpointSession:
    """A boto3 session whose clients go to one endpoint (``s3ingest local up``'s emulator) with
    given credentials and region, as ``AWS_ENDPOINT_URL`` would make them
    (https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html); everything
    else is the wrapped session's.

    ``wrap`` maps a service to a function applied to each new client of it (the CLI passes
    :func:`s3ingest.local.emulator.s3control_jobs.local_host` for ``s3control``: S3 Control requests
    sent to the endpoint's host).
    """

    def __init__(
        self,
        endpoint: str,
        region: str,
        credentials: dict[str, str],
        wrap: Mapping[str, Callable[[Any], Any]] | None = None,
    ) -> None:
        import boto3

        self.endpoint_url = endpoint
        self._wrap = dict(wrap or {})
        self._session: Any = boto3.session.Session(
            region_name=region,
            aws_access_key_id=credentials["aws_access_key_id"],
            aws_secret_access_key=credentials["aws_secret_access_key"],
        )

    def client(self, service: str, **kwargs: Any) -> Any:
        """The session's client of ``service``, bound to the endpoint (and wrapped, when
        ``wrap`` names the service)."""
        client = self._session.client(service, **{"endpoint_url": self.endpoint_url, **kwargs})
        if service in self._wrap:
            client = self._wrap[service](client)
        return client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def connect_local(
    run: dict[str, Any], *, wrap: Mapping[str, Callable[[Any], Any]] | None = None
) -> Deployed:
    """The running local stack (``s3ingest local up``'s run file ``run``: ``endpoint``,
    ``region``, ``credentials``, ``stack``, ``outputs``) as a :class:`Deployed`, for the same
    code paths as a deployed stack; ``wrap`` as :class:`EndpointSession`'s."""
    from s3ingest.deployed import DeployedStack

    session = EndpointSession(run["endpoint"], run["region"], dict(run["credentials"]), wrap)
    return Deployed(session, DeployedStack(str(run["stack"]), dict(run["outputs"])))
