"""A hold policy's answers (``docs/hold.md``): the built-in rules, and a team's policy function
whose failure or unknown answer is retried, never taken as ``run`` (CONTRACT C9)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from s3ingest_fn.core.hold import HOLD, RUN, SKIP, HoldPolicy
from s3ingest_fn.core.model import TransientError
from tests.fakes import FakeLedger


@dataclass(frozen=True)
class _Change:
    key: str
    kind: str
    change_id: str = "c1"


def _raises(change: Any) -> Any:
    raise RuntimeError("catalog down")


def _garbage(change: Any) -> Any:
    return 42


@pytest.mark.contract("C9")
@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (_raises, "hold-policy-failed: team.pol:fn: RuntimeError: catalog down"),
        (_garbage, "hold-policy-invalid-answer: team.pol:fn answered 42"),
    ],
)
def test_a_failing_or_unknown_policy_answer_is_retried(policy: Any, message: str) -> None:
    hold = HoldPolicy(policy=policy, policy_name="team.pol:fn")
    with pytest.raises(TransientError, match=message):
        hold.decide(_Change("a.pdf", "created"), FakeLedger(), 0, "mirror")


def test_the_rules_answer_in_order_prefixes_deletes_policy() -> None:
    ledger = FakeLedger()
    policy = HoldPolicy(
        deletes=True,
        prefixes=("published/",),
        policy=lambda c: {"action": "skip"} if c.key.endswith(".tmp") else "run",
        policy_name="team.pol:fn",
    )
    assert policy.decide(_Change("published/x", "created"), ledger, 0, "p").action == HOLD
    assert policy.decide(_Change("x", "removed"), ledger, 0, "p").reason == "delete"
    assert policy.decide(_Change("x.tmp", "created"), ledger, 0, "p").action == SKIP
    assert policy.decide(_Change("x", "created"), ledger, 0, "p").action == RUN


def test_the_breaker_keeps_a_changes_verdict_when_asked_again() -> None:
    ledger = FakeLedger()
    breaker = HoldPolicy.of({"deletes": {"above": 1, "windowSeconds": 60}})
    first, second = _Change("a", "removed", "c1"), _Change("b", "removed", "c2")
    assert breaker.decide(first, ledger, 0, "p").action == RUN
    assert breaker.decide(second, ledger, 0, "p").action == HOLD
    # asked again, in the same window or a later one: the same verdicts
    assert breaker.decide(first, ledger, 30, "p").action == RUN
    assert breaker.decide(first, ledger, 600, "p").action == RUN
    assert breaker.decide(second, ledger, 30, "p").action == HOLD
