"""Delivery incidents and the operator's commands (:mod:`s3ingest.local.rehearsal.incidents`):
``disable_rule``, ``enable_rule``, ``break_queue_policy``, ``restore_queue_policy``,
``fail_processor``, ``fail_function``, ``squat``, ``redrive``, ``status``, ``explain``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from s3ingest.local.rehearsal.steps.base import (
    Run,
    ScenarioError,
    Step,
    check_bool,
    check_key,
    json_name,
)
from s3ingest.settings.buckets import ACCOUNT_RE


@dataclass
class _Switch(Step):
    """An incident switch without fields: the :class:`~s3ingest.local.rehearsal.incidents.Incidents`
    method of the step's name."""

    def run(self, run: Run, lineno: int) -> None:
        getattr(run.incidents, self.op)()


@dataclass
class DisableRule(_Switch):
    """``{"op": "disable_rule"}``: DisableRule on the ingest rule (a flush meanwhile is
    archived, not delivered)."""

    op = "disable_rule"


@dataclass
class EnableRule(_Switch):
    """``{"op": "enable_rule"}``: EnableRule on the ingest rule."""

    op = "enable_rule"


@dataclass
class BreakQueuePolicy(_Switch):
    """``{"op": "break_queue_policy"}``: the ingest queue's policy denies EventBridge."""

    op = "break_queue_policy"


@dataclass
class RestoreQueuePolicy(_Switch):
    """``{"op": "restore_queue_policy"}``: the ingest queue's policy put back."""

    op = "restore_queue_policy"


@dataclass
class FailProcessor(Step):
    """``{"op": "fail_processor", "on": true | false, "processor": N}`` (default every
    processor): each run raises, so messages come back until ``maxReceiveCount`` receives,
    then wait in the DLQ."""

    op = "fail_processor"

    on: bool
    processor: str | None = None

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        check_bool(lineno, cls.op, doc, "on")
        if not isinstance(doc.get("processor", ""), str):
            raise ScenarioError(
                f"line {lineno}: fail_processor processor must be a processor's name"
            )

    def run(self, run: Run, lineno: int) -> None:
        run.incidents.fail_processor(self.on, self.processor)


@dataclass
class FailFunction(Step):
    """``{"op": "fail_function", "function": F, "kind": "raise", "times": N}``: the next ``N``
    invocations of the stack's function ``F`` by its state machines (named as in the stack:
    ``ListingPlan``, ``ListingShard``, ``BackfillFunction``, ``ReprocessSegment``, ...) fail
    without running
    (:meth:`~s3ingest.local.emulator.lambda_service.LambdaService.inject`): ``raise`` (the handler
    raises), ``timeout``, ``throttle`` (``TooManyRequestsException``) or ``service``
    (``ServiceException``); the machines' retries see each one."""

    op = "fail_function"

    function: str
    kind: str = "raise"
    times: int = 1

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        from s3ingest.local.emulator.lambda_service import FAILURE_KINDS

        if not isinstance(doc["function"], str) or not doc["function"]:
            raise ScenarioError(f"line {lineno}: fail_function function must be a function name")
        if doc.get("kind", "raise") not in FAILURE_KINDS:
            raise ScenarioError(
                f"line {lineno}: fail_function kind must be one of {', '.join(FAILURE_KINDS)}"
            )
        times = doc.get("times", 1)
        if not isinstance(times, int) or isinstance(times, bool) or times < 1:
            raise ScenarioError(f"line {lineno}: fail_function times must be at least 1")

    def run(self, run: Run, lineno: int) -> None:
        from s3ingest.local import machines

        for name in machines.NAMES:  # the functions of every machine, as the stack deploys them
            run.rt.machines.register_functions(machines.load(name))
        lambdas = run.rt.machines.lambdas
        if self.function not in lambdas.functions:
            names = ", ".join(sorted(lambdas.functions))
            raise ScenarioError(f"line {lineno}: no function {self.function!r} ({names})")
        lambdas.inject(self.function, self.kind, self.times)


@dataclass
class Squat(Step):
    """``{"op": "squat", "account": A, "bucket": N}``: account ``A`` (12 digits) takes the
    bucket's name; later ``put`` and ``delete`` steps on it are ``A``'s."""

    op = "squat"

    account: str
    bucket: str | None = None

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        if not (isinstance(doc["account"], str) and ACCOUNT_RE.match(doc["account"])):
            raise ScenarioError(
                f"line {lineno}: squat account must be an AWS account id (12 digits)"
            )

    def run(self, run: Run, lineno: int) -> None:
        run.incidents.squat(self.bucket, self.account)


@dataclass
class Redrive(Step):
    """``{"op": "redrive", "max": N, "include_invalid": false}``: ``s3ingest redrive``, then a
    drain."""

    op = "redrive"
    report = "redrives"

    limit: int = field(default=1000, metadata=json_name("max"))
    include_invalid: bool = False

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        check_bool(lineno, cls.op, doc, "include_invalid")
        limit = doc.get("max", 1)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ScenarioError(f"line {lineno}: redrive max must be a whole number, at least 1")

    def run(self, run: Run, lineno: int) -> None:
        run.incidents.redrive(lineno, max_messages=self.limit, include_invalid=self.include_invalid)


@dataclass
class Status(Step):
    """``{"op": "status"}``: ``s3ingest status --json``."""

    op = "status"
    report = "statuses"

    def run(self, run: Run, lineno: int) -> None:
        run.incidents.status(lineno)


@dataclass
class Explain(Step):
    """``{"op": "explain", "key": K, "bucket": B}``: ``s3ingest explain``."""

    op = "explain"
    report = "explanations"

    key: str
    bucket: str | None = None

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        check_key(lineno, doc["key"])

    def run(self, run: Run, lineno: int) -> None:
        run.incidents.explain(lineno, self.key, self.bucket)
