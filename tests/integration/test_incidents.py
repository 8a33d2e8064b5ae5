"""Incident chaos on the local runtime (``s3ingest/local/rehearsal/incidents.py``) and the
rehearsable runbook scenarios of ``examples/incidents/`` (``docs/runbook.md``, "Rehearse it")."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.rehearsal.scenario import ScenarioError, parse_lines, run_scenario
from s3ingest.local.stack.runtime import LocalRuntime, local_settings

ROOT = Path(__file__).resolve().parents[2]
INCIDENTS = sorted((ROOT / "examples" / "incidents").glob("*.jsonl"))
RUNBOOK = ROOT / "docs" / "runbook.md"

#: The command a runbook section names (its "Commands that end it:" line) -> the scenario op
#: that plays it. ``npx cdk deploy`` puts back what a deploy broke (here: the queue policy).
COMMAND_OPS = {
    "s3ingest status": "status",
    "s3ingest explain": "explain",
    "s3ingest redrive": "redrive",
    "s3ingest replay": "replay",
    "s3ingest reconcile": "reconcile",
    "s3ingest backfill": "backfill",
    "s3ingest onboard": "onboard",
    "s3ingest approve": "approve",
    "s3ingest reject": "reject",
    "aws events enable-rule": "enable_rule",
    "npx cdk deploy": "restore_queue_policy",
}
#: Ops that make the world and its incident, not an operator's command (``fail_processor`` off
#: is the team's fix of its processor, the runbook's "fix the cause").
INCIDENT_OPS = {"put", "delete", "flush", "deliver", "disable_rule", "break_queue_policy"}
INCIDENT_OPS |= {"fail_processor"}


def write(tmp_path: Path, lines: list[Any], name: str = "scenario.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def runbook_commands(scenario: Path) -> list[str]:
    """The commands the runbook section that rehearses ``scenario`` names to end it."""
    text = RUNBOOK.read_text(encoding="utf-8")
    sections = [
        s for s in re.split(r"\n(?=## )", text) if f"examples/incidents/{scenario.name}" in s
    ]
    assert len(sections) == 1, f"one runbook section rehearses {scenario.name}"
    match = re.search(r"Commands that end it:(.*?)(?:\n\n|\Z)", sections[0], re.S)
    assert match, f"the section of {scenario.name} names the commands that end it"
    return re.findall(r"`([^`]+)`", match.group(1))


def ops_of(path: Path) -> list[str]:
    _, steps = parse_lines(path.read_text(encoding="utf-8").split("\n"))
    return [step["op"] for _, step in steps]


def test_every_incident_has_a_scenario() -> None:
    names = {p.name for p in INCIDENTS}
    assert {"rule-disabled.jsonl", "dlq-processor-failing.jsonl", "events-lost.jsonl"} <= names


@pytest.mark.contract("C12", "C14", "C15")
@pytest.mark.parametrize("scenario", INCIDENTS, ids=lambda p: p.stem)
def test_an_incident_scenario_converges_with_only_its_runbook_commands(
    scenario: Path, tmp_path: Path
) -> None:
    # GIVEN an incident scenario and the commands its runbook section names
    named = runbook_commands(scenario)
    unknown = [c for c in named if c not in COMMAND_OPS]
    assert not unknown, f"commands with no scenario op (add them to COMMAND_OPS): {unknown}"
    allowed = {COMMAND_OPS[c] for c in named}
    operator_ops = [op for op in ops_of(scenario) if op not in INCIDENT_OPS]
    # THEN it plays those commands and no other
    assert set(operator_ops) == allowed
    # WHEN it runs, it converges with every effect right
    result = run_scenario(scenario)
    assert result["error"] is None
    assert result["converged"], result["differences"]
    assert result["effects_problems"] == []
    assert result["dead_letter_queue"] == []
    # AND without the commands that end it (status and explain only look), it does not
    lines = [
        line
        for line in scenario.read_text(encoding="utf-8").split("\n")
        if not line.startswith("{")
        or json.loads(line).get("op") not in allowed - {"status", "explain"}
    ]
    broken = tmp_path / scenario.name
    broken.write_text("\n".join(lines), encoding="utf-8")
    unended = run_scenario(broken)
    assert not (unended["converged"] and unended["effects_problems"] == [])


@pytest.mark.contract("C14", "C15")
def test_a_replay_after_undelivered_alone_restores_the_ledger(tmp_path: Path) -> None:
    # GIVEN events archived but never delivered (every one of them)
    lines: list[Any] = [
        {"versioning": "Enabled"},
        {"op": "put", "key": "a.txt", "body": "a1"},
        {"op": "put", "key": "b.txt", "body": "b"},
        {"op": "put", "key": "a.txt", "body": "a2"},
        {"op": "delete", "key": "b.txt"},
        {"op": "flush", "chaos": {"seed": 4, "undelivered": 1.0}},
    ]
    before = run_scenario(write(tmp_path, lines, "before.jsonl"))
    assert before["undelivered"] == 4 and before["dropped"] == 0
    assert before["messages"] == [] and before["ledger"] == []
    assert not before["converged"]
    # WHEN the archive is replayed, with no reconciliation
    result = run_scenario(write(tmp_path, [*lines, {"op": "replay"}], "after.jsonl"))
    # THEN the ledger equals the bucket and every effect ran
    assert result["reconciliations"] == [] and result["backfills"] == []
    assert result["converged"], result["differences"]
    assert result["effects_problems"] == []
    assert {m["source"] for m in result["messages"]} == {"replay"}
    assert len(result["messages"]) == 4


def test_undelivered_events_are_in_the_archive_and_the_rule_stays_enabled(emulator: Any) -> None:
    rt = LocalRuntime(emulator, local_settings())
    try:
        for key in ("x/1", "x/2", "x/3"):
            rt.faithful.put(key, "v")
        archive = rt.resources.archive
        archived = rt.events.describe_archive(ArchiveName=archive)["EventCount"]
        assert rt.flush(Chaos(undelivered=1.0)) == 3
        rt.drain()
        assert len(rt.undelivered) == 3 and rt.delivered == []
        assert rt.events.describe_archive(ArchiveName=archive)["EventCount"] == archived + 3
        assert rt.events.describe_rule(Name=rt.resources.rule)["State"] == "ENABLED"
        # a flush without the chaos is delivered again
        rt.faithful.put("x/4", "v")
        rt.flush()
        rt.drain()
        assert [d.result.key for d in rt.delivered] == ["x/4"]
    finally:
        rt.close()


def test_a_flush_while_the_route_is_down_delivers_nothing(emulator: Any) -> None:
    from s3ingest.local.rehearsal.incidents import Incidents

    rt = LocalRuntime(emulator, local_settings())
    incidents = Incidents(rt)
    try:
        for down, up in (
            (incidents.disable_rule, incidents.enable_rule),
            (incidents.break_queue_policy, incidents.restore_queue_policy),
        ):
            down()
            rt.faithful.put("k", "v")
            rt.flush(Chaos(seed=1, duplicate=0.9))  # other chaos does not apply
            rt.drain()
            up()
        assert rt.delivered == [] and len(rt.undelivered) == 2
        rt.replay()
        assert [str(d.result.extra.get("source")) for d in rt.delivered] == ["replay"] * 2
        assert rt.compare().converged
    finally:
        rt.close()


def test_a_partial_undelivered_rate_is_seeded_and_leaves_the_other_draws_alone() -> None:
    items = list(range(200))
    rest, withheld = Chaos(seed=9, undelivered=0.3).split_undelivered(items)
    assert (rest, withheld) == Chaos(seed=9, undelivered=0.3).split_undelivered(items)
    assert 30 < len(withheld) < 90 and sorted(rest + withheld) == items
    assert Chaos(seed=9, drop=0.2).schedule(items) == Chaos(
        seed=9, drop=0.2, undelivered=0.3
    ).schedule(items)
    assert Chaos(seed=9).split_undelivered(items) == (items, [])


def test_queue_policy_deny_is_read_for_eventbridge_only() -> None:
    from s3ingest.local.emulator.moto_delivery import denies_eventbridge

    def policy(effect: str, principal: Any, action: Any) -> str:
        statement = {"Effect": effect, "Principal": principal, "Action": action}
        return json.dumps({"Statement": [statement]})

    assert denies_eventbridge(policy("Deny", {"Service": "events.amazonaws.com"}, "sqs:*"))
    assert denies_eventbridge(policy("Deny", "*", ["sqs:SendMessage"]))
    assert not denies_eventbridge(policy("Allow", {"Service": "events.amazonaws.com"}, "*"))
    assert not denies_eventbridge(policy("Deny", {"Service": "sns.amazonaws.com"}, "*"))
    assert not denies_eventbridge(policy("Deny", "*", "sqs:ReceiveMessage"))
    assert not denies_eventbridge(None) and not denies_eventbridge("")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"op": "fail_processor"}, "needs on"),
        ({"op": "fail_processor", "on": "yes"}, "on must be true or false"),
        ({"op": "redrive", "max": 0}, "redrive max must be"),
        ({"op": "redrive", "include_invalid": 1}, "include_invalid must be true or false"),
        ({"op": "explain"}, "needs key"),
        ({"op": "disable_rule", "rule": "x"}, "takes no rule"),
        ({"op": "flush", "chaos": {"undelivered": 2}}, "undelivered must be within 0..1"),
    ],
)
def test_bad_incident_steps_are_refused_before_anything_runs(
    line: dict[str, Any], message: str
) -> None:
    with pytest.raises(ScenarioError, match=re.escape(message)):
        parse_lines([json.dumps(line)])


def test_the_scenario_command_reports_what_status_explain_and_redrive_answered() -> None:
    # GIVEN the DLQ incident: a processor failing for a window, then a redrive
    scenario = ROOT / "examples" / "incidents" / "dlq-processor-failing.jsonl"
    # WHEN it runs through the CLI, as JSON and as text
    runner = CliRunner()
    as_json = runner.invoke(app, ["local", "scenario", "--json", str(scenario)])
    text = runner.invoke(app, ["local", "scenario", str(scenario)])
    # THEN status saw the DLQ fill and empty, explain the effect pending, redrive moved both
    assert as_json.exit_code == 0, as_json.output
    result = json.loads(as_json.stdout)
    first, last = result["statuses"]
    assert not first["healthy"] and first["dead_letter_queue"]["visible"] == 2
    assert last["healthy"] and last["dead_letter_queue"]["visible"] == 0
    (explained,) = result["explanations"]
    assert explained["key"] == "b.txt" and explained["effects"]["sidecar"]["status"] == "pending"
    (redriven,) = result["redrives"]
    assert redriven["dlq"]["by_reason"] == {"retries-exhausted": 2}
    assert redriven["progress"]["moved"] == 2
    assert text.exit_code == 0, text.output
    assert "status: UNHEALTHY: dead letter queue holds 2 message(s)" in text.output
    assert "effect sidecar: pending" in text.output
    assert "redrive: 2 in the DLQ, 2 moved" in text.output
