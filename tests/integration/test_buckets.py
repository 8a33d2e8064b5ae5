"""The local runtime over several buckets: provisioning (created and existing buckets, another
team's configuration), S3's EventBridge delivery as the bucket's configuration says, the
oracle's scope check, scenario parsing of ``buckets``, and the requests counter."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from s3ingest.local.emulator.requests import request_kind
from s3ingest.local.emulator.server import Emulator
from s3ingest.local.rehearsal.scenario import ScenarioError, parse_lines
from s3ingest.local.stack.oracles import Oracles
from s3ingest.local.stack.provisioning import FOREIGN_INVENTORY_ID, FOREIGN_QUEUE_ID, LocalBucket
from s3ingest.local.stack.runtime import LocalRuntime, describe_bucket, local_settings
from s3ingest.settings import INVENTORY_ID, BucketSpec
from s3ingest_fn import wiring
from s3ingest_fn.core.scope import Scope


def _runtime(emulator: Emulator, *buckets: LocalBucket) -> LocalRuntime:
    return LocalRuntime(emulator, local_settings(), buckets=list(buckets))


def test_created_and_existing_buckets_are_provisioned_as_on_aws(emulator: Emulator) -> None:
    # GIVEN a created bucket and an existing one with another team's configurations
    rt = _runtime(
        emulator,
        LocalBucket(BucketSpec()),
        LocalBucket(
            BucketSpec(name="h4-existing-prov", existing=True, prefixes=("in/",)),
            versioning=None,
            foreign_config=True,
        ),
    )
    with rt:
        created, existing = rt.resources.bucket_names
        config = rt.bucket_config()
    # THEN the created bucket sends its events to EventBridge, the existing one does not yet
    assert existing == "h4-existing-prov" and rt.resources.bucket == created
    assert config[created]["notification"] == {"EventBridgeConfiguration": {}}
    assert "EventBridgeConfiguration" not in config[existing]["notification"]
    # and the existing bucket holds the other team's queue and inventory beside the stack's own
    (queue,) = config[existing]["notification"]["QueueConfigurations"]
    assert queue["Id"] == FOREIGN_QUEUE_ID
    assert [c["Id"] for c in config[existing]["inventory"]] == [
        FOREIGN_INVENTORY_ID,
        INVENTORY_ID,
    ]
    assert [c["Id"] for c in config[created]["inventory"]] == [INVENTORY_ID]
    # and the functions get the scope of both buckets, filters included
    scope = Scope.from_env(rt.settings_env())
    assert scope.names == (created, existing)
    assert scope.contains(existing, "in/a") and not scope.contains(existing, "out/a")
    assert json.loads(rt.settings_env()["INVENTORIES"])[1]["name"] == existing


def test_an_existing_bucket_emits_no_event_until_event_bridge_delivery_is_on(
    emulator: Emulator,
) -> None:
    # GIVEN an existing bucket (EventBridge delivery off) beside a created one
    rt = _runtime(
        emulator,
        LocalBucket(BucketSpec()),
        LocalBucket(BucketSpec(name="h4-existing-events", existing=True)),
    )
    with rt:
        old = rt.bucket("h4-existing-events")
        # WHEN objects are written to both
        before = old.put("before", "1")
        rt.faithful.put("live", "1")
        # THEN only the created bucket's event is sent
        assert rt.flush() == 1 and not before.emitted
        # WHEN delivery is switched on (S3's PutBucketNotificationConfiguration)
        rt.s3.put_bucket_notification_configuration(
            Bucket="h4-existing-events",
            NotificationConfiguration={"EventBridgeConfiguration": {}},
        )
        # THEN the cached configuration still says off until refreshed, then events flow
        assert not old.put("cached", "2").emitted
        old.refresh_notification()
        assert old.put("after", "3").emitted
        assert rt.flush() == 1
        rt.drain()
        rows = {(r.bucket, r.key) for r in rt.ledger_rows()}
    assert ("h4-existing-events", "after") in rows
    assert ("h4-existing-events", "before") not in rows


def test_the_oracle_flags_ledger_rows_out_of_scope(emulator: Emulator) -> None:
    # GIVEN a ledger holding keys of one bucket
    with _runtime(emulator, LocalBucket(BucketSpec())) as rt:
        rt.faithful.put("in/a.csv", "1")
        rt.faithful.put("out/b.csv", "2")
        rt.flush()
        rt.drain()
        assert rt.compare().converged
        # WHEN the same ledger is judged against a scope with a prefix filter
        landing = dataclasses.replace(rt.resources.buckets[0], prefixes=("in/",))
        oracles = Oracles(
            s3=rt.s3,
            sqs=rt.sqs,
            scanner=wiring.ledger_scanner(rt.ddb, rt.resources.table),
            resources=dataclasses.replace(rt.resources, buckets=(landing,)),
            processor=None,
        )
        comparison = oracles.compare()
    # THEN the out-of-scope row is a difference, and the out-of-scope object is not expected
    assert not comparison.converged
    assert comparison.differences == [
        f"out of scope in ledger (key-filter): {landing.name}/'out/b.csv'"
    ]
    assert [o["key"] for o in comparison.bucket] == ["in/a.csv"]


def test_runtime_refuses_an_unknown_bucket(emulator: Emulator) -> None:
    with _runtime(emulator, LocalBucket(BucketSpec())) as rt, pytest.raises(KeyError):
        rt.bucket("h4-no-such-bucket")


def test_describe_bucket_answers_without_response_metadata(emulator: Emulator) -> None:
    with _runtime(emulator, LocalBucket(BucketSpec())) as rt:
        described = describe_bucket(rt.s3, rt.resources.bucket)
    assert set(described) == {"notification", "inventory"}
    assert "ResponseMetadata" not in described["notification"]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"buckets": []}'], "non-empty list"),
        (['{"buckets": [{"versioning": "Enabled"}]}'], "not a valid S3 bucket name"),
        (['{"buckets": [{"name": "b-one", "colour": "red"}]}'], "unknown field colour"),
        (['{"buckets": [{"name": "b-one"}, {"name": "b-one"}]}'], "listed twice"),
        (['{"buckets": [{"name": "b-one", "prefixes": "in/"}]}'], "list of non-empty strings"),
        (['{"buckets": [{"name": "b-one", "existing": "yes"}]}'], "true or false"),
        (
            ['{"buckets": [{"name": "b-one", "existing": true, "account": "12345"}]}'],
            "another AWS account id",
        ),
        (
            ['{"buckets": [{"name": "b-one", "existing": true, "account": "123456789012"}]}'],
            "another AWS account id",
        ),
        (['{"buckets": [{"name": "b-one", "account": "222233334444"}]}'], "existing: true"),
        (['{"buckets": [{"name": "b-one", "kms": "yes"}]}'], "true or false"),
        (['{"buckets": [{"name": "b-one"}], "bucket": "b-two"}'], "not both"),
        (
            [
                '{"buckets": [{"name": "b-one"}]}',
                '{"op": "put", "bucket": "b-9", "key": "k", "body": "x"}',
            ],
            "no bucket 'b-9'",
        ),
        (['{"bucket": "b-one"}', '{"op": "onboard", "bucket": "b-two"}'], "no bucket 'b-two'"),
        (
            [
                '{"buckets": [{"name": "b-one"}, {"name": "b-two", "versioning": null}]}',
                '{"op": "delete", "bucket": "b-two", "key": "k", "version_id": "v1"}',
            ],
            "not versioned",
        ),
        (['{"op": "onboard", "key": "k"}'], "accepts: bucket"),
    ],
)
def test_bad_bucket_lines_are_caught_before_anything_runs(lines: list[str], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_lines(lines)


def test_buckets_setup_is_parsed_with_defaults() -> None:
    setup, steps = parse_lines(
        [
            '{"buckets": [{"name": "b-one"}, {"name": "b-two", "existing": true, '
            '"prefixes": ["in/"]}], "change_stream": false}',
            '{"op": "put", "bucket": "b-two", "key": "in/k", "body": "x"}',
            '{"op": "onboard", "bucket": "b-two"}',
            '{"op": "backfill", "source": "listing", "bucket": "b-two"}',
        ]
    )
    assert setup["buckets"][0] == {
        "name": "b-one",
        "versioning": "Enabled",
        "prefixes": [],
        "suffixes": [],
        "existing": False,
        "foreign_config": False,
        "account": None,
        "kms": False,
    }
    assert setup["buckets"][1]["existing"] is True and setup["change_stream"] is False
    assert [s["op"] for _, s in steps] == ["put", "onboard", "backfill"]


@pytest.mark.parametrize(
    ("environ", "kind"),
    [
        ({"HTTP_X_AMZ_TARGET": "DynamoDB_20120810.PutItem"}, "dynamodb:PutItem"),
        (
            {"REQUEST_METHOD": "GET", "PATH_INFO": "/b", "QUERY_STRING": "versions&prefix=a"},
            "s3:ListObjectVersions",
        ),
        (
            {"REQUEST_METHOD": "GET", "PATH_INFO": "/b", "QUERY_STRING": "list-type=2"},
            "s3:ListObjectsV2",
        ),
        ({"REQUEST_METHOD": "HEAD", "PATH_INFO": "/b/k/x", "QUERY_STRING": ""}, "s3:HeadObject"),
        ({"REQUEST_METHOD": "PUT", "PATH_INFO": "/b/k", "QUERY_STRING": ""}, "s3:PutObject"),
        (
            {"REQUEST_METHOD": "GET", "PATH_INFO": "/b", "QUERY_STRING": "notification"},
            "s3:GetBucketNotificationConfiguration",
        ),
        (
            {"REQUEST_METHOD": "GET", "PATH_INFO": "/b", "QUERY_STRING": "inventory"},
            "s3:ListBucketInventoryConfigurations",
        ),
    ],
)
def test_requests_are_counted_by_kind(environ: dict[str, Any], kind: str) -> None:
    service = "dynamodb" if "HTTP_X_AMZ_TARGET" in environ else "s3"
    if "invocations" in environ.get("PATH_INFO", ""):
        service = "lambda"
    signed = {
        **environ,
        "HTTP_AUTHORIZATION": "AWS4-HMAC-SHA256 Credential=testing/20261201/us-east-1/"
        f"{service}/aws4_request, SignedHeaders=host, Signature=0",
    }
    assert request_kind(signed) == kind


def test_the_emulator_counts_the_requests_it_answers(emulator: Emulator) -> None:
    s3 = emulator.client("s3")
    s3.create_bucket(Bucket="h4-counted")
    before = emulator.request_counts()
    s3.put_object(Bucket="h4-counted", Key="a b", Body=b"1")
    s3.head_object(Bucket="h4-counted", Key="a b")
    s3.list_object_versions(Bucket="h4-counted")
    after = emulator.request_counts()
    after.subtract(before)
    assert +after == {"s3:PutObject": 1, "s3:HeadObject": 1, "s3:ListObjectVersions": 1}


def test_example_two_bucket_scenario_keeps_out_of_scope_keys_out_of_the_ledger() -> None:
    """Done-when check of issue 15: two buckets, a prefix (and suffix) filter, converged, no
    out-of-scope key in the ledger (the oracle fails on one)."""
    from s3ingest.local.rehearsal.scenario import run_scenario

    result = run_scenario(Path("examples/scenarios/two-buckets.jsonl"))
    assert result["error"] is None
    assert result["converged"] is True, result["differences"]
    assert result["effects_problems"] == []
    ledger = {(r["bucket"], r["key"]): r["state"] for r in result["ledger"]}
    assert ledger == {
        ("landing-filtered", "in/a b.csv"): "present",
        ("landing-filtered", "in/c+d.csv"): "present",
        ("landing-main", "report one.txt"): "deleted",
    }
    # reconciliation queued no repair for out-of-scope keys; the hand-delivered out-of-scope
    # event was ignored, never applied
    (filtered,) = [r for r in result["reconciliations"] if r["bucket"] == "landing-filtered"]
    assert filtered["repairs_queued"] == 1 and filtered["drift"]["missing"] == 1
    (last,) = [m for m in result["messages"] if m["key"].startswith("out/")]
    assert (last["outcome"], last["reason"], last["delivered_at"]) == (
        "ignored",
        "out-of-scope",
        18,
    )


def test_each_listing_backfill_step_lists_the_bucket_again(tmp_path: Path) -> None:
    """A second ``backfill`` with ``"source": "listing"`` is a new run: objects put between the
    two (no events: delivery is off on the existing bucket) come in with it."""
    from s3ingest.local.rehearsal.scenario import run_scenario

    scenario = tmp_path / "twice.jsonl"
    scenario.write_text(
        "\n".join(
            [
                '{"buckets": [{"name": "twice-bucket", "existing": true}]}',
                '{"op": "put", "key": "a.txt", "body": "1"}',
                '{"op": "backfill", "source": "listing"}',
                '{"op": "put", "key": "b.txt", "body": "2"}',
                '{"op": "put", "key": "c.txt", "body": "3"}',
                '{"op": "backfill", "source": "listing"}',
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    result = run_scenario(scenario)
    assert result["error"] is None
    assert result["converged"] is True, result["differences"]
    assert sorted(r["key"] for r in result["ledger"]) == ["a.txt", "b.txt", "c.txt"]
    first, second = result["backfills"]
    assert first["run"] != second["run"]
    assert second["counts"]["listed"] == 3


def test_a_scenario_leaves_no_bucket_for_the_next_one_of_the_process(emulator: Emulator) -> None:
    """moto keeps one state per process: the two-bucket example after the bucket-owners
    example (both name ``landing-main``) found the first one's ``report.csv`` in its bucket and
    its reconciliation put it in the ledger. A scenario removes the buckets it made."""
    from s3ingest.local.rehearsal.scenario import run_scenario

    named = {"landing-main", "producer-drop", "landing-filtered"}
    first = run_scenario(Path("examples/scenarios/bucket-owners.jsonl"), emulator=emulator)
    assert first["error"] is None
    assert not named & set(emulator.bucket_owners())
    second = run_scenario(Path("examples/scenarios/two-buckets.jsonl"))
    assert ("landing-main", "report.csv") not in {(r["bucket"], r["key"]) for r in second["ledger"]}
    assert not named & set(emulator.bucket_owners())


def test_the_stack_does_not_take_over_a_bucket_of_its_landing_name(emulator: Emulator) -> None:
    """A landing bucket the stack creates whose name exists fails, as CloudFormation's
    ``AWS::S3::Bucket`` does; onboarding it is ``existing``."""
    from s3ingest.local.stack.provisioning import provision

    emulator.client("s3").create_bucket(Bucket="taken-landing")
    try:
        with pytest.raises(ValueError, match=r"taken-landing already exists.*existing"):
            provision(emulator, local_settings(), buckets=[BucketSpec(name="taken-landing")])
    finally:
        emulator.remove_bucket("taken-landing")
    assert "taken-landing" not in emulator.bucket_owners()
