"""``s3ingest held``, ``approve``, ``reject`` and ``explain``'s trail end to end against the
emulator (``docs/hold.md``): the CLI's own session, the stack's outputs naming a local
runtime's resources, the real review writes, and the ingest path running what an approval
released."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.local.stack.runtime import LocalRuntime, local_settings
from tests.integration.test_commands import _stack


def _held_deletes(emulator: Any, keys: list[str]) -> LocalRuntime:
    """A runtime whose example processor holds every delete, with ``keys`` put then deleted."""
    rt = LocalRuntime(emulator, local_settings(hold={"deletes": True}), versioning="Enabled")
    for key in keys:
        rt.faithful.put(key, f"body of {key}")
    rt.flush()
    rt.drain()
    for key in keys:
        rt.faithful.delete(key)
    rt.flush()
    rt.drain()
    return rt


def _sidecars(rt: LocalRuntime) -> set[str]:
    out = rt.resources.output_bucket
    assert out is not None
    listed = rt.s3.list_objects_v2(Bucket=out).get("Contents", [])
    return {
        json.loads(rt.s3.get_object(Bucket=out, Key=o["Key"])["Body"].read())["key"] for o in listed
    }


def test_held_lists_approve_runs_and_reject_never_runs(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN three deletes held (their sidecars are still there: no delete effect ran)
    keys = ["a b.csv", "in/c+d.csv", "in/e.csv"]
    rt = _held_deletes(emulator, keys)
    bucket = rt.resources.bucket
    assert _sidecars(rt) == set(keys)
    env = {**_stack(monkeypatch, rt), "COLUMNS": "200"}
    cli = CliRunner()

    # WHEN the operator lists them
    listed = cli.invoke(app, ["held", "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    page = json.loads(listed.stdout)
    assert sorted(h["key"] for h in page["held"]) == sorted(keys)
    assert {(h["processor"], h["kind"], h["reason"]) for h in page["held"]} == {
        ("default", "removed", "delete")
    }
    under = cli.invoke(app, ["held", "--bucket", bucket, "--prefix", "in/", "--json"], env=env)
    assert sorted(h["key"] for h in json.loads(under.stdout)["held"]) == ["in/c+d.csv", "in/e.csv"]
    assert cli.invoke(app, ["held", "--prefix", "in/"], env=env).exit_code == 2  # needs --bucket

    # ... approves one: its delete effect runs once the repair it queued is delivered
    approved = cli.invoke(app, ["approve", bucket, "a b.csv", "--json"], env=env)
    assert approved.exit_code == 0, approved.output
    doc = json.loads(approved.stdout)
    assert [(d["key"], d["applied"]) for d in doc["decided"]] == [("a b.csv", True)]
    actor = doc["actor"]
    assert actor.startswith("arn:aws:")
    rt.drain()
    assert _sidecars(rt) == {"in/c+d.csv", "in/e.csv"}

    # ... previews a bulk rejection, is refused without --yes, then rejects with it
    preview = cli.invoke(
        app,
        ["reject", "--bucket", bucket, "--all-matching", "in/", "--dry-run", "--json"],
        env=env,
    )
    assert sorted(h["key"] for h in json.loads(preview.stdout)["matched"]) == [
        "in/c+d.csv",
        "in/e.csv",
    ]
    refused = cli.invoke(app, ["reject", "--bucket", bucket, "--all-matching", "in/"], env=env)
    assert refused.exit_code == 2 and "--yes" in refused.output
    rejected = cli.invoke(
        app, ["reject", "--bucket", bucket, "--all-matching", "in/", "--yes", "--json"], env=env
    )
    assert rejected.exit_code == 0, rejected.output
    assert [d["applied"] for d in json.loads(rejected.stdout)["decided"]] == [True, True]
    rt.drain()

    # THEN the rejected deletes never ran (their sidecars stay), nothing is held, and explain
    # shows the trail with the approver
    assert _sidecars(rt) == {"in/c+d.csv", "in/e.csv"}
    assert json.loads(cli.invoke(app, ["held", "--json"], env=env).stdout)["held"] == []
    explained = json.loads(
        cli.invoke(app, ["explain", bucket, "a b.csv", "--json"], env=env).stdout
    )
    reviews = [(t["kind"], t["actor"]) for t in explained["trail"] if t["kind"] != "applied"]
    assert reviews == [("approved", actor), ("held", "policy")]
    assert explained["effects"]["default"]["status"] == "done"
    text = cli.invoke(app, ["explain", bucket, "in/e.csv"], env=env)
    assert text.exit_code == 0 and "rejected" in text.stdout
    # ... and deciding again finds nothing held
    again = cli.invoke(app, ["approve", bucket, "a b.csv"], env=env)
    assert again.exit_code == 0 and "nothing held matches" in again.stdout


def test_held_says_when_no_hold_policy_is_configured(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a stack whose example processor has no hold policy, and one whose has
    plain = LocalRuntime(emulator, versioning="Enabled")
    env = {**_stack(monkeypatch, plain), "COLUMNS": "200"}
    # WHEN held lists the first's
    text = CliRunner().invoke(app, ["held"], env=env)
    doc = json.loads(CliRunner().invoke(app, ["held", "--json"], env=env).stdout)
    # THEN it says none is configured, in words and in an explicit field (the keys kept)
    assert text.exit_code == 0, text.output
    assert "no hold policy is configured" in text.stdout
    assert doc == {"held": [], "next": None, "hold_configured": False, "hold_processors": []}
    # AND the second's says it is, with no such words
    holding = _held_deletes(emulator, ["k"])
    env = {**_stack(monkeypatch, holding), "COLUMNS": "200"}
    doc = json.loads(CliRunner().invoke(app, ["held", "--json"], env=env).stdout)
    assert (doc["hold_configured"], doc["hold_processors"], len(doc["held"])) == (
        True,
        ["default"],
        1,
    )
    assert "no hold policy" not in CliRunner().invoke(app, ["held"], env=env).stdout


def test_review_commands_explain_their_usage(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = LocalRuntime(emulator, versioning="Enabled")
    env = _stack(monkeypatch, rt)
    for args in (
        ["approve"],
        ["approve", "b"],
        ["reject", "b", "k", "--all-matching", "x"],
        ["approve", "b", "k", "--bucket", "b"],
    ):
        result = CliRunner().invoke(app, args, env=env)
        assert result.exit_code == 2 and "BUCKET KEY" in result.output, args
    # held's own arguments are checked before any AWS call (no stack is reachable here)
    for args, message in (
        (["held", "--stack", "nowhere", "--prefix", "p"], "--prefix needs --bucket"),
        (["held", "--stack", "nowhere", "--after", "garbage"], "not a token"),
    ):
        result = CliRunner().invoke(app, args, env={"AWS_ENDPOINT_URL": "http://127.0.0.1:9"})
        assert result.exit_code == 2 and message in result.output, args
