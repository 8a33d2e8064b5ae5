"""Scenario files: a JSON Lines script of S3 operations and deliveries, run on the local runtime.

Format (one JSON object per line; blank lines and lines starting with ``#`` are skipped):

* optional first line ``{"bucket": NAME, "versioning": "Enabled" | "Suspended" | null,
  "processor": "package.module:function" | null, "change_stream": true | false}``; by default
  the example processor (``s3ingest_examples.sidecar:process``) and the change stream run;
  ``"processors": [{"name": N, "handler": "pkg.mod:handler" | "module": "pkg.mod:fn",
  "mode": "latest" | "every-change", "prefixes": [...], "suffixes": [...], "kinds":
  [...]}, ...]`` instead of ``processor`` runs several processors, each effectively once (a
  ``handler`` is a processor function's Lambda handler, run in-process: ``docs/processor-api.md``);
  or, for several buckets, ``{"buckets": [{"name": N, "versioning": V, "prefixes": [...],
  "suffixes": [...], "existing": true, "foreign_config": true}, ...], "processor": ...,
  "change_stream": ...}`` (only ``name`` required): ``existing`` buckets exist before the
  pipeline and S3 sends no EventBridge events for them until an ``onboard`` step;
  ``foreign_config`` gives a bucket another team's SQS notification and inventory
  configurations; key filters keep other keys out of the ledger; ``"account": "<12 digits>"``
  makes an existing bucket another account's (its source stack deployed there: delivery on,
  read through its role, ``docs/organisation.md``) and ``"kms": true`` encrypts it with SSE-KMS
  under a key of its own account;
* every op acting on a bucket takes ``"bucket": N`` (default: the first bucket; for
  ``reconcile``, every bucket);
* ``{"op": "put", "key": K, "body": TEXT}``: PutObject; S3's event (if EventBridge delivery is
  on for the bucket) is queued for a flush;
* ``{"op": "delete", "key": K}`` or with ``"version_id": V``: DeleteObject (a delete marker in a
  versioned bucket, one version when ``version_id`` is given; ``"@N"`` names the version the
  ``put`` on line N created);
* ``{"op": "deliver", "body": B}``: one SQS message whose body is ``B`` exactly as AWS would send
  it (a JSON object, serialised, or a string, sent as is), then the queue is drained;
* ``{"op": "flush", "chaos": {"seed": S, "duplicate": P, "reorder": true, "drop": 0.0,
  "crash": 0.0}}``: deliver every event the S3 operations emitted so far under that chaos, then
  drain the queue; a dropped event is lost for good (only reconciliation repairs what it would
  have done); ``crash`` kills the worker after a processor's effect, before its commit;
  ``ddb_throttle`` and ``lambda_throttle`` (0-1) throttle that drain's DynamoDB requests and its
  ingest invocations (:mod:`s3ingest.local.faults`); an ``undelivered`` event (0-1) reaches the
  bus and the archive but never the ingest queue (the ingest rule delivers nothing meanwhile):
  a ``replay`` brings it back;
* incidents (:mod:`s3ingest.local.incidents`): ``{"op": "disable_rule"}`` / ``{"op":
  "enable_rule"}`` (DisableRule/EnableRule on the ingest rule) and ``{"op":
  "break_queue_policy"}`` / ``{"op": "restore_queue_policy"}`` (the ingest queue's policy
  denies EventBridge, then is put back): a flush in between publishes every event to the bus,
  which archives it and delivers none; ``{"op": "fail_processor", "on": true | false,
  "processor": N}`` (default every processor): each run raises, so messages come back until
  ``maxReceiveCount`` receives, then wait in the DLQ; ``{"op": "squat", "account": A,
  "bucket": N}``: account ``A`` (12 digits) takes the bucket's name (the owner's bucket deleted,
  ``A``'s created, delivery on, its events forwarded to the pipeline's bus); later ``put`` and
  ``delete`` steps on it are ``A``'s, and none of it may reach the ledger;
* operator commands, through the functions the CLI calls: ``{"op": "redrive", "max": N,
  "include_invalid": false}`` (``s3ingest redrive``, then a drain), ``{"op": "status"}``
  (``s3ingest status --json``), ``{"op": "explain", "key": K, "bucket": B}`` (``s3ingest
  explain``);
* ``{"op": "reconcile", "source": "listing" | "inventory", "fan_out": false}``: one
  reconciliation (an inventory report of the bucket is written first for ``inventory``), then
  the repairs are drained; with ``"fan_out": true`` (``inventory`` only) an execution of the
  stack's fan-out state machine reconciles; without ``"bucket"`` every bucket is reconciled in
  turn, as the schedule does (its entry in ``reconciliations``: one bucket's report as is; for
  several, the counts summed, ``buckets`` and one report per bucket under ``reports``);
* ``{"op": "replay", "from": ISO-8601, "to": ISO-8601}`` (both optional: everything archived so
  far): an EventBridge replay from the archive, scoped to the ingest rule, then a drain;
* ``{"op": "backfill", "engine": "batch-operations" | "distributed-map"}``: an S3 Inventory
  report of the bucket, then a backfill over it (objects whose events were never delivered, for
  instance those put before the scenario's first flush with ``"drop": 1.0``, come in):
  ``batch-operations`` (default) an S3 Batch Operations job through the real backfill handler,
  ``distributed-map`` an execution of the stack's Distributed Map backfill state machine;
  ``{"op": "backfill", "source": "listing"}``: an execution of the listing backfill state
  machine over a live listing of the bucket (no inventory);
* ``{"op": "onboard", "bucket": N}``: what ``s3ingest onboard`` does (:mod:`s3ingest.onboard`):
  EventBridge delivery on (other configurations kept), the listing backfill, a listing
  reconciliation; then pending events are delivered;
* first line ``"hold": {...}`` (the ``hold`` setting's form, ``docs/hold.md``; a processor entry
  may carry its own): effects the policy holds wait for ``{"op": "approve", "key": K}`` or
  ``{"op": "reject", "key": K}`` (optional ``"bucket"``, ``"change"`` (a change id) and
  ``"processor"``; default every held change of the key); the queue is drained after each;
* ``{"op": "configure", "processors": [...]}``: another processor configuration deployed
  (:meth:`~s3ingest.local.runtime.LocalRuntime.configure`), and ``{"op": "reprocess",
  "processor": P}``: an execution of the stack's reprocess machine (``docs/reprocess.md``).

The result (:func:`run_scenario`) is ``{"error": str | None, "messages": [...], "ledger": [...],
"bucket": [...], "effects": [...], "changes": [...], "effects_problems": [...], "held": [...],
"trail": [...], "reviews": [...], "configurations": [...], "reprocesses": [...],
"converged": bool, "dropped": n, "undelivered": n,
"redrives": [...], "statuses": [...], "explanations": [...]}`` as documented in docs/scenarios.md
(``redrives``, ``statuses``, ``explanations``: per step, ``{"step": N, ...}`` with what the
command prints with ``--json``; ``held``:
the changes still held at the end; ``trail``: per key with any, its review decisions, newest
first; ``reviews``: per approve/reject step, what it decided, empty when nothing matched):
``effects`` lists every completed processor run with its change id and fencing token,
``changes`` every event the change bus delivered to a subscriber.
An invalid file raises :class:`ScenarioError` before anything runs (or when S3 itself refuses a
``put``/``delete`` of it); any failure of the pipeline after that ends the run and is reported
in ``error``, with everything that happened up to it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from s3ingest.local.chaos import Chaos
from s3ingest.local.emulator import ACCOUNT, Emulator, LocalBucket
from s3ingest.local.incidents import Incidents
from s3ingest.local.runtime import (
    BACKFILL_ENGINES,
    BATCH_OPERATIONS,
    LocalRuntime,
    local_settings,
)
from s3ingest.local.s3faithful import Op, check_key
from s3ingest.reprocess_ops import cause_text
from s3ingest.settings import BucketSpec, Settings
from s3ingest.settings.buckets import ACCOUNT_RE

_VERSIONING = ("Enabled", "Suspended", None)
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_BUCKET_FORBIDDEN = re.compile(r"\.\.|^\d+\.\d+\.\d+\.\d+$|^xn--|^sthree-|-s3alias$|--ol-s3$")
#: Fields each op accepts; anything else is a typo worth reporting.
_FIELDS = {
    "put": {"key", "body", "bucket"},
    "delete": {"key", "version_id", "bucket"},
    "deliver": {"body"},
    "flush": {"chaos"},
    "reconcile": {"source", "fan_out", "bucket"},
    "backfill": {"engine", "source", "bucket"},
    "replay": {"from", "to"},
    "onboard": {"bucket"},
    "approve": {"key", "bucket", "change", "processor"},
    "reject": {"key", "bucket", "change", "processor"},
    "disable_rule": set(),
    "enable_rule": set(),
    "break_queue_policy": set(),
    "restore_queue_policy": set(),
    "fail_processor": {"on", "processor"},
    "squat": {"bucket", "account"},
    "redrive": {"max", "include_invalid"},
    "status": set(),
    "explain": {"key", "bucket"},
    "configure": {"processors", "hold"},
    "reprocess": {"processor", "bucket", "prefix", "rate", "dry_run", "remove", "chaos"},
}
#: Steps of :class:`~s3ingest.local.incidents.Incidents` taking no argument.
_INCIDENT_SWITCHES = ("disable_rule", "enable_rule", "break_queue_policy", "restore_queue_policy")
#: ``backfill`` sources: an inventory report (default) or a live listing.
BACKFILL_SOURCES = ("inventory", "listing")


_SETUP_FIELDS = {
    "bucket",
    "versioning",
    "processor",
    "processors",
    "change_stream",
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


class ScenarioError(ValueError):
    """A scenario line that cannot be run; the message names the line."""


def parse_lines(lines: Iterable[str]) -> tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]]:
    """Split a scenario into its set-up and its numbered steps.

    Raises
    ------
    ScenarioError
        For a line that is not a JSON object, an unknown ``op`` or a missing field.
    """
    setup: dict[str, Any] = {"bucket": None, "versioning": "Enabled"}
    steps: list[tuple[int, dict[str, Any]]] = []
    puts: dict[int, str] = {}  # line -> key of each put so far, for "version_id": "@N"
    seen_setup = False
    for lineno, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
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
        if "op" not in doc:
            unknown = sorted(set(doc) - _SETUP_FIELDS)
            if unknown and not steps and not seen_setup:
                raise ScenarioError(
                    f"line {lineno}: unknown set-up field {', '.join(unknown)} "
                    '(a step needs "op"; the set-up line takes bucket, '
                    "versioning, processor, processors, change_stream, buckets, hold)"
                )
            if steps or seen_setup or unknown:
                raise ScenarioError(
                    f'line {lineno}: a step needs "op"; only the first line '
                    'may be the set-up {"bucket", "versioning", '
                    '"processor", "change_stream"}'
                )
            _check_effects_setup(lineno, doc)
            if "buckets" in doc:
                if "bucket" in doc or "versioning" in doc:
                    raise ScenarioError(
                        f'line {lineno}: give "buckets" or "bucket"/"versioning", not both'
                    )
                setup["buckets"] = _parse_buckets(lineno, doc["buckets"])
                setup.update({k: v for k, v in doc.items() if k != "buckets"})
                seen_setup = True
                continue
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
            seen_setup = True
            continue
        _check_step(lineno, doc)
        versioning = _check_bucket_ref(lineno, doc, setup)
        if (
            doc["op"] == "delete"
            and versioning is None
            and doc.get("version_id") not in (None, "null")
            and version_ref(doc.get("version_id")) is None
        ):
            raise ScenarioError(
                f"line {lineno}: the bucket is not versioned: S3 refuses a "
                "version_id other than 'null' (InvalidArgument)"
            )
        if doc["op"] == "put":
            puts[lineno] = doc["key"]
        elif doc["op"] == "delete":
            _check_version_ref(lineno, doc, puts)
        steps.append((lineno, doc))
    return setup, steps


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


def version_ref(version_id: Any) -> int | None:
    """The put line ``N`` of a ``"version_id": "@N"`` reference; None for a literal version."""
    if isinstance(version_id, str) and version_id.startswith("@"):
        number = version_id[1:]
        return int(number) if number.isascii() and number.isdigit() else -1
    return None


def _check_version_ref(lineno: int, doc: dict[str, Any], puts: dict[int, str]) -> None:
    ref = version_ref(doc.get("version_id"))
    if ref is None:
        return
    if ref not in puts:
        raise ScenarioError(
            f"line {lineno}: version_id {doc['version_id']!r} names no put "
            '("@N" is the version created by the put on an earlier line N)'
        )
    if puts[ref] != doc["key"]:
        raise ScenarioError(
            f"line {lineno}: version_id {doc['version_id']!r} names the put of "
            f"{puts[ref]!r} on line {ref}, not of {doc['key']!r}"
        )


def _no_duplicate_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    names = [name for name, _ in pairs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"field {', '.join(duplicates)} given twice")
    return dict(pairs)


def _check_effects_setup(lineno: int, doc: dict[str, Any]) -> None:
    if "change_stream" in doc and not isinstance(doc["change_stream"], bool):
        raise ScenarioError(f"line {lineno}: change_stream must be true or false")
    if "processor" in doc:
        processor = doc["processor"]
        if processor is not None and not isinstance(processor, str):
            raise ScenarioError(
                f"line {lineno}: processor must be 'package.module:function' or null"
            )
        problems = local_settings(processor=processor).problems()
        if problems:
            raise ScenarioError(f"line {lineno}: {'; '.join(problems)}")
    if "processors" in doc:
        processors = doc["processors"]
        if "processor" in doc:
            raise ScenarioError(f"line {lineno}: give processor or processors, not both")
        if not isinstance(processors, list) or not all(isinstance(p, dict) for p in processors):
            raise ScenarioError(f"line {lineno}: processors must be a list of objects")
        problems = local_settings(processor=None, processors=processors).problems()
        if problems:
            raise ScenarioError(f"line {lineno}: {'; '.join(problems)}")
    if "hold" in doc:
        overrides: dict[str, Any] = {"hold": doc["hold"]}
        if "processors" in doc:
            overrides.update(processor=None, processors=doc["processors"])
        elif "processor" in doc:
            overrides["processor"] = doc["processor"]
        problems = local_settings(**overrides).problems()
        if problems:
            raise ScenarioError(f"line {lineno}: {'; '.join(problems)}")


def _check_step(lineno: int, doc: dict[str, Any]) -> None:
    op = doc["op"]
    allowed = _FIELDS.get(op)
    if allowed is None:
        raise ScenarioError(f"line {lineno}: unknown op {op!r} ({', '.join(_FIELDS)})")
    unknown = set(doc) - allowed - {"op"}
    if unknown:
        accepted = ", ".join(sorted(allowed)) or "no fields"
        raise ScenarioError(
            f"line {lineno}: op {op!r} takes no {', '.join(sorted(unknown))} (accepts: {accepted})"
        )
    required = {
        "put": ("key", "body"),
        "delete": ("key",),
        "deliver": ("body",),
        "approve": ("key",),
        "reject": ("key",),
        "explain": ("key",),
        "fail_processor": ("on",),
        "squat": ("account",),
        "configure": ("processors",),
        "reprocess": ("processor",),
    }.get(op, ())
    missing = [f for f in required if f not in doc]
    if missing:
        raise ScenarioError(f"line {lineno}: op {op!r} needs {', '.join(missing)}")
    if op in ("put", "delete", "approve", "reject", "explain"):
        _check_key(lineno, doc["key"])
    for name in ("on", "include_invalid"):
        if name in doc and not isinstance(doc[name], bool):
            raise ScenarioError(f"line {lineno}: {op} {name} must be true or false")
    if op == "configure":
        _check_effects_setup(lineno, doc)
    if op == "reprocess":
        _check_reprocess(lineno, doc)
    if op == "squat" and not (isinstance(doc["account"], str) and ACCOUNT_RE.match(doc["account"])):
        raise ScenarioError(f"line {lineno}: squat account must be an AWS account id (12 digits)")
    if op == "fail_processor" and not isinstance(doc.get("processor", ""), str):
        raise ScenarioError(f"line {lineno}: fail_processor processor must be a processor's name")
    limit = doc.get("max", 1) if op == "redrive" else 1
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ScenarioError(f"line {lineno}: redrive max must be a whole number, at least 1")
    for name in ("change", "processor"):
        if op in ("approve", "reject") and name in doc and not isinstance(doc[name], str):
            raise ScenarioError(f"line {lineno}: {op} {name} must be a string")
    if op == "put" and not isinstance(doc["body"], str):
        raise ScenarioError(f"line {lineno}: put body must be a string")
    if (
        op == "delete"
        and "version_id" in doc
        and (not isinstance(doc["version_id"], str) or not doc["version_id"])
    ):
        raise ScenarioError(f"line {lineno}: version_id must be a non-empty string")
    if op == "deliver" and not isinstance(doc["body"], (str, dict, list)):
        raise ScenarioError(f"line {lineno}: deliver body must be a JSON object or a string")
    if op == "replay":
        times = {
            name: _parse_time(lineno, name, doc[name]) for name in ("from", "to") if name in doc
        }
        if len(times) == 2 and times["to"] <= times["from"]:
            raise ScenarioError(
                f'line {lineno}: replay "to" ({doc["to"]}) must be after "from" ({doc["from"]})'
            )
    if op == "reconcile" and doc.get("source", "inventory") not in ("listing", "inventory"):
        raise ScenarioError(f"line {lineno}: reconcile source must be listing or inventory")
    if op == "reconcile" and not isinstance(doc.get("fan_out", False), bool):
        raise ScenarioError(f"line {lineno}: reconcile fan_out must be true or false")
    if op == "reconcile" and doc.get("fan_out") and doc.get("source", "inventory") != "inventory":
        raise ScenarioError(f"line {lineno}: the fan-out reconciliation reads an inventory")
    if op == "backfill" and doc.get("source", "inventory") not in BACKFILL_SOURCES:
        raise ScenarioError(f"line {lineno}: backfill source must be inventory or listing")
    if op == "backfill" and doc.get("source") == "listing" and "engine" in doc:
        raise ScenarioError(
            f"line {lineno}: a listing backfill has one engine (the listing state machine); "
            "engine applies to an inventory backfill"
        )
    if op == "backfill" and doc.get("engine", BATCH_OPERATIONS) not in BACKFILL_ENGINES:
        raise ScenarioError(
            f"line {lineno}: backfill engine must be one of {', '.join(BACKFILL_ENGINES)}"
        )
    if op == "flush":
        _check_chaos(lineno, doc)


def _check_chaos(lineno: int, doc: dict[str, Any]) -> None:
    try:
        Chaos.from_json(doc.get("chaos"))
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"line {lineno}: {exc}") from exc


def _check_reprocess(lineno: int, doc: dict[str, Any]) -> None:
    if not isinstance(doc["processor"], str) or not doc["processor"]:
        raise ScenarioError(f"line {lineno}: reprocess processor must be a processor's name")
    for name in ("bucket", "prefix"):
        if name in doc and not isinstance(doc[name], str):
            raise ScenarioError(f"line {lineno}: reprocess {name} must be a string")
    if doc.get("prefix") and "bucket" not in doc:
        raise ScenarioError(f"line {lineno}: reprocess prefix needs bucket (as --prefix does)")
    for name in ("dry_run", "remove"):
        if name in doc and not isinstance(doc[name], bool):
            raise ScenarioError(f"line {lineno}: reprocess {name} must be true or false")
    if "chaos" in doc:
        _check_chaos(lineno, doc)
        other = sorted(set(doc["chaos"]) - {"seed", "crash"})
        if other:
            raise ScenarioError(
                f"line {lineno}: a reprocess step's chaos takes seed and crash only (the run "
                f"delivers no events), not {', '.join(other)}"
            )
    rate = doc.get("rate")
    if rate is not None and (
        isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0
    ):
        raise ScenarioError(f"line {lineno}: reprocess rate must be a positive number (keys/s)")


def _parse_time(lineno: int, name: str, value: Any) -> Any:
    from datetime import UTC, datetime

    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError as exc:
        raise ScenarioError(
            f"line {lineno}: replay {name} must be an ISO-8601 time, not {value!r}"
        ) from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _check_key(lineno: int, key: Any) -> None:
    if not isinstance(key, str) or not key:
        raise ScenarioError(f"line {lineno}: key must be a non-empty string")
    try:
        check_key(key)
    except ValueError as exc:
        raise ScenarioError(f"line {lineno}: {exc}") from exc


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
    setup, steps = parse_lines(text.split("\n"))  # JSON Lines: only "\n" ends a line
    if emulator is None:
        with Emulator() as emu:
            return _run(emu, setup, steps, settings)
    return _run(emulator, setup, steps, settings)


def _run(
    emu: Emulator,
    setup: dict[str, Any],
    steps: list[tuple[int, dict[str, Any]]],
    settings: Settings | None,
) -> dict[str, Any]:
    if settings is None:
        overrides: dict[str, Any] = {
            k: setup[k] for k in ("processor", "change_stream", "hold") if k in setup
        }
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
        rt = LocalRuntime(
            emu,
            settings,
            bucket=setup.get("bucket"),
            versioning=setup.get("versioning"),
            buckets=buckets,
        )
    except ValueError as exc:  # a processor that cannot be imported
        raise ScenarioError(f"set-up: {exc}") from exc
    # (key, sequencer) of every event an S3 operation emitted -> that operation's line
    origins: dict[tuple[str, str], int] = {}
    versions = _Versions()
    reconciliations: list[dict[str, Any]] = []
    backfills: list[dict[str, Any]] = []
    replays: list[dict[str, Any]] = []
    onboardings: list[dict[str, Any]] = []
    reviews: list[dict[str, Any]] = []
    configurations: list[dict[str, Any]] = []
    reprocesses: list[dict[str, Any]] = []
    incidents = Incidents(rt)
    error: str | None = None
    for lineno, step in steps:
        rt.step = lineno
        op = step["op"]
        try:
            if op in ("put", "delete"):
                version = versions.resolve(lineno, step)
                s3 = rt.bucket(step.get("bucket"))
                done = (
                    s3.put(step["key"], str(step["body"]))
                    if op == "put"
                    else s3.delete(step["key"], version)
                )
                versions.record(lineno, done, s3.versioning)
                origins[(done.key, done.event["detail"]["object"]["sequencer"])] = lineno
            elif op == "deliver":
                body = step["body"]
                rt.send_raw(body if isinstance(body, str) else json.dumps(body))
                rt.drain()
            elif op == "flush":
                rt.flush(Chaos.from_json(step.get("chaos")))
                rt.drain()
            elif op == "reconcile":
                source, fan_out, name = (
                    step.get("source", "inventory"),
                    bool(step.get("fan_out")),
                    step.get("bucket"),
                )
                if name is None:  # every bucket, as the schedule
                    summary = rt.reconcile_every_bucket(source, fan_out=fan_out)
                elif fan_out:
                    summary = rt.reconcile_fan_out(bucket=name)
                else:
                    summary = rt.reconcile(source, bucket=name).as_dict()
                reconciliations.append({"step": lineno, **summary})
            elif op == "onboard":
                onboarded = rt.onboard(step.get("bucket"))
                onboardings.append({"step": lineno, **onboarded})
                if onboarded["status"] != "done":
                    raise ValueError(f"onboarding {onboarded['status']}")
            elif op == "backfill":
                if step.get("source") == "listing":
                    backfill = rt.backfill_listing(step.get("bucket"))
                else:
                    backfill = rt.backfill(
                        engine=step.get("engine", BATCH_OPERATIONS), bucket=step.get("bucket")
                    )
                backfills.append({"step": lineno, **backfill})
                execution = backfill.get("execution")
                if execution and execution["status"] != "SUCCEEDED":
                    raise ValueError(
                        f"execution {execution['status']}: {execution.get('error')}: "
                        f"{execution.get('cause')}"
                    )
            elif op in ("approve", "reject"):
                decided = rt.review(
                    step["key"],
                    "approved" if op == "approve" else "rejected",
                    bucket=step.get("bucket"),
                    processor=step.get("processor"),
                    change_id=step.get("change"),
                )
                reviews.append({"step": lineno, "op": op, "key": step["key"], "decided": decided})
            elif op in _INCIDENT_SWITCHES:
                getattr(incidents, op)()
            elif op == "fail_processor":
                incidents.fail_processor(step["on"], step.get("processor"))
            elif op == "squat":
                incidents.squat(step.get("bucket"), step["account"])
            elif op == "redrive":
                incidents.redrive(
                    lineno,
                    max_messages=step.get("max", 1000),
                    include_invalid=step.get("include_invalid", False),
                )
            elif op == "status":
                incidents.status(lineno)
            elif op == "explain":
                incidents.explain(lineno, step["key"], step.get("bucket"))
            elif op == "configure":
                rt.configure(step["processors"], step.get("hold", rt.settings.hold))
                configurations.append(
                    {"step": lineno, "processors": [dict(p) for p in step["processors"]]}
                )
            elif op == "reprocess":
                with rt.crashing(Chaos.from_json(step["chaos"]) if "chaos" in step else None):
                    summary = rt.reprocess(
                        step["processor"],
                        bucket=step.get("bucket"),
                        prefix=step.get("prefix", ""),
                        rate=step.get("rate"),
                        dry_run=step.get("dry_run", False),
                        remove=step.get("remove", False),
                    )
                reprocesses.append({"step": lineno, **summary})
                execution = summary["execution"]
                if execution["status"] != "SUCCEEDED":
                    why = cause_text(execution.get("cause")) or execution.get("error")
                    raise ValueError(f"execution {execution['status']}: {why}")
            elif op == "replay":
                start = _parse_time(lineno, "from", step["from"]) if "from" in step else None
                end = _parse_time(lineno, "to", step["to"]) if "to" in step else None
                replays.append({"step": lineno, **rt.replay(start, end)})
        except ScenarioError:
            raise
        except (ValueError, ClientError) as exc:
            if op not in ("put", "delete"):
                error = f"line {lineno}: {op} failed: {exc}"
                break
            # what S3 itself refuses (an unknown version id, a key too long): the file is wrong
            raise ScenarioError(f"line {lineno}: {op} failed: {exc}") from exc
        except Exception as exc:  # the pipeline failed: part of the report, never lost
            error = f"line {lineno}: {op} failed: {exc.__class__.__name__}: {exc}"
            break
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
    rt.close()
    return {
        "error": error,
        "messages": [
            {
                "step": origins.get((str(d.result.key), str(d.result.sequencer)), d.step),
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
        "reviews": reviews,
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
        "reconciliations": reconciliations,
        "backfills": backfills,
        "replays": replays,
        "configurations": configurations,
        "reprocesses": reprocesses,
        "onboardings": onboardings,
        "redrives": incidents.redrives,
        "statuses": incidents.statuses,
        "explanations": incidents.explanations,
        "bucket_config": bucket_config,
    }


class _Versions:
    """Which version each put line created, and whether it still exists, for ``"@N"``."""

    def __init__(self) -> None:
        self._created: dict[int, str] = {}  # put line -> version id ("null": the null version)
        self._gone: set[int] = set()
        self._null_owner: dict[str, int] = {}  # key -> the put line owning its null version

    def resolve(self, lineno: int, step: dict[str, Any]) -> str | None:
        """The version id a delete step names (``@N`` resolved).

        Raises
        ------
        ScenarioError
            When the version put on line N does not exist any more.
        """
        version = step.get("version_id")
        ref = version_ref(version)
        if step["op"] != "delete" or ref is None:
            return version
        if ref in self._gone:
            raise ScenarioError(
                f"line {lineno}: version_id {version!r}: the version put on line "
                f"{ref} does not exist any more"
            )
        return self._created[ref]

    def record(self, lineno: int, op: Op, versioning: str | None) -> None:
        """Note what ``op`` created or removed."""
        owner = self._null_owner.get(op.key)
        if op.kind == "put":
            version = op.version_id or "null"
            self._created[lineno] = version
            if version == "null":  # a new null version replaces the old one
                self._replace_null(op.key, lineno)
        elif op.version_id is not None:  # one version deleted
            self._gone.update(
                line
                for line, v in self._created.items()
                if v == op.version_id and (v != "null" or line == owner)
            )
            if op.version_id == "null":
                self._null_owner.pop(op.key, None)
        elif versioning != "Enabled":  # unversioned, or a null delete marker (Suspended)
            self._replace_null(op.key, None)

    def _replace_null(self, key: str, line: int | None) -> None:
        owner = self._null_owner.pop(key, None)
        if owner is not None:
            self._gone.add(owner)
        if line is not None:
            self._null_owner[key] = line
