"""A deployed s3ingest stack, found by its CloudFormation outputs.

The CLI's commands against a deployed stack run here, in the operator's process, with the
operator's credentials (the default boto3 chain: environment, profile, SSO, instance role).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import Any

from s3ingest.outputs import (
    BUCKET_NAME,
    BUCKET_NAMES,
    BUCKET_OWNERS,
    BUCKET_SCOPE,
    HOLD_PROCESSORS,
    INVENTORY_BUCKET_NAME,
    LEDGER_TABLE_NAME,
    PIPELINE_STAGE,
    PROCESSOR_NAMES,
    PROCESSOR_TARGETS,
    QUEUE_URL,
    REMOTE_READ_ROLE_ARNS,
    names,
)
from s3ingest.settings import inventory_report_prefix
from s3ingest_fn import wiring
from s3ingest_fn.core.effects import EffectTarget
from s3ingest_fn.core.scope import Scope
from s3ingest_fn.services.reconcile import Reconciler


class StackNotFoundError(RuntimeError):
    """The stack does not exist, or lacks the outputs this command needs."""


@dataclass(frozen=True)
class DeployedStack:
    """Outputs of an ``S3Ingest-<stage>`` stack."""

    name: str
    outputs: dict[str, str]

    @classmethod
    def load(cls, cloudformation: Any, name: str) -> DeployedStack:
        """Read the stack's outputs.

        Raises
        ------
        StackNotFoundError
        """
        from botocore.exceptions import ClientError

        try:
            stacks = cloudformation.describe_stacks(StackName=name)["Stacks"]
        except ClientError as exc:
            raise StackNotFoundError(f"stack {name!r}: {exc}") from exc
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
        # the stack's name even when given as an ARN: metrics carry it as their stack dimension
        return cls(name=str(stacks[0].get("StackName") or name), outputs=outputs)

    def published(self) -> dict[str, str]:
        """The pipelines the stack's outputs publish (``S3IngestPipeline`` in a team's stack):
        output prefix by stage (:func:`s3ingest.outputs.published_prefix`)."""
        return {
            value: key.removesuffix(PIPELINE_STAGE)
            for key, value in self.outputs.items()
            if key.startswith("S3Ingest") and key.endswith(PIPELINE_STAGE)
        }

    def pipeline(self, stage: str | None = None) -> DeployedStack:
        """The outputs of one pipeline of the stack, by their plain names: the stack's own
        (``S3IngestStack``), or those a pipeline published with its stage's prefix, which
        ``stage`` picks when the stack holds several.

        Raises
        ------
        StackNotFoundError
            No pipeline of ``stage``; several and no ``stage``.
        """
        published = self.published()
        if stage is None and (LEDGER_TABLE_NAME in self.outputs or not published):
            return self
        if stage is None and len(published) == 1:
            (stage,) = published
        if stage is None or stage not in published:
            found = ", ".join(sorted(published)) or "none (its outputs are its one pipeline's)"
            ask = "name one with --pipeline STAGE" if stage is None else f"no pipeline {stage!r}"
            raise StackNotFoundError(
                f"stack {self.name!r}: {ask}; the pipelines it publishes: {found}"
            )
        prefix, known = published[stage], names()
        # a longer prefix (stage "up-load" beside "up") claims its own outputs
        longer = [p for p in published.values() if p != prefix and p.startswith(prefix)]
        outputs = {
            key.removeprefix(prefix): value
            for key, value in self.outputs.items()
            if key.startswith(prefix)
            and key.removeprefix(prefix) in known
            and not any(key.startswith(p) and key.removeprefix(p) in known for p in longer)
        }
        return DeployedStack(name=self.name, outputs=outputs)

    def processor_targets(self) -> tuple[EffectTarget, ...]:
        """The processors' versions and filters (output ``ProcessorTargets``; none from a stack
        deployed before it, or a malformed one)."""
        from s3ingest_fn.effect_targets import parse_targets

        try:
            return parse_targets(self.outputs.get(PROCESSOR_TARGETS) or "[]")
        except ValueError:
            return ()

    def scope(self) -> Scope:
        """The landing buckets and their key filters (output ``BucketScope``); a stack deployed
        before it (or a malformed one): its buckets without filters.

        Raises
        ------
        StackNotFoundError
            Neither ``BucketScope`` nor the bucket outputs.
        """
        try:
            return Scope.of(json.loads(self.outputs[BUCKET_SCOPE]))
        except (KeyError, ValueError, TypeError, AttributeError):
            return Scope.of({"name": name} for name in self.bucket_names)

    def hold_processors(self) -> list[str] | None:
        """The processors a hold policy applies to (output ``HoldProcessors``; ``[]``: no hold
        policy is configured); None when unknown (a stack deployed before the output, or a
        malformed one)."""
        try:
            names = json.loads(self.outputs[HOLD_PROCESSORS])
        except (KeyError, json.JSONDecodeError):
            return None
        if not isinstance(names, list):
            return None
        return [str(n) for n in names]

    def require(self, *names: str) -> list[str]:
        """The named outputs, or StackNotFoundError naming the missing ones."""
        missing = [n for n in names if n not in self.outputs]
        if missing:
            raise StackNotFoundError(
                f"stack {self.name!r} has no output(s) {', '.join(missing)}; "
                "is it an s3ingest stack, deployed from this version?"
            )
        return [self.outputs[n] for n in names]

    @property
    def bucket_names(self) -> list[str]:
        """The stack's landing buckets in settings order: output ``BucketNames``
        (comma-joined), else ``BucketName`` (stacks of earlier releases)."""
        names = self.outputs.get(BUCKET_NAMES)
        if names:
            return [n for n in names.split(",") if n]
        return self.require(BUCKET_NAME)

    def bucket(self, name: str | None = None) -> str:
        """Landing bucket ``name`` checked against the stack's, or the first one when None.

        Raises
        ------
        StackNotFoundError
            When the stack has no such landing bucket.
        """
        names = self.bucket_names
        if name is None:
            return names[0]
        if name not in names:
            raise StackNotFoundError(
                f"stack {self.name!r} has no landing bucket {name!r} (its buckets: "
                f"{', '.join(names)})"
            )
        return name

    @property
    def read_roles(self) -> dict[str, str]:
        """Each bucket of another account -> the read role the pipeline assumes for it
        (output ``RemoteReadRoleArns``; empty without remote buckets)."""
        roles: dict[str, str] = json.loads(self.outputs.get(REMOTE_READ_ROLE_ARNS) or "{}")
        return roles

    @property
    def bucket_owners(self) -> dict[str, str]:
        """Each landing bucket -> the account that owns it (output ``BucketOwners``; empty for
        a stack deployed before it had one: nothing checked)."""
        owners: dict[str, str] = json.loads(self.outputs.get(BUCKET_OWNERS) or "{}")
        return owners

    def s3(self, session: Any) -> Any:
        """``session``'s S3 client; with buckets of other accounts, one that reads each of them
        through its read role (:class:`~s3ingest_fn.adapters.bucket_routes.BucketRoutedS3`,
        as the functions do): the role's trust must admit the operator's role
        (``docs/organisation.md``). Every call on a landing bucket names its owner
        (``ExpectedBucketOwner``, :func:`~s3ingest_fn.adapters.bucket_owners.expect_owners`)."""
        from s3ingest_fn.adapters.bucket_owners import expect_owners

        own = session.client("s3")
        roles = self.read_roles
        if not roles:  # the session's region is read only for the roles' sessions
            return expect_owners(own, self.bucket_owners)
        from s3ingest_fn.adapters.bucket_routes import reading_through

        sts = partial(session.client, "sts")
        return expect_owners(
            reading_through(own, roles, sts, session.region_name), self.bucket_owners
        )

    def reconciler(self, session: Any, bucket: str | None = None) -> Reconciler:
        """Reconciliation against one of this stack's buckets (the first when None), its
        ledger and its ingest queue."""
        first, table, queue = self.require(BUCKET_NAME, LEDGER_TABLE_NAME, QUEUE_URL)
        bucket = (
            self.bucket(bucket) if bucket is not None or BUCKET_NAMES in self.outputs else first
        )
        return wiring.reconciler(
            s3=self.s3(session),
            dynamodb=session.client("dynamodb"),
            sqs=session.client("sqs"),
            bucket=bucket,
            table=table,
            queue_url=queue,
            inventory_bucket=self.outputs.get(INVENTORY_BUCKET_NAME),
            inventory_prefix=inventory_report_prefix(bucket),
            processors=[n for n in self.outputs.get(PROCESSOR_NAMES, "").split(",") if n],
        )
