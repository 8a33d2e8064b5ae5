"""What every scenario step shares: :class:`Step` (a step's fields, check, run and report),
the registry its subclasses join, :class:`Run` (the state steps act on) and the checks
several steps use.

A step is a dataclass: its fields are the line's fields (a field whose JSON name is a Python
keyword carries it as ``metadata={"json": NAME}``), required when it has no default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.emulator.s3faithful import check_key as check_key_text
from s3ingest.local.stack.runtime import local_settings

if TYPE_CHECKING:
    from s3ingest.local.rehearsal.clock import ScenarioClock
    from s3ingest.local.rehearsal.incidents import Incidents
    from s3ingest.local.rehearsal.steps.objects import Versions
    from s3ingest.local.stack.runtime import LocalRuntime

#: Every step class by its ``op``, as their modules were imported
#: (:data:`s3ingest.local.rehearsal.steps.STEPS` orders them).
REGISTRY: dict[str, type[Step]] = {}


#: The field every step line takes: the step is meant to fail (:attr:`Step.expect_failure`).
EXPECT_FAILURE = "expect_failure"


class ScenarioError(ValueError):
    """A scenario line that cannot be run; the message names the line."""


@dataclass
class Run:
    """One scenario run: the runtime, its incidents, and the report lists the steps fill."""

    rt: LocalRuntime
    incidents: Incidents
    versions: Versions
    #: (key, sequencer) of every event an S3 operation emitted -> that operation's line
    origins: dict[tuple[str, str], int] = dataclasses.field(default_factory=dict)
    #: report key (``reconciliations``, ...) -> one entry per step that reports there
    reports: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    #: The clock an ``advance`` step moved (None: the real time).
    clock: ScenarioClock | None = None

    def report(self, key: str) -> list[dict[str, Any]]:
        """The entries of report list ``key`` (created empty)."""
        return self.reports.setdefault(key, [])

    def record(self, step: Step, lineno: int, entry: dict[str, Any]) -> None:
        """Add ``entry`` of the step on line ``lineno`` to its report list."""
        if step.report is None:
            raise TypeError(f"step {step.op!r} declares no report list")
        self.report(step.report).append({"step": lineno, **entry})


@dataclass
class Step:
    """One kind of scenario line (``{"op": NAME, ...}``); subclasses with an ``op`` register.

    Subclasses set :attr:`op`, declare their fields as dataclass fields, and override
    :meth:`check` (the line's own rules, after unknown and missing fields were refused),
    :meth:`check_in_order` (rules on the lines before it) and :meth:`run`.
    """

    #: The ``op`` of the line.
    op: ClassVar[str]
    #: The report list :meth:`run`'s entry goes to (None: the step reports nothing).
    report: ClassVar[str | None] = None
    #: A ``ValueError`` or ``ClientError`` of :meth:`run` is S3 refusing the file's operation:
    #: a :class:`ScenarioError`, not a failed step.
    refusal_is_file_error: ClassVar[bool] = False
    #: The line's ``"expect_failure": true`` (every step takes it, not a field): the step is
    #: meant to fail; its failure is recorded in ``expected_failures`` and the run goes on, and
    #: a step that does not fail stops it.
    expect_failure = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "op" in cls.__dict__:
            REGISTRY[cls.op] = cls

    @classmethod
    def json_fields(cls) -> dict[str, dataclasses.Field[Any]]:
        """Each field by its JSON name, in declaration order."""
        return {f.metadata.get("json", f.name): f for f in dataclasses.fields(cls)}

    @classmethod
    def required(cls) -> list[str]:
        """The JSON names of the fields without a default."""
        return [
            name
            for name, f in cls.json_fields().items()
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]

    @classmethod
    def parse(cls, lineno: int, doc: dict[str, Any]) -> Step:
        """The step of line ``lineno``, checked (unknown and missing fields, then :meth:`check`).

        Raises
        ------
        ScenarioError
        """
        fields = cls.json_fields()
        check_bool(lineno, cls.op, doc, EXPECT_FAILURE)
        unknown = set(doc) - set(fields) - {"op", EXPECT_FAILURE}
        if unknown:
            accepted = ", ".join(sorted(fields)) or "no fields"
            raise ScenarioError(
                f"line {lineno}: op {cls.op!r} takes no {', '.join(sorted(unknown))} "
                f"(accepts: {accepted})"
            )
        missing = [name for name in cls.required() if name not in doc]
        if missing:
            raise ScenarioError(f"line {lineno}: op {cls.op!r} needs {', '.join(missing)}")
        cls.check(lineno, doc)
        step = cls(**{f.name: doc[name] for name, f in fields.items() if name in doc})
        step.expect_failure = doc.get(EXPECT_FAILURE, False)
        return step

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        """Refuse a line this step cannot run (:class:`ScenarioError`); the default accepts."""

    def check_in_order(self, lineno: int, versioning: str | None, puts: dict[int, str]) -> None:
        """Refuse the step given the lines before it (``versioning``: its bucket's; ``puts``:
        each earlier ``put``'s key by line), and note what later lines need."""

    def run(self, run: Run, lineno: int) -> None:
        """Do the step, its entry recorded in :attr:`report` (:meth:`Run.record`).

        Raises
        ------
        ValueError
            The step failed (the run stops, the report says why).
        """
        raise NotImplementedError


def json_name(name: str) -> dict[str, str]:
    """The ``metadata`` of a field whose JSON name is ``name`` (a Python keyword)."""
    return {"json": name}


def check_key(lineno: int, key: Any) -> None:
    """Refuse what S3 or the emulator would not take as a key."""
    if not isinstance(key, str) or not key:
        raise ScenarioError(f"line {lineno}: key must be a non-empty string")
    try:
        check_key_text(key)
    except ValueError as exc:
        raise ScenarioError(f"line {lineno}: {exc}") from exc


def check_bool(lineno: int, op: str, doc: dict[str, Any], *names: str) -> None:
    """Refuse each of ``names`` given as anything but true or false."""
    for name in names:
        if name in doc and not isinstance(doc[name], bool):
            raise ScenarioError(f"line {lineno}: {op} {name} must be true or false")


def check_chaos(lineno: int, doc: dict[str, Any]) -> None:
    """Refuse a ``chaos`` object :class:`~s3ingest.local.emulator.chaos.Chaos` does not read."""
    try:
        Chaos.from_json(doc.get("chaos"))
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"line {lineno}: {exc}") from exc


def check_crash_chaos(lineno: int, op: str, doc: dict[str, Any]) -> None:
    """Refuse a ``chaos`` of a step that runs a state machine and delivers no events: it takes
    ``seed`` and ``crash`` only (workers killed between an effect and its commit)."""
    if "chaos" not in doc:
        return
    check_chaos(lineno, doc)
    other = sorted(set(doc["chaos"]) - {"seed", "crash"})
    if other:
        article = "an" if op[0] in "aeiou" else "a"
        raise ScenarioError(
            f"line {lineno}: {article} {op} step's chaos takes seed and crash only (the "
            f"run delivers no events), not {', '.join(other)}"
        )


def parse_time(lineno: int, name: str, value: Any) -> Any:
    """``value`` as an aware ``datetime`` (UTC when it names no zone)."""
    from datetime import UTC, datetime

    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError as exc:
        raise ScenarioError(
            f"line {lineno}: replay {name} must be an ISO-8601 time, not {value!r}"
        ) from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def check_effects_setup(lineno: int, doc: dict[str, Any]) -> None:
    """Refuse the set-up line's (or a ``configure`` step's) processors, change stream and hold
    when the settings would refuse them."""
    for flag in ("change_stream", "history"):
        if flag in doc and not isinstance(doc[flag], bool):
            raise ScenarioError(f"line {lineno}: {flag} must be true or false")
    if doc.get("history") and doc.get("change_stream") is False:
        raise ScenarioError(f"line {lineno}: history needs the change stream (change_stream)")
    if "processor" in doc:
        processor = doc["processor"]
        if processor is not None and not isinstance(processor, str):
            raise ScenarioError(
                f"line {lineno}: processor must be 'package.module:function' or null"
            )
        _refuse_problems(lineno, local_settings(processor=processor).problems())
    if "processors" in doc:
        processors = doc["processors"]
        if "processor" in doc:
            raise ScenarioError(f"line {lineno}: give processor or processors, not both")
        if not isinstance(processors, list) or not all(isinstance(p, dict) for p in processors):
            raise ScenarioError(f"line {lineno}: processors must be a list of objects")
        _refuse_problems(lineno, local_settings(processor=None, processors=processors).problems())
    if "hold" in doc:
        overrides: dict[str, Any] = {"hold": doc["hold"]}
        if "processors" in doc:
            overrides.update(processor=None, processors=doc["processors"])
        elif "processor" in doc:
            overrides["processor"] = doc["processor"]
        _refuse_problems(lineno, local_settings(**overrides).problems())


def _refuse_problems(lineno: int, problems: Sequence[str]) -> None:
    if problems:
        raise ScenarioError(f"line {lineno}: {'; '.join(problems)}")
