"""Reads of a bucket in another account go through that account's read role
(:mod:`s3ingest_fn.adapters.bucket_routes`), on the emulator with two accounts (moto keeps
state per account; the emulator refuses a bucket of another account, as S3 refuses a caller
the bucket's policy does not admit: :mod:`s3ingest.local.emulator.moto_accounts`)."""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path
from typing import Any, cast

import pytest
from botocore.exceptions import ClientError

from s3ingest.local.emulator.server import ACCOUNT, REGION
from s3ingest_fn import wiring
from s3ingest_fn.adapters.bucket_routes import BucketRoutedS3, assumed_session
from s3ingest_fn.adapters.s3_objects import S3ContentReader, S3Objects
from s3ingest_fn.config import ClientConfig
from s3ingest_fn.core.ports import Pin

#: The producer's account, and the role its source stack deploys for the central pipeline.
PRODUCER = "222233334444"
ROLE = f"arn:aws:iam::{PRODUCER}:role/s3ingest-source-read-{REGION}"


@pytest.fixture
def remote_bucket(emulator: Any) -> tuple[str, Any]:
    """A bucket of the producer's account holding ``in/a.txt``; returns its name and a client
    of the producer's account."""
    sts = emulator.client("sts")
    producer = assumed_session(sts, ROLE, REGION).client("s3", endpoint_url=emulator.endpoint_url)
    name = f"producer-{uuid.uuid4().hex[:12]}"
    producer.create_bucket(Bucket=name)
    producer.put_object(Bucket=name, Key="in/a.txt", Body=b"remote bytes")
    return name, producer


def _clients(emulator: Any, roles: dict[str, str]) -> ClientConfig:
    return ClientConfig(
        region=REGION,
        endpoint_url=emulator.endpoint_url,
        access_key_id="testing",
        secret_access_key="testing",
        read_roles_json=json.dumps(roles),
    )


def test_the_central_accounts_own_credentials_cannot_read_a_remote_bucket(
    emulator: Any, remote_bucket: tuple[str, Any]
) -> None:
    name, _ = remote_bucket
    own = wiring.client(_clients(emulator, {}), "s3")
    assert not isinstance(own, BucketRoutedS3)
    with pytest.raises(ClientError) as refused:
        own.head_object(Bucket=name, Key="in/a.txt")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_every_read_of_a_remote_bucket_uses_its_accounts_role(
    emulator: Any, remote_bucket: tuple[str, Any]
) -> None:
    name, _ = remote_bucket
    local = f"central-{uuid.uuid4().hex[:12]}"
    central = emulator.client("s3")
    central.create_bucket(Bucket=local)
    central.put_object(Bucket=local, Key="in/b.txt", Body=b"local bytes")
    s3 = wiring.client(_clients(emulator, {name: ROLE}), "s3")
    assert isinstance(s3, BucketRoutedS3) and s3.roles == {name: ROLE}
    # HEAD, GET, a paginated listing and a presigned URL of the remote bucket
    head = s3.head_object(Bucket=name, Key="in/a.txt")
    assert s3.get_object(Bucket=name, Key="in/a.txt")["Body"].read() == b"remote bytes"
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=name)
    assert [o["Key"] for page in pages for o in page.get("Contents", [])] == ["in/a.txt"]
    state = S3Objects(cast(Any, s3)).current(name, "in/a.txt")
    assert state is not None and state.etag == head["ETag"].strip('"')
    url = S3ContentReader(cast(Any, s3)).presign(
        Pin(bucket=name, key="in/a.txt", etag=state.etag), 60
    )
    request = urllib.request.Request(url.url, headers=url.headers)
    with urllib.request.urlopen(request) as answer:
        assert answer.read() == b"remote bytes"
    assert "X-Amz-Credential=testing" not in url.url  # the role's key, not the function's
    # AND a bucket of the central account still goes through the function's own credentials
    assert s3.for_bucket(local) is s3.for_bucket(None)
    assert s3.get_object(Bucket=local, Key="in/b.txt")["Body"].read() == b"local bytes"


def test_a_role_that_cannot_be_assumed_fails_the_read_with_sts_answer(emulator: Any) -> None:
    calls: list[str] = []

    def remote(role: str) -> Any:
        calls.append(role)
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "AssumeRole")

    s3 = BucketRoutedS3(emulator.client("s3"), {"far": ROLE}, remote)
    with pytest.raises(ClientError, match="AccessDenied"):
        s3.head_object(Bucket="far", Key="k")
    assert calls == [ROLE] and ACCOUNT not in ROLE


@pytest.mark.contract("C15")
def test_a_remote_bucket_is_ingested_reconciled_and_backfilled_through_its_role(
    emulator: Any,
) -> None:
    # GIVEN a pipeline whose landing bucket is an existing bucket of the producer's account
    # (its source stack deployed: delivery on), holding objects from before the pipeline
    from s3ingest.local.emulator.chaos import Chaos
    from s3ingest.local.stack.runtime import LocalRuntime, local_settings
    from s3ingest.settings import BucketSpec

    name = f"producer-{uuid.uuid4().hex[:12]}"
    spec = BucketSpec(name=name, existing=True, account=PRODUCER, versioned=True)
    rt = LocalRuntime(emulator, local_settings(), buckets=[spec])
    assert rt.resources.read_roles == {name: ROLE}
    for i in range(6):
        rt.faithful.put(f"old/{i}.txt", f"old {i}")
    rt.faithful.take_pending()  # written before the pipeline: no event reached it
    # WHEN live traffic arrives with drops and duplicates, and the bucket is backfilled
    for i in range(8):
        rt.faithful.put(f"in/{i}.txt", f"v1 {i}")
    rt.faithful.delete("in/3.txt")
    rt.flush(Chaos(seed=4, drop=0.25, duplicate=0.3, reorder=True))
    rt.drain()
    backfill = rt.backfill_listing()
    rt.reconcile("listing")
    # THEN the ledger equals the bucket, every effect ran, nothing was dead-lettered
    assert backfill["execution"]["status"] == "SUCCEEDED", backfill
    comparison = rt.compare()
    assert comparison.converged, comparison.differences
    assert rt.check_effects() == []
    assert rt.dlq_messages() == []
    assert {r.key for r in rt.ledger_rows() if r.present} >= {f"old/{i}.txt" for i in range(6)}
    # AND the central account's own credentials cannot read that bucket
    with pytest.raises(ClientError) as refused:
        emulator.client("s3").head_object(Bucket=name, Key="in/0.txt")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_example_remote_kms_bucket_scenario_onboards_and_converges() -> None:
    """Done-when check of issue 25: an existing SSE-KMS bucket of a second account, holding
    objects and another team's configuration, onboards from the central account, takes live
    traffic with drops and duplicates, reconciles and converges, the foreign configuration
    intact."""
    from s3ingest.local.rehearsal.scenario import run_scenario
    from s3ingest.local.stack.provisioning import FOREIGN_INVENTORY_ID, FOREIGN_QUEUE_ID

    result = run_scenario(Path("examples/scenarios/remote-kms-bucket.jsonl"))
    assert result["error"] is None
    assert result["converged"] is True, result["differences"]
    assert result["effects_problems"] == []
    (onboarded,) = result["onboardings"]
    assert onboarded["status"] == "done" and onboarded["objects"] >= 3
    assert onboarded["event_bridge"]["switched_on"] is False  # the source stack's doing
    config = result["bucket_config"]["producer-landing"]
    assert "EventBridgeConfiguration" in config["notification"]
    queues = config["notification"].get("QueueConfigurations", [])
    assert any(q["Id"] == FOREIGN_QUEUE_ID for q in queues)
    assert any(c["Id"] == FOREIGN_INVENTORY_ID for c in config["inventory"])
    keys = {r["key"]: r["state"] for r in result["ledger"]}
    assert keys["2024/report one.csv"] == "present" and keys["2025/second.txt"] == "present"
    assert keys["2024/café/naïve résumé.pdf"] == "deleted"


def test_the_same_scenario_with_the_central_accounts_own_credentials_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN the pipeline and its functions without the bucket's read role (no READ_ROLES)
    from s3ingest.local.rehearsal.scenario import run_scenario
    from s3ingest.local.stack.provisioning import Resources

    monkeypatch.setattr(Resources, "read_roles", property(lambda self: {}))
    # WHEN the scenario runs THEN its first read of the bucket is refused, as S3 refuses it
    with pytest.raises(ClientError) as refused:
        run_scenario(Path("examples/scenarios/remote-kms-bucket.jsonl"))
    assert refused.value.response["Error"]["Code"] == "AccessDenied"


@pytest.mark.contract("C13", "C15")
@pytest.mark.parametrize("engine", ["distributed-map", "batch-operations"])
def test_a_remote_bucket_backfills_on_each_engine_reconciles_from_inventory_and_replays(
    emulator: Any, engine: str
) -> None:
    # GIVEN a remote bucket (the producer's) with objects from before the pipeline, and a
    # processor holding mass deletes
    from s3ingest.local.emulator.chaos import Chaos
    from s3ingest.local.stack.runtime import LocalRuntime, local_settings
    from s3ingest.settings import BucketSpec

    name = f"producer-{uuid.uuid4().hex[:12]}"
    spec = BucketSpec(name=name, existing=True, account=PRODUCER)
    rt = LocalRuntime(emulator, local_settings(), buckets=[spec])
    for i in range(5):
        rt.faithful.put(f"old/{i}.txt", f"old {i}")
    rt.faithful.take_pending()
    # WHEN the inventory backfill runs on the engine (its functions read through the role)
    report = rt.backfill(engine=engine)
    assert report["execution"]["status"] == "SUCCEEDED", report
    # AND live traffic is delivered, then the archive replayed: every event comes again
    for i in range(4):
        rt.faithful.put(f"in/{i}.txt", f"v1 {i}")
    rt.faithful.delete("old/0.txt")
    rt.flush(Chaos(seed=2, duplicate=0.3))
    rt.drain()
    before = len(rt.delivered)
    rt.replay()
    again = [d.result.outcome.value for d in rt.delivered[before:]]
    # AND an inventory reconciliation runs
    rt.faithful.put("in/late.txt", "late")
    rt.flush(Chaos(seed=3, drop=1.0))
    rt.reconcile("inventory")
    # THEN the ledger equals the bucket with every effect run and nothing dead-lettered
    comparison = rt.compare()
    assert comparison.converged, comparison.differences
    assert rt.check_effects() == []
    assert rt.dlq_messages() == []
    assert len(again) >= 5 and set(again) <= {"duplicate", "stale"}  # replayed: no-ops
    keys = {r.key: r.present for r in rt.ledger_rows()}
    assert keys["old/1.txt"] and keys["in/late.txt"] and not keys["old/0.txt"]


def test_onboarding_a_remote_bucket_with_delivery_off_leaves_it_to_its_source_stack(
    emulator: Any,
) -> None:
    # GIVEN a remote bucket whose owner switched EventBridge delivery off
    from s3ingest.local.stack.runtime import LocalRuntime, local_settings
    from s3ingest.settings import BucketSpec

    name = f"producer-{uuid.uuid4().hex[:12]}"
    rt = LocalRuntime(
        emulator, local_settings(), buckets=[BucketSpec(name=name, existing=True, account=PRODUCER)]
    )
    owner = emulator.account_client("s3", PRODUCER)
    owner.put_bucket_notification_configuration(Bucket=name, NotificationConfiguration={})
    rt.faithful.refresh_notification()
    # WHEN the central account onboards it THEN nothing is changed: only its source stack may
    report = rt.onboard(name)
    assert report["status"] == "declined" and "source stack" in report["reason"]
    assert ROLE in report["reason"]
    assert (
        owner.get_bucket_notification_configuration(Bucket=name).get("EventBridgeConfiguration")
        is None
    )


def test_the_operators_commands_read_a_remote_bucket_through_its_role(
    emulator: Any, remote_bucket: tuple[str, Any]
) -> None:
    # GIVEN a deployed stack whose outputs name the remote bucket's read role
    from s3ingest.commands.context import Deployed
    from s3ingest.deployed import DeployedStack

    name, _ = remote_bucket

    class Session:  # the operator's boto3 session, on the emulator
        region_name = REGION

        def client(self, service: str) -> Any:
            return emulator.client(service)

    outputs = {"RemoteReadRoleArns": json.dumps({name: ROLE})}
    deployed = Deployed(session=Session(), stack=DeployedStack(name="S", outputs=outputs))
    # THEN the commands' bucket adapter reads it (explain, repair, onboard, reconcile)
    state = deployed.objects().current(name, "in/a.txt")
    assert state is not None and state.visible and state.size == len(b"remote bytes")
    assert deployed.stack.read_roles == {name: ROLE}
