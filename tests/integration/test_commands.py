"""The CLI's command functions (``s3ingest.commands``) over their clients, and the ``--stack``
commands end to end: the real session of ``commands.context.connect`` pointed at the emulator
(``AWS_ENDPOINT_URL``), with the stack's outputs naming the local runtime's resources."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from s3ingest import deployed
from s3ingest.cli import app
from s3ingest.cli.render import to_json
from s3ingest.commands import backfill, reconcile
from s3ingest.commands.context import AwsOptions, Deployed, connect
from s3ingest.commands.explain import explain, explain_key
from s3ingest.commands.redrive import redrive
from s3ingest.local.stack.provisioning import LocalBucket
from s3ingest.local.stack.runtime import LocalRuntime
from s3ingest.settings import BucketSpec
from s3ingest_fn.effect_targets import hold_names


def _stack(monkeypatch: pytest.MonkeyPatch, rt: LocalRuntime, **extra: str) -> dict[str, str]:
    """DeployedStack.load answers with outputs naming ``rt``'s resources (and ``extra``);
    returns the environment that points the CLI's session at the emulator."""
    outputs = {
        "BucketName": rt.resources.bucket,
        "LedgerTableName": rt.resources.table,
        "QueueUrl": rt.resources.queue_url,
        "DeadLetterQueueUrl": rt.resources.dlq_url,
        "BucketScope": rt.scope.to_json(),
        **extra,
        "HoldProcessors": json.dumps(hold_names(rt.settings.processor_entries(), rt.settings.hold)),
    }
    monkeypatch.setattr(
        deployed.DeployedStack,
        "load",
        staticmethod(lambda cfn, name: deployed.DeployedStack(name=name, outputs=outputs)),
    )
    return {**rt.emu.function_environment(), "S3INGEST_STACK": "S3Ingest-test"}


def test_connect_builds_clients_once_and_adapters_from_the_outputs(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = LocalRuntime(emulator, versioning="Enabled")
    for name, value in _stack(monkeypatch, rt).items():
        monkeypatch.setenv(name, value)
    rt.faithful.put("k", "1")
    rt.flush()
    rt.drain()
    stack = connect(AwsOptions(), "S3Ingest-test")
    assert stack.name == "S3Ingest-test"
    assert stack.client("sqs") is stack.client("sqs")
    row = stack.ledger().get(rt.resources.bucket, "k")
    assert row is not None and row == rt.ledger.get(rt.resources.bucket, "k")
    assert stack.objects().current(rt.resources.bucket, "k").visible
    with pytest.raises(deployed.StackNotFoundError, match="ArchiveArn"):
        stack.require("ArchiveArn")
    # --region wins over the environment's region
    other = connect(AwsOptions(region="eu-west-1"), "S3Ingest-test")
    assert other.client("sqs").meta.region_name == "eu-west-1"


def test_explain_key_reads_the_row_and_the_bucket_through_the_cli(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = LocalRuntime(emulator, versioning="Enabled")
    rt.faithful.put("a b", "1")
    rt.flush()
    rt.drain()
    bucket = rt.resources.bucket
    expected = json.loads(
        to_json(explain(rt.ledger.get(bucket, "a b"), rt.objects.current(bucket, "a b")))
    )
    assert json.loads(to_json(explain_key(rt.ledger, rt.objects, bucket, "a b"))) == expected
    env = _stack(monkeypatch, rt)
    result = CliRunner().invoke(app, ["explain", bucket, "a b", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == expected
    assert expected["ledger"]["state"] == "present" and expected["agrees"] is True
    table = CliRunner().invoke(app, ["explain", bucket, "a b"], env={**env, "COLUMNS": "200"})
    assert table.exit_code == 0 and expected["verdict"] in table.stdout


def test_explain_of_a_bucket_the_pipeline_does_not_watch_says_so(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a stack, its outputs with the buckets and their filters, and one without them
    rt = LocalRuntime(emulator, versioning="Enabled")
    env = _stack(monkeypatch, rt)
    # WHEN explain is asked about a key of a bucket that is not the stack's
    result = CliRunner().invoke(app, ["explain", "no-such-bucket", "k", "--json"], env=env)
    # THEN it says the bucket is not one the pipeline watches, exit code 3 (as repair's and
    # onboard's for a bucket not the stack's), not that the ledger agrees
    said = " ".join(result.output.split())
    assert result.exit_code == 3, result.output
    assert "'no-such-bucket' is not one the pipeline watches" in said
    assert rt.resources.bucket in said and "agrees" not in said
    # AND so does the scenario's explain, over the same operation
    with pytest.raises(deployed.StackNotFoundError, match="not one the pipeline watches"):
        explain_key(rt.ledger, rt.objects, "no-such-bucket", "k", (), rt.scope)


def test_explain_of_a_key_outside_the_key_filters_says_it_is_not_tracked(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a bucket that tracks keys under in/ ending .csv, and a key outside them
    spec = BucketSpec(prefixes=("in/",), suffixes=(".csv",))
    rt = LocalRuntime(emulator, versioning="Enabled", buckets=[LocalBucket(spec)])
    bucket = rt.resources.bucket
    rt.faithful.put("out/a.csv", "1")
    rt.faithful.put("in/b.csv", "1")
    rt.flush()
    rt.drain()
    env = {**_stack(monkeypatch, rt), "COLUMNS": "200"}
    # WHEN explain is asked about it
    result = CliRunner().invoke(app, ["explain", bucket, "out/a.csv", "--json"], env=env)
    text = CliRunner().invoke(app, ["explain", bucket, "out/a.csv"], env=env)
    # THEN it says the key is outside the filters and untracked, not an event lost or in flight
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["tracked"] is False and doc["ledger"]["state"] == "absent"
    assert doc["verdict"].startswith(
        "the key is outside the bucket's key filters (prefixes 'in/' and suffixes '.csv'): "
        "the pipeline does not track it"
    )
    assert "in flight" not in text.stdout and "outside the bucket's key filters" in text.stdout
    # AND a key inside them is tracked, with the verdict as before
    inside = json.loads(
        CliRunner().invoke(app, ["explain", bucket, "in/b.csv", "--json"], env=env).stdout
    )
    assert (inside["tracked"], inside["verdict"]) == (True, "ledger agrees with the bucket")


def test_replay_dry_run_does_not_give_the_archive_s_count_as_the_window_s(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an archive of two events, written now
    rt = LocalRuntime(emulator, versioning="Enabled")
    for key in ("a", "b"):
        rt.faithful.put(key, "1")
    rt.flush()
    rt.drain()
    archive = rt.events.describe_archive(ArchiveName=rt.resources.archive)
    rule = rt.events.describe_rule(Name=rt.resources.rule)["Arn"]
    env = {
        **_stack(monkeypatch, rt, ArchiveArn=archive["ArchiveArn"], RuleArn=rule),
        "COLUMNS": "200",
    }
    # WHEN replay --dry-run is asked about a window of a year ago (none of them in it)
    window = ["--from", "2025-01-01T00:00:00Z", "--to", "2025-01-01T01:00:00Z", "--dry-run"]
    doc = json.loads(CliRunner().invoke(app, ["replay", *window, "--json"], env=env).stdout)
    text = CliRunner().invoke(app, ["replay", *window], env=env)
    # THEN the window's count is said to be unknown, the archive's labelled as the whole one's
    assert text.exit_code == 0, text.output
    total = archive.get("EventCount")
    assert total == 2
    assert doc["window_event_count"] is None and doc["archive_event_count"] == total
    assert "not known before a replay" in doc["note"]
    assert "events in the window: not known before a replay" in text.stdout
    assert f"events in the whole archive (every window): {total}" in text.stdout
    assert "archive_event_count: " not in text.stdout


def _dead_letters(rt: LocalRuntime) -> None:
    """An invalid message dead-lettered by the handler and a valid one whose retries ran out
    (sent straight to the DLQ, as SQS would after maxReceiveCount)."""
    rt.send_raw("{not json")
    rt.drain()
    rt.faithful.put("retry me", "1")
    (event,) = rt.faithful.take_pending()
    rt.sqs.send_message(QueueUrl=rt.resources.dlq_url, MessageBody=json.dumps(event))


def test_redrive_moves_the_valid_messages_and_keeps_the_invalid_ones(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a DLQ with an invalid and a valid message
    rt = LocalRuntime(emulator, versioning="Enabled")
    _dead_letters(rt)
    # WHEN it is redriven without --include-invalid (one command: classify, then move)
    result = CliRunner().invoke(app, ["redrive", "--json"], env=_stack(monkeypatch, rt))
    rt.drain()
    # THEN both were classified, the valid one moved and was ingested, the invalid one stays
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["dlq"]["by_reason"] == {"malformed-json": 1, "retries-exhausted": 1}
    assert doc["moved"] == {"moved": 1, "kept_invalid": 1}
    assert "task" not in doc
    assert rt.compare().converged
    assert [m["reason"] for m in rt.dead_letters()] == ["malformed-json"]


def test_redrive_dry_run_classifies_and_moves_nothing(emulator: Any) -> None:
    rt = LocalRuntime(emulator, versioning="Enabled")
    _dead_letters(rt)
    result = redrive(
        rt.sqs,
        rt.resources.dlq_url,
        rt.resources.queue_url,
        dry_run=True,
        max_messages=10,
        include_invalid=True,
    )
    assert set(result) == {"dlq"}
    assert result["dlq"]["by_kind"] == {"invalid:malformed-json": 1, "created": 1}
    attrs = rt.sqs.get_queue_attributes(
        QueueUrl=rt.resources.dlq_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert sum(int(v) for v in attrs.values()) == 2  # still in the DLQ (peeked, visible again)
    assert rt.compare().converged is False  # "retry me" never reached the ledger


def test_redrive_right_after_a_dry_run_finds_the_messages(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a DLQ with an invalid and a valid message
    rt = LocalRuntime(emulator, versioning="Enabled")
    _dead_letters(rt)
    env = _stack(monkeypatch, rt)
    # WHEN redrive --dry-run peeks, and redrive runs right after
    dry = CliRunner().invoke(app, ["redrive", "--dry-run", "--json"], env=env)
    assert dry.exit_code == 0, dry.output
    visible = rt.sqs.get_queue_attributes(
        QueueUrl=rt.resources.dlq_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]["ApproximateNumberOfMessages"]
    result = CliRunner().invoke(app, ["redrive", "--json"], env=env)
    rt.drain()
    # THEN the peek left both visible, and the redrive classified both and moved the valid one
    assert int(visible) == 2
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["dlq"]["approximate"] == 2 and doc["dlq"]["sampled"] == 2
    assert doc["moved"] == {"moved": 1, "kept_invalid": 1}
    assert rt.compare().converged


def test_follow_backfill_reads_until_the_execution_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    states = iter(["RUNNING", "RUNNING", "SUCCEEDED"])
    monkeypatch.setattr(
        backfill, "backfill_status", lambda sfn, s3control, arn: {"status": next(states)}
    )
    seen: list[str] = []
    slept: list[float] = []
    status = backfill.follow_backfill(
        None,
        None,
        "arn:x",
        watch=True,
        on_status=lambda s: seen.append(s["status"]),
        sleep=slept.append,
    )
    assert status == {"status": "SUCCEEDED"}
    assert seen == ["RUNNING", "RUNNING", "SUCCEEDED"]
    assert slept == [backfill.POLL_SECONDS] * 2
    states = iter(["RUNNING", "SUCCEEDED"])
    assert backfill.follow_backfill(None, None, "arn:x", watch=False, sleep=slept.append) == {
        "status": "RUNNING"
    }


def test_reconcile_passes_the_request_and_the_progress() -> None:
    class Recorder:
        def run(self, request: Any, on_rows: Any) -> Any:
            self.request, self.on_rows = request, on_rows
            return type("Report", (), {"as_dict": lambda _self: {"drift": {}}})()

    rec = Recorder()

    def progress(phase: str, n: int) -> None:
        pass

    report = reconcile.reconcile(
        rec,
        source="listing",
        prefix="p/",
        dry_run=True,
        manifest=None,
        margin_seconds=5,
        on_rows=progress,
    )
    assert report == {"drift": {}}
    assert (rec.request.source, rec.request.prefix, rec.request.dry_run) == ("listing", "p/", True)
    assert (rec.request.manifest_key, rec.request.margin_ms) == (None, 5000)
    assert rec.on_rows is progress
    reconcile.reconcile(
        rec, source="inventory", prefix="", dry_run=False, manifest="m.json", margin_seconds=None
    )
    assert (rec.request.manifest_key, rec.request.margin_ms) == ("m.json", None)


def test_deployed_is_buildable_without_cloudformation() -> None:
    made: list[str] = []

    class Session:
        def client(self, service: str) -> str:
            made.append(service)
            return f"client:{service}"

    stack = Deployed(Session(), deployed.DeployedStack(name="S", outputs={"QueueUrl": "q"}))
    assert stack.client("sqs") == stack.client("sqs") == "client:sqs"
    assert made == ["sqs"]
    assert stack.require("QueueUrl") == ["q"]
    with pytest.raises(deployed.StackNotFoundError):
        stack.ledger()
