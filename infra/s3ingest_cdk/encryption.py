"""``kmsKeyArn``: the pipeline's customer-managed key, found by every construct below it, and the
key grants each role gets for what its own policy reads and writes (``docs/encryption.md``).

The constructs of the pipeline call :func:`pipeline_key` (``None`` without ``kmsKeyArn``: each
service's own encryption, the template as before). After composing, :func:`grant_key_use`
reads every role's policy and grants the key actions its resource actions need, on the key's
ARN only; :func:`grant_bucket_keys` does the same for the adopted buckets' own SSE-KMS keys,
to exactly the roles that read those buckets' objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from aws_cdk import Aws, RemovalPolicy, Stack, Token
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct, IConstruct

from s3ingest.encryption import key_policy_statements
from s3ingest.key_use import KMS_ACTIONS, READ  # docs/iam.md's table reads the same
from s3ingest.settings import CREATE_KEY, Settings
from s3ingest_cdk.nag import grant

#: The attribute of the pipeline construct that holds its key.
_KEY_ATTRIBUTE = "encryption_key"

#: The object reads that need the bucket's own key (an adopted SSE-KMS bucket).
OBJECT_READS = frozenset({"s3:GetObject", "s3:GetObjectVersion"})


def pipeline_key(scope: IConstruct) -> kms.IKey | None:
    """The key of the pipeline ``scope`` is in, or None (no ``kmsKeyArn``)."""
    for ancestor in reversed(scope.node.scopes):
        key = getattr(ancestor, _KEY_ATTRIBUTE, None)
        if key is not None:
            return key
    return None


def attach_key(
    pipeline: Construct,
    kms_key_arn: str | None,
    stage: str,
    remote_inventories: Mapping[str, Sequence[str]] | None = None,
) -> kms.IKey | None:
    """The pipeline's key for the ``kmsKeyArn`` setting, made findable by
    :func:`pipeline_key` (set before any child that encrypts is created).

    ``"create"``: a new symmetric key ``Key`` (rotated yearly, retained on stack deletion: it
    decrypts the retained ledger, dead letters and logs; alias ``alias/s3ingest-<stage>``) whose
    policy holds :func:`s3ingest.encryption.key_policy_statements` (with
    ``remote_inventories``: account -> the names of its buckets whose inventory reports land in
    the stack's inventory bucket, encrypted with the key). An ARN: the key, imported
    (``Key.from_key_arn``); its own policy must hold those statements
    (``docs/encryption.md``): the stack can add grants to its roles' policies only.
    """
    key: kms.IKey | None = None
    if kms_key_arn == CREATE_KEY:
        created = kms.Key(
            pipeline,
            "Key",
            description=f"s3ingest {stage}: encrypts the pipeline's data, queues and logs",
            alias=f"alias/s3ingest-{stage}",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        for statement in key_policy_statements(
            Aws.ACCOUNT_ID, Aws.REGION, Aws.PARTITION, remote_inventories
        ):
            created.add_to_resource_policy(iam.PolicyStatement.from_json(statement))
        key = created
    elif kms_key_arn is not None:
        key = kms.Key.from_key_arn(pipeline, "Key", kms_key_arn)
    setattr(pipeline, _KEY_ATTRIBUTE, key)
    return key


def key_region_problems(region: str, settings: Settings) -> list[str]:
    """A key ARN (``kmsKeyArn``, a bucket's ``kmsKeyArn``) in another region than the stack's
    (when the stack's region is known at synth): KMS keys are regional, and SQS, DynamoDB,
    CloudWatch Logs and S3 take a key of their own region only
    (https://docs.aws.amazon.com/kms/latest/developerguide/concepts.html#kms-keys)."""
    if Token.is_unresolved(region):
        return []
    named = [("kmsKeyArn", settings.kms_key_arn)] + [
        (f"buckets[{i}].kmsKeyArn", spec.kms_key_arn) for i, spec in enumerate(settings.buckets)
    ]
    problems = []
    for where, arn in named:
        if arn is None or arn == CREATE_KEY or Token.is_unresolved(arn):
            continue
        key_region = arn.split(":")[3]
        if key_region != region:
            problems.append(
                f"{where}: the key is in {key_region}, the stack in {region}: a KMS key serves "
                "its own region only (use a key of the stack's region, or a multi-Region "
                "replica there)"
            )
    return problems


def _roles_with_policies(root: IConstruct) -> Iterable[tuple[iam.Role, list[dict]]]:
    """Every role created below ``root`` with the statements of its default policy."""
    stack = Stack.of(root)
    for node in root.node.find_all():
        if not isinstance(node, iam.Role):
            continue
        policy = node.node.try_find_child("DefaultPolicy")
        if not isinstance(policy, iam.Policy):
            continue
        document = stack.resolve(policy.document.to_json()) or {}
        statements = document.get("Statement", [])
        yield node, [s for s in statements if s.get("Effect") == "Allow"]


def _actions(statement: dict) -> list[str]:
    actions = statement.get("Action", [])
    return [actions] if isinstance(actions, str) else list(actions)


def grant_key_use(root: Construct, key: kms.IKey) -> dict[str, list[str]]:
    """Grant each role below ``root`` the key actions its resource actions need
    (:data:`KMS_ACTIONS`), and ``kms:Decrypt`` to every function's role (its environment is
    encrypted with the key); returns the actions by role path (for the tests)."""
    granted: dict[str, list[str]] = {}
    function_roles = {
        node.role.node.path
        for node in root.node.find_all()
        if isinstance(node, lambda_.Function) and node.role is not None
    }
    for role, statements in _roles_with_policies(root):
        needed: set[str] = set()
        for statement in statements:
            for action in _actions(statement):
                needed.update(KMS_ACTIONS.get(action, ()))
        if role.node.path in function_roles:
            needed.update(READ)
        if needed:
            actions = sorted(needed)
            grant(role, actions, key.key_arn)
            granted[role.node.path] = actions
    return granted


def grant_bucket_keys(
    root: Construct, buckets: Sequence[tuple[str, Sequence[str]]]
) -> dict[str, list[str]]:
    """``kms:Decrypt`` on each adopted bucket's own key to exactly the roles below ``root`` whose
    policy reads the bucket's objects (:data:`OBJECT_READS`: ingest's pinned read,
    reconciliation, the backfill workers, the listing shard; the functions that run the
    processors sign their presigned GETs with these roles).

    ``buckets``: ``(key ARN, the bucket's ARN forms)``, an ARN form as a policy names the bucket
    (``arn:${AWS::Partition}:s3:::name`` or a created bucket's token). Returns the key ARNs
    granted, by role path.
    """
    stack = Stack.of(root)
    granted: dict[str, list[str]] = {}
    roles = list(_roles_with_policies(root))
    for key_arn, arn_forms in buckets:
        prefixes = [f"{flatten(stack.resolve(form))}/" for form in arn_forms]
        for role, statements in roles:
            reads = any(
                set(_actions(s)) & OBJECT_READS
                and any(
                    str(resource).startswith(prefix)
                    for resource in _resources(s)
                    for prefix in prefixes
                )
                for s in statements
            )
            if reads:
                grant(role, READ, key_arn)
                granted.setdefault(role.node.path, []).append(key_arn)
    return granted


def _resources(statement: dict) -> list[str]:
    """The statement's resources, each a string (a resolved ``Fn::Join`` flattened)."""
    resources = statement.get("Resource", [])
    items = resources if isinstance(resources, list) else [resources]
    return [flatten(item) for item in items]


def flatten(value: object) -> str:
    """A resolved template value as a string (an ``Fn::Join`` joined, other tokens as their
    ``str``): comparable with another resolved the same way."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(flatten(p) for p in parts)
    return str(value)


def encrypt_everything(root: Construct, key: kms.IKey) -> None:
    """Encrypt every resource below ``root`` that can be with ``key``, on its L1 resource (so a
    construct any feature adds is covered): queues, tables, buckets (bucket keys on; the server
    access log destination too: the key policy lets S3's logging principal write under it),
    topics, secrets, the change bus, archives, log groups, state machines and the functions'
    environments. Run after composing, before
    :func:`grant_key_use`.

    https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-server-side-encryption.html,
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/EncryptionAtRest.html,
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-key.html,
    https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars-encryption.html,
    https://docs.aws.amazon.com/step-functions/latest/dg/encryption-at-rest.html
    """
    arn = key.key_arn
    for node in root.node.find_all():
        if isinstance(node, sqs.CfnQueue):
            node.sqs_managed_sse_enabled = None
            node.kms_master_key_id = arn
        elif isinstance(node, dynamodb.CfnTable):
            node.sse_specification = dynamodb.CfnTable.SSESpecificationProperty(
                sse_enabled=True, sse_type="KMS", kms_master_key_id=arn
            )
        elif isinstance(node, s3.CfnBucket):
            node.bucket_encryption = s3.CfnBucket.BucketEncryptionProperty(
                server_side_encryption_configuration=[
                    s3.CfnBucket.ServerSideEncryptionRuleProperty(
                        bucket_key_enabled=True,
                        server_side_encryption_by_default=(
                            s3.CfnBucket.ServerSideEncryptionByDefaultProperty(
                                sse_algorithm="aws:kms", kms_master_key_id=arn
                            )
                        ),
                    )
                ]
            )
        elif isinstance(node, sns.CfnTopic):
            node.kms_master_key_id = arn
        elif isinstance(node, secretsmanager.CfnSecret):
            node.kms_key_id = arn
        elif isinstance(node, events.CfnEventBus | events.CfnArchive):
            node.kms_key_identifier = arn
        elif isinstance(node, logs.CfnLogGroup):
            node.kms_key_id = arn
        elif isinstance(node, lambda_.CfnFunction):
            node.kms_key_arn = arn
        elif isinstance(node, sfn.StateMachine):
            _encrypt_state_machine(node, key)


def _encrypt_state_machine(machine: sfn.StateMachine, key: kms.IKey) -> None:
    """The machine's data encrypted with ``key``, and its role's grants: its executions'
    encryption context, and the data key of its vended execution logs (what CDK's
    ``CustomerManagedEncryptionConfiguration`` grants, without the key-policy statement it adds
    to a created key: :func:`s3ingest.encryption.key_policy_statements` holds a conditioned one).
    https://docs.aws.amazon.com/step-functions/latest/dg/encryption-at-rest.html
    """
    cfn = machine.node.default_child
    assert isinstance(cfn, sfn.CfnStateMachine)
    cfn.encryption_configuration = sfn.CfnStateMachine.EncryptionConfigurationProperty(
        type="CUSTOMER_MANAGED_KMS_KEY",
        kms_key_id=key.key_arn,
        kms_data_key_reuse_period_seconds=300,
    )
    machine.role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["kms:Decrypt", "kms:GenerateDataKey"],
            resources=[key.key_arn],
            conditions={
                "StringLike": {
                    "kms:EncryptionContext:aws:states:stateMachineArn": (
                        f"arn:{Aws.PARTITION}:states:{Aws.REGION}:{Aws.ACCOUNT_ID}:stateMachine:*"
                    )
                }
            },
        )
    )
    machine.role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["kms:GenerateDataKey"],
            resources=[key.key_arn],
            conditions={
                "StringLike": {
                    "kms:EncryptionContext:SourceArn": (
                        f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:*"
                    )
                }
            },
        )
    )
