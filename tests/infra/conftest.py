"""Infrastructure test fixtures: the app synthesized once per session, in-process (no CDK CLI).

The app gets the context of ``cdk.json`` (settings defaults and feature flags), the composition of
``app.py`` (:func:`s3ingest_cdk.compose.compose`) and a fixed region, and needs no AWS credentials.

With parallel workers (``pytest -n 2 --dist loadgroup``, as ``make test`` runs), every test of
this directory is in one group (:data:`XDIST_GROUP`), so one worker synthesizes each variant once
and the other runs the rest of the suite meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_

from s3ingest.settings import BucketSpec
from s3ingest_cdk import ProcessorConfig, S3IngestPipeline
from s3ingest_cdk.bundling import BUNDLE_CACHE_CONTEXT
from s3ingest_cdk.local_machines import VARIANTS as CONTEXTS
from s3ingest_cdk.synth import Synth, recommended_flags
from s3ingest_cdk.synth import synthesize as _synthesize


def synthesize(outdir: Path, overrides: Mapping[str, Any] | None = None, **kwargs: Any) -> Synth:
    """:func:`s3ingest_cdk.synth.synthesize`, the functions' package built in one cache per
    test session (beside the synths' outdirs, all made by ``tmp_path_factory``): the lock is
    installed once, not once per synth."""
    cache = str(outdir.parent / "s3ingest-build")
    return _synthesize(outdir, {**(overrides or {}), BUNDLE_CACHE_CONTEXT: cache}, **kwargs)


#: The existing bucket the adoption tests deploy against.
ADOPTED_BUCKET = "existing-landing-bucket"

#: The address the fan-out synth subscribes to the alarm topic (``alarmEmail``).
ALARM_EMAIL = str(CONTEXTS["fanout"]["alarmEmail"])

#: The processor the fan-out synth runs: the repository's example (``functions/s3ingest_examples``).
PROCESSOR = str(CONTEXTS["fanout"]["processor"])

#: The pytest-xdist group of the tests that synthesize (``--dist loadgroup``: one worker).
XDIST_GROUP = "synth"

#: The existing bucket of the two-bucket synth, and the existing inventory configuration it
#: names (another team's: its reports in another bucket).
PARTNER_BUCKET = "partner-drop-bucket"
PARTNER_INVENTORY = {
    "id": "partner-daily",
    "bucket": "partner-inventory-reports",
    "prefix": "reports",
}
#: Reserved concurrency: the ingest function's (three-processor synth) and each backfill
#: worker's (three-processor and two-bucket synths).
INGEST_RESERVED = 20
BACKFILL_RESERVED = 4
#: The operator role of the two-bucket synth (``operatorRoleArns``: may send to the ingest
#: queue, for a redrive).
OPERATOR_ROLE_ARN = "arn:aws:iam::123456789012:role/ops/s3ingest-operator"
#: The two-bucket synth's context: a created bucket with key filters, and an existing bucket
#: with another team's inventory configuration; the fan-out and the Distributed Map backfill;
#: an operator role; the backfill workers' reserved concurrency.
TWO_BUCKETS = {
    "stage": "two",
    "buckets": [
        {"prefixes": ["incoming/", "late arrivals/"], "suffixes": [".csv"]},
        {"name": PARTNER_BUCKET, "existing": True, "inventory": PARTNER_INVENTORY},
    ],
    "reconcileFanOut": True,
    "backfillEngine": "distributed-map",
    "operatorRoleArns": [OPERATOR_ROLE_ARN],
    "backfillReservedConcurrency": BACKFILL_RESERVED,
}

#: The team's own processor function of the three-processor synth, and the queue its
#: in-process processor may send to (``processorPolicyStatements``).
TEAM_FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:team-audit"
TEAM_QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:team-thumbs"
#: The example processor function the stack deploys (``s3ingest_examples.sidecar:handler``).
EXAMPLE_HANDLER = "s3ingest_examples.sidecar:handler"
#: The three-processor synth's hold for review: the stack's (the mass-delete breaker) and the
#: team function's own (anything under ``audit/locked/``).
STACK_HOLD = {"deletes": {"above": 100, "windowSeconds": 300}}
AUDIT_HOLD = {"prefixes": ["audit/locked/"]}
#: Its review trail per row and held-changes alarm threshold (seconds).
TRAIL_LENGTH = 8
HOLD_ALARM_SECONDS = 7_200
#: Three processors: the team's function (by ARN), the example deployed as a function, an
#: in-process module; the function timeouts raise the ingest-side functions' timeouts
#: (reconcileTimeoutSeconds lowered so the listing shard's is raised too). With hold for review
#: (the stack's, and the team function's own). Reserved concurrency.
PROCESSORS = {
    "stage": "procs",
    "reconcileTimeoutSeconds": 100,
    "hold": STACK_HOLD,
    "trailLength": TRAIL_LENGTH,
    "holdAlarmSeconds": HOLD_ALARM_SECONDS,
    "ingestReservedConcurrency": INGEST_RESERVED,
    "backfillReservedConcurrency": BACKFILL_RESERVED,
    "processors": [
        {
            "name": "audit",
            "functionArn": TEAM_FUNCTION_ARN,
            "mode": "every-change",
            "prefixes": ["audit/"],
            "timeoutSeconds": 120,
            "hold": AUDIT_HOLD,
        },
        {"name": "sidecar", "handler": EXAMPLE_HANDLER, "timeoutSeconds": 60},
        {
            "name": "thumbs",
            "module": "s3ingest_examples.sidecar:process",
            "suffixes": [".jpg"],
            "kinds": ["created"],
        },
    ],
    "processorPolicyStatements": [
        {"Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": TEAM_QUEUE_ARN}
    ],
}

#: The adopted SSE-KMS bucket of the encrypted synth, and its own key (another team's).
KMS_BUCKET = "partner-kms-bucket"
KMS_BUCKET_KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/0b6c1a2e-3f4d-4e5f-8a9b-0c1d2e3f4a5b"
#: The encrypted synth: the fan-out app (every optional part: both Step Functions engines, the
#: change stream, a processor, an alarm e-mail) with ``kmsKeyArn: create``, hashed log keys (the
#: secret), attestations kept under S3 Object Lock (:data:`KMS_ATTESTATION_DAYS`) and, besides
#: the created bucket, an adopted SSE-KMS bucket naming its own key.
KMS_ATTESTATION_DAYS = 400
KMS = {
    **CONTEXTS["fanout"],
    "stage": "kms",
    "kmsKeyArn": "create",
    "logKeys": "hashed",
    "attestationRetentionDays": KMS_ATTESTATION_DAYS,
    "buckets": [{}, {"name": KMS_BUCKET, "existing": True, "kmsKeyArn": KMS_BUCKET_KEY_ARN}],
}

#: Every synthesized variant, for the checks that apply to each (cdk-nag, cfn-lint; the
#: encrypted synth's are in test_infra_encryption.py).
VARIANTS = ["synth", "adopted_synth", "fanout_synth", "two_bucket_synth"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the tests of this directory in :data:`XDIST_GROUP` (a no-op without xdist)."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.xdist_group(XDIST_GROUP))


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """The default app (``cdk.json`` context only), synthesized once for the session."""
    yield synthesize(tmp_path_factory.mktemp("cdk-out"))


@pytest.fixture(scope="session")
def adopted_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """The app adopting an existing bucket (``bucketName`` given), synthesized once."""
    yield synthesize(
        tmp_path_factory.mktemp("cdk-out-adopted"),
        {"bucketName": ADOPTED_BUCKET, "stage": "adopted"},
    )


@pytest.fixture(scope="session")
def fanout_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """The app with every optional part: the Step Functions engines (the fan-out reconciliation,
    ``reconcileFanOut``, and the Distributed Map backfill, ``backfillEngine=distributed-map``), an
    alarm e-mail subscription (``alarmEmail``), the example processor (``processor``), the
    change stream (``changeStream``) and X-Ray tracing (``tracing``), synthesized once."""
    # the same context as the local runtime's machines (s3ingest_cdk/local_machines.py)
    yield synthesize(tmp_path_factory.mktemp("cdk-out-fanout"), CONTEXTS["fanout"])


@pytest.fixture(scope="session")
def two_bucket_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """The app with two landing buckets (:data:`TWO_BUCKETS`), synthesized once."""
    yield synthesize(tmp_path_factory.mktemp("cdk-out-two"), TWO_BUCKETS)


@pytest.fixture(scope="session")
def processors_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """The app with three processors (:data:`PROCESSORS`), synthesized once, with inline
    stand-in code: the template does not depend on the bundle, whose check of ``handler`` and
    ``module`` entries is tested on its own (test_infra_processors.py)."""
    yield synthesize(
        tmp_path_factory.mktemp("cdk-out-processors"),
        PROCESSORS,
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
    )


@pytest.fixture(scope="session")
def log_keys_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """The fan-out app (every optional part, the change stream included) with ``logKeys:
    hashed``, synthesized once with inline stand-in code (the template does not depend on the
    bundle)."""
    yield synthesize(
        tmp_path_factory.mktemp("cdk-out-log-keys"),
        {**CONTEXTS["fanout"], "stage": "logkeys", "logKeys": "hashed"},
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
    )


@pytest.fixture(scope="session")
def kms_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """The app of :data:`KMS` (``kmsKeyArn: create``), synthesized once with inline stand-in
    code (the template does not depend on the bundle)."""
    yield synthesize(
        tmp_path_factory.mktemp("cdk-out-kms"),
        KMS,
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
    )


@pytest.fixture(scope="session")
def bare_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """The app as ``python app.py`` runs it without the CDK CLI: no context at all (no feature
    flag, the settings' defaults), synthesized once."""
    yield synthesize(tmp_path_factory.mktemp("cdk-out-bare"), context={})


#: The existing bucket of the team-app synths (set up by the pipeline's custom resource).
TEAM_PARTNER_BUCKET = "team-partner-bucket"


@dataclass(frozen=True)
class TeamSynth:
    """A team's app: its stack (``Team``, environment-agnostic) holding one ``S3IngestPipeline``
    with every optional part (created and existing buckets, both Step Functions engines,
    processors of each kind, hold, change stream, tracing, alarm e-mail), synthesized."""

    app: App
    stack: Stack
    pipeline: S3IngestPipeline
    template: dict[str, Any]
    template_path: Path


def synthesize_team_app(outdir: Path, context: Mapping[str, Any]) -> TeamSynth:
    """:class:`TeamSynth` under the app context ``context`` (inline stand-in code)."""
    app = App(context=dict(context), outdir=str(outdir))
    stack = Stack(app, "Team")
    pipeline = S3IngestPipeline(
        stack,
        "Ingest",
        stage="team",
        buckets=[BucketSpec(), BucketSpec(name=TEAM_PARTNER_BUCKET, existing=True)],
        reconcile_fan_out=True,
        backfill_engine="distributed-map",
        alarm_email=ALARM_EMAIL,
        processors=[
            ProcessorConfig("sidecar", handler=EXAMPLE_HANDLER),
            ProcessorConfig("thumbs", module="s3ingest_examples.sidecar:process"),
        ],
        hold=STACK_HOLD,
        change_stream=True,
        tracing=True,
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
    )
    artifact = app.synth().get_stack_by_name("Team")
    return TeamSynth(
        app=app,
        stack=stack,
        pipeline=pipeline,
        template=artifact.template,
        template_path=Path(artifact.template_full_path),
    )


#: The team-app synths: no context at all, and the flags ``cdk init`` writes today.
TEAM_VARIANTS = ["team_bare_synth", "team_recommended_synth"]


@pytest.fixture(scope="session")
def team_bare_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeamSynth]:
    """The team's app with no context at all (no feature flag), synthesized once."""
    yield synthesize_team_app(tmp_path_factory.mktemp("cdk-out-team-bare"), {})


@pytest.fixture(scope="session")
def team_recommended_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeamSynth]:
    """The team's app with the feature flags ``cdk init`` writes for the installed aws-cdk-lib
    (:func:`s3ingest_cdk.synth.recommended_flags`), synthesized once."""
    yield synthesize_team_app(
        tmp_path_factory.mktemp("cdk-out-team-recommended"), recommended_flags()
    )


#: The organisation synths (``docs/organisation.md``): the central account, a bucket's account,
#: its bucket (with key filters) and a second one of that account (no inventory, unversioned).
CENTRAL_ACCOUNT = "111111111111"
PRODUCER_ACCOUNT = "222222222222"
PRODUCER_BUCKET = "producer-drop-bucket"
PRODUCER_ARCHIVE = "producer-archive"
#: The central roles the read role trusts, and the central inventory bucket.
READER_ROLES = (f"arn:aws:iam::{CENTRAL_ACCOUNT}:role/S3Ingest-org-*",)
CENTRAL_INVENTORY_ARN = "arn:aws:s3:::central-inventory-bucket"
#: The central app with a created bucket and the producer's bucket (``account``).
REMOTE = {
    "stage": "org",
    "buckets": [
        {},
        {
            "name": PRODUCER_BUCKET,
            "existing": True,
            "account": PRODUCER_ACCOUNT,
            "prefixes": ["incoming/"],
        },
    ],
}
_INLINE = "def handler(event, context):\n    return None\n"


@pytest.fixture(scope="session")
def remote_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """The central app with a bucket of another account (:data:`REMOTE`), synthesized once
    with inline stand-in code."""
    yield synthesize(
        tmp_path_factory.mktemp("cdk-out-remote"), REMOTE, code=lambda_.Code.from_inline(_INLINE)
    )


#: The central app of :data:`REMOTE` with ``kmsKeyArn: create`` (the inventory bucket under the
#: key receives the producer's reports) and the change stream (the relay reads no bucket).
REMOTE_KMS = {**REMOTE, "stage": "orgkms", "kmsKeyArn": "create", "changeStream": True}


@pytest.fixture(scope="session")
def remote_kms_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """The central app of :data:`REMOTE_KMS`, synthesized once with inline stand-in code."""
    yield synthesize(
        tmp_path_factory.mktemp("cdk-out-remote-kms"),
        REMOTE_KMS,
        code=lambda_.Code.from_inline(_INLINE),
    )


@dataclass(frozen=True)
class SourceSynth:
    """The producer account's source stack (``S3IngestSourceStack``), synthesized."""

    app: App
    stack: Stack
    template: dict[str, Any]
    template_path: Path


@pytest.fixture(scope="session")
def source_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SourceSynth]:
    """The source stack of the producer's two buckets, in its account and the central Region,
    synthesized once with inline stand-in code."""
    from aws_cdk import Environment

    from s3ingest_cdk import S3IngestSourceStack

    app = App(outdir=str(tmp_path_factory.mktemp("cdk-out-source")), analytics_reporting=False)
    stack = S3IngestSourceStack(
        app,
        "ProducerSource",
        env=Environment(account=PRODUCER_ACCOUNT, region="us-east-1"),
        central_account=CENTRAL_ACCOUNT,
        central_region="us-east-1",
        buckets=[
            BucketSpec(name=PRODUCER_BUCKET, prefixes=("incoming/",), suffixes=(".csv",)),
            BucketSpec(name=PRODUCER_ARCHIVE, inventory=False, versioned=False),
        ],
        reader_role_arns=list(READER_ROLES),
        inventory_destination_arn=CENTRAL_INVENTORY_ARN,
        code=lambda_.Code.from_inline(_INLINE),
    )
    artifact = app.synth().get_stack_by_name("ProducerSource")
    yield SourceSynth(
        app=app,
        stack=stack,
        template=artifact.template,
        template_path=Path(artifact.template_full_path),
    )
