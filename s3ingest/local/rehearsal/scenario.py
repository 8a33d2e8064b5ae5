"""Scenario files: a JSON Lines script of S3 operations and deliveries, run on the local runtime.

The format, every step and the result's keys are in ``docs/scenarios.md`` (the reference a test
holds the steps to); each step is one class in :mod:`s3ingest.local.rehearsal.steps`. An invalid
file raises :class:`ScenarioError` before anything runs (or when S3 itself refuses a
``put``/``delete`` of it); a failure of the pipeline after that ends the run and is reported in
the result's ``error``, with everything that happened up to it. A line with
``"expect_failure": true`` is meant to fail: its failure goes to ``expected_failures`` and the
run goes on; its success stops the run.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from s3ingest.local.emulator.server import ACCOUNT, Emulator
from s3ingest.local.rehearsal.incidents import Incidents
from s3ingest.local.rehearsal.steps import STEPS, Run, ScenarioError, Step, step_class
from s3ingest.local.rehearsal.steps.base import check_effects_setup
from s3ingest.local.rehearsal.steps.objects import Versions, version_ref
from s3ingest.local.rehearsal.steps.repairs import BACKFILL_SOURCES
from s3ingest.local.stack.history import history_summary
from s3ingest.local.stack.provisioning import LocalBucket
from s3ingest.local.stack.runtime import LocalRuntime, local_settings
from s3ingest.settings import BucketSpec, Settings
from s3ingest.settings.buckets import ACCOUNT_RE

_log = logging.getLogger(__name__)

__all__ = [
    "BACKFILL_SOURCES",
    "ScenarioError",
    "parse_lines",
    "run_scenario",
    "version_ref",
]

_VERSIONING = ("Enabled", "Suspended", None)
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_BUCKET_FORBIDDEN = re.compile(r"\.\.|^\d+\.\d+\.\d+\.\d+$|^xn--|^sthree-|-s3alias$|--ol-s3$")


_SETUP_FIELDS = {
    "bucket",
    "versioning",
    "processor",
    "processors",
    "change_stream",
    "history",
    "buckets",
    "hold",
}
_BUCKETS_FIELDS = {
    "name",
    "versioning",
    "prefixes",
    "suffixes",
    "existing",
    "foreign_config",
    "account",
    "kms",
}


def parse_lines(lines: Iterable[str]) -> tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]]:
    """Split a scenario into its set-up and its numbered steps (each line's JSON object).

    Raises
    ------
    ScenarioError
        For a line that is not a JSON object, an unknown ``op`` or a missing field.
    """
    setup, steps = _read(lines)
    return setup, [(lineno, doc) for lineno, doc, _ in steps]


def _read(lines: Iterable[str]) -> tuple[dict[str, Any], list[tuple[int, dict[str, Any], Step]]]:
    """The set-up and each step's line, JSON object and :class:`Step`, every line checked."""
    setup: dict[str, Any] = {"bucket": None, "versioning": "Enabled"}
    steps: list[tuple[int, dict[str, Any], Step]] = []
    puts: dict[int, str] = {}  # line -> key of each put so far, for "version_id": "@N"
    seen_setup = False
    for lineno, line in enumerate(lines, start=1):
        doc = _json_line(lineno, line)
        if doc is None:
            continue
        if "op" not in doc:
            _setup_line(lineno, doc, setup, first=not steps and not seen_setup)
            seen_setup = True
            continue
        step = step_class(lineno, doc["op"]).parse(lineno, doc)
        versioning = _check_bucket_ref(lineno, doc, setup)
        step.check_in_order(lineno, versioning, puts)
        steps.append((lineno, doc, step))
    return setup, steps


def _json_line(lineno: int, line: str) -> dict[str, Any] | None:
    """The JSON object of a line; None for a blank line or a comment."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicate_fields)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"line {lineno}: not JSON ({exc.msg})") from exc
    except ValueError as exc:
        raise ScenarioError(f"line {lineno}: {exc}") from exc
    except RecursionError as exc:  # Python's json reads about 1,000 levels at most
        raise ScenarioError(
            f"line {lineno}: nested too deep to read; give a deliver body that deep as a "
            "JSON string (sent as is)"
        ) from exc
    if not isinstance(doc, dict):
        raise ScenarioError(f"line {lineno}: expected a JSON object")
    return doc


def _setup_line(lineno: int, doc: dict[str, Any], setup: dict[str, Any], *, first: bool) -> None:
    """Check the set-up line ``doc`` (``first``: no step and no set-up before it) into
    ``setup``."""
    unknown = sorted(set(doc) - _SETUP_FIELDS)
    if unknown and first:
        raise ScenarioError(
            f"line {lineno}: unknown set-up field {', '.join(unknown)} "
            '(a step needs "op"; the set-up line takes bucket, '
            "versioning, processor, processors, change_stream, history, buckets, hold)"
        )
    if not first or unknown:
        raise ScenarioError(
            f'line {lineno}: a step needs "op"; only the first line '
            'may be the set-up {"bucket", "versioning", '
            '"processor", "change_stream"}'
        )
    check_effects_setup(lineno, doc)
    if "buckets" in doc:
        if "bucket" in doc or "versioning" in doc:
            raise ScenarioError(f'line {lineno}: give "buckets" or "bucket"/"versioning", not both')
        setup["buckets"] = _parse_buckets(lineno, doc["buckets"])
        setup.update({k: v for k, v in doc.items() if k != "buckets"})
        return
    if doc.get("versioning", "Enabled") not in _VERSIONING:
        raise ScenarioError(f"line {lineno}: versioning must be Enabled, Suspended or null")
    bucket = doc.get("bucket")
    if bucket is not None and (
        not isinstance(bucket, str)
        or not _BUCKET_RE.match(bucket)
        or _BUCKET_FORBIDDEN.search(bucket)
    ):
        raise ScenarioError(
            f"line {lineno}: {bucket!r} is not a valid S3 bucket name "
            "(3-63 lower-case letters, digits, '.' and '-'; no '..', "
            "no IP address form, no 'xn--' prefix)"
        )
    setup.update(doc)


def _parse_buckets(lineno: int, raw: Any) -> list[dict[str, Any]]:
    """The set-up's ``buckets`` list, checked."""
    if not isinstance(raw, list) or not raw:
        raise ScenarioError(f"line {lineno}: buckets must be a non-empty list of objects")
    out: list[dict[str, Any]] = []
    for index, entry in enumerate(raw):
        where = f"line {lineno}: buckets[{index}]"
        if not isinstance(entry, dict):
            raise ScenarioError(f"{where}: expected an object")
        unknown = sorted(set(entry) - _BUCKETS_FIELDS)
        if unknown:
            raise ScenarioError(
                f"{where}: unknown field {', '.join(unknown)} "
                f"(accepts: {', '.join(sorted(_BUCKETS_FIELDS))})"
            )
        name = entry.get("name")
        if (
            not isinstance(name, str)
            or not _BUCKET_RE.match(name)
            or _BUCKET_FORBIDDEN.search(name)
        ):
            raise ScenarioError(f"{where}: {name!r} is not a valid S3 bucket name")
        if entry.get("versioning", "Enabled") not in _VERSIONING:
            raise ScenarioError(f"{where}: versioning must be Enabled, Suspended or null")
        for flag in ("existing", "foreign_config", "kms"):
            if not isinstance(entry.get(flag, False), bool):
                raise ScenarioError(f"{where}: {flag} must be true or false")
        account = entry.get("account")
        if account is not None and not (
            isinstance(account, str) and ACCOUNT_RE.match(account) and account != ACCOUNT
        ):
            raise ScenarioError(
                f"{where}: account must be another AWS account id (12 digits, not {ACCOUNT})"
            )
        if account is not None and not entry.get("existing", False):
            raise ScenarioError(f"{where}: a bucket of another account is existing: true")
        for filters in ("prefixes", "suffixes"):
            values = entry.get(filters, [])
            if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
                raise ScenarioError(f"{where}: {filters} must be a list of non-empty strings")
        if any(b["name"] == name for b in out):
            raise ScenarioError(f"{where}: bucket {name!r} is listed twice")
        out.append(
            {
                "name": name,
                "versioning": entry.get("versioning", "Enabled"),
                "prefixes": list(entry.get("prefixes", [])),
                "suffixes": list(entry.get("suffixes", [])),
                "existing": entry.get("existing", False),
                "foreign_config": entry.get("foreign_config", False),
                "account": account,
                "kms": entry.get("kms", False),
            }
        )
    return out


def _check_bucket_ref(lineno: int, doc: dict[str, Any], setup: dict[str, Any]) -> str | None:
    """The versioning of the bucket a step names (``"bucket"``, default the first).

    Raises
    ------
    ScenarioError
        When the scenario has no such bucket.
    """
    buckets = setup.get("buckets")
    name = doc.get("bucket")
    if name is not None and not isinstance(name, str):
        raise ScenarioError(f"line {lineno}: bucket must be a bucket name")
    if buckets is None:
        if name is not None and name != setup.get("bucket"):
            raise ScenarioError(
                f"line {lineno}: no bucket {name!r} in this scenario"
                + (f" (its bucket is {setup['bucket']!r})" if setup.get("bucket") else "")
                + '; several buckets are declared with "buckets" on the first line'
            )
        versioning: str | None = setup.get("versioning")
        return versioning
    for entry in buckets:
        if name is None or entry["name"] == name:
            found: str | None = entry["versioning"]
            return found
    names = ", ".join(b["name"] for b in buckets)
    raise ScenarioError(f"line {lineno}: no bucket {name!r} in this scenario ({names})")


def _no_duplicate_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    names = [name for name, _ in pairs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"field {', '.join(duplicates)} given twice")
    return dict(pairs)


def run_scenario(
    path: Path | str, settings: Settings | None = None, emulator: Emulator | None = None
) -> dict[str, Any]:
    """Run a scenario file on a fresh local deployment and return its result document.

    Parameters
    ----------
    path : Path or str
        The JSON Lines file.
    settings : Settings, optional
    emulator : Emulator, optional
        A started emulator to reuse (tests); by default one is started and stopped here.

    Raises
    ------
    ScenarioError
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    setup, steps = _read(text.split("\n"))  # JSON Lines: only "\n" ends a line
    with ExitStack() as stack:
        emu = emulator if emulator is not None else stack.enter_context(Emulator())
        with _named_buckets_removed(emu, setup):
            return _run(emu, setup, steps, settings)


@contextmanager
def _named_buckets_removed(emu: Emulator, setup: dict[str, Any]) -> Iterator[None]:
    """Remove, when the block ends, the buckets it made under the names ``setup`` gives: moto
    keeps one state per process, so they would otherwise be the next scenario's, objects and
    all (the stack's own buckets have the deployment's unique suffix and stay)."""
    named = {b["name"] for b in setup.get("buckets") or []} | {setup.get("bucket")} - {None}
    before = set(emu.bucket_owners())
    try:
        yield
    finally:
        for name in sorted((set(emu.bucket_owners()) - before) & named):
            try:
                emu.remove_bucket(name)
            except ClientError as exc:  # the run's result (or its error) is what to report
                _log.warning("could not remove the scenario's bucket %s: %s", name, exc)


def _run(
    emu: Emulator,
    setup: dict[str, Any],
    steps: list[tuple[int, dict[str, Any], Step]],
    settings: Settings | None,
) -> dict[str, Any]:
    rt = _runtime(emu, setup, settings)
    incidents = Incidents(rt)
    run = Run(rt, incidents, Versions())
    # what the incidents' commands answered goes to their own lists
    run.reports.update(
        redrives=incidents.redrives,
        statuses=incidents.statuses,
        explanations=incidents.explanations,
    )
    error: str | None = None
    for lineno, _, step in steps:
        rt.step = lineno
        error = _step(run, lineno, step)
        if step.expect_failure:
            expected = {"step": lineno, "op": step.op, "failed": error is not None, "error": error}
            run.report("expected_failures").append(expected)
            error = None if error else f"line {lineno}: {step.op} was expected to fail and did not"
        if error is not None:
            break
    return _report(run, error)


def _runtime(emu: Emulator, setup: dict[str, Any], settings: Settings | None) -> LocalRuntime:
    """The local deployment the set-up line describes (``settings``: instead of its
    processors, change stream and hold)."""
    if settings is None:
        overrides: dict[str, Any] = {
            k: setup[k] for k in ("processor", "change_stream", "hold") if k in setup
        }
        if setup.get("history"):
            overrides["history_table"] = True
        if "processors" in setup:
            overrides.update(processor=None, processors=setup["processors"])
        settings = local_settings(**overrides)
    buckets = None
    if setup.get("buckets"):
        buckets = [
            LocalBucket(
                BucketSpec(
                    name=b["name"],
                    existing=b["existing"],
                    prefixes=tuple(b["prefixes"]),
                    suffixes=tuple(b["suffixes"]),
                    account=b["account"],
                ),
                versioning=b["versioning"],
                foreign_config=b["foreign_config"],
                kms=b["kms"],
            )
            for b in setup["buckets"]
        ]
    try:
        return LocalRuntime(
            emu,
            settings,
            bucket=setup.get("bucket"),
            versioning=setup.get("versioning"),
            buckets=buckets,
        )
    except ValueError as exc:  # a processor that cannot be imported
        raise ScenarioError(f"set-up: {exc}") from exc


def _step(run: Run, lineno: int, step: Step) -> str | None:
    """Run one step; why it failed (the run stops), or None.

    Raises
    ------
    ScenarioError
        What S3 itself refuses of the file (an unknown version id, a key too long).
    """
    try:
        step.run(run, lineno)
    except ScenarioError:
        raise
    except (ValueError, ClientError) as exc:
        if not step.refusal_is_file_error or step.expect_failure:
            return f"line {lineno}: {step.op} failed: {exc}"
        raise ScenarioError(f"line {lineno}: {step.op} failed: {exc}") from exc
    except Exception as exc:  # the pipeline failed: part of the report, never lost
        return f"line {lineno}: {step.op} failed: {exc.__class__.__name__}: {exc}"
    return None


def _report(run: Run, error: str | None) -> dict[str, Any]:
    """The result document of a run that ended (``error``: the step that stopped it)."""
    rt = run.rt
    comparison = rt.compare()
    not_current = rt.effects_not_current()
    fx = rt.effects_report()
    held = rt.held()
    trail = [
        {
            "bucket": row.bucket,
            "key": row.key,
            "decisions": [review.as_dict() for review in row.trail],
        }
        for row in rt.ledger_rows()
        if row.trail
    ]
    bucket_config = rt.bucket_config()
    history = history_summary(rt)
    rt.close()
    result: dict[str, Any] = {
        "error": error,
        "messages": [
            {
                "step": run.origins.get((str(d.result.key), str(d.result.sequencer)), d.step),
                "delivered_at": d.step,
                "event": d.result.extra.get("event_name"),
                "outcome": d.result.outcome.value,
                "reason": d.result.reason,
                "bucket": d.result.bucket,
                "key": d.result.key,
                "sequencer": d.result.sequencer,
                "source": d.result.extra.get("source"),
                "change_id": d.result.extra.get("change_id"),
                "resumed_change_id": d.result.extra.get("resumed_change_id"),
                "effect": d.result.extra.get("effect"),
                **(
                    {"effect_errors": d.result.extra["effect_errors"]}
                    if "effect_errors" in d.result.extra
                    else {}
                ),
            }
            for d in rt.delivered
        ],
        "effects": [run.as_dict() for run in rt.effects],
        "changes": rt.changes,
        "effects_problems": fx["problems"] + fx["sidecar_differences"],
        "held": held,
        "trail": trail,
        "reviews": run.report("reviews"),
        "ledger": [
            {
                "bucket": r.bucket,
                "key": r.key,
                "state": r.state,
                "sequencer": r.raw_seq,
                "version_id": r.version_id,
                "etag": r.etag,
            }
            for r in comparison.ledger
        ],
        "bucket": comparison.bucket,
        "converged": comparison.converged and not not_current,
        "differences": comparison.differences + not_current,
        "dropped": len(rt.dropped),
        "undelivered": len(rt.undelivered),
        "dead_letter_queue": rt.dead_letters(),
        "reconciliations": run.report("reconciliations"),
        "backfills": run.report("backfills"),
        "replays": run.report("replays"),
        "configurations": run.report("configurations"),
        "reprocesses": run.report("reprocesses"),
        "onboardings": run.report("onboardings"),
        "attestations": run.report("attestations"),
        "redrives": run.report("redrives"),
        "statuses": run.report("statuses"),
        "explanations": run.report("explanations"),
        "expected_failures": run.report("expected_failures"),
        "bucket_config": bucket_config,
    }
    if history is not None:
        result["history"] = history
    for step in STEPS.values():  # a step's report list, even when none of its lines ran
        if step.report is not None:
            result.setdefault(step.report, run.report(step.report))
    return result
