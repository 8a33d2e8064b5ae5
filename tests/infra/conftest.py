"""Infrastructure test fixtures: the app synthesized once per session, in-process (no CDK CLI).

The app gets the context of ``cdk.json`` (settings defaults and feature flags), the composition of
``app.py`` (:func:`s3ingest_cdk.compose.compose`) and a fixed region, and needs no AWS credentials.

With parallel workers (``pytest -n 2 --dist loadgroup``, as ``make test`` runs), every test of
this directory is in one group (:data:`XDIST_GROUP`), so one worker synthesizes each variant once
and the other runs the rest of the suite meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from s3ingest.local.machines.generate import VARIANTS as CONTEXTS
from s3ingest_cdk.synth import Synth, synthesize

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
#: The two-bucket synth's context: a created bucket with key filters, and an existing bucket
#: with another team's inventory configuration; the fan-out and the Distributed Map backfill.
TWO_BUCKETS = {
    "stage": "two",
    "buckets": [
        {"prefixes": ["incoming/", "late arrivals/"], "suffixes": [".csv"]},
        {"name": PARTNER_BUCKET, "existing": True, "inventory": PARTNER_INVENTORY},
    ],
    "reconcileFanOut": True,
    "backfillEngine": "distributed-map",
}

#: Every synthesized variant, for the checks that apply to each (cdk-nag, cfn-lint).
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
    # the same context as the local runtime's machines (s3ingest/local/machines/generate.py)
    yield synthesize(tmp_path_factory.mktemp("cdk-out-fanout"), CONTEXTS["fanout"])


@pytest.fixture(scope="session")
def two_bucket_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """The app with two landing buckets (:data:`TWO_BUCKETS`), synthesized once."""
    yield synthesize(tmp_path_factory.mktemp("cdk-out-two"), TWO_BUCKETS)
