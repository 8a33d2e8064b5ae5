"""Parse SQS message bodies carrying S3 events into :class:`~s3ingest_fn.core.model.Change` objects.

Accepted bodies (shapes and quirks from ``docs/payloads.md``):

* an EventBridge S3 event (``source: aws.s3``; the deployed path, docs/payloads.md section 5,
  https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html);
* an S3 event notification ``{"Records": [...]}`` (direct S3-to-SQS, docs/payloads.md section 1,
  https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html);
* either of those inside an SNS envelope (``Type: Notification``, ``Message`` a JSON string);
* ``s3:TestEvent`` (docs/payloads.md section 2): acknowledged, nothing ingested;
* a repair event written by this product (``{"s3ingestRepair": {"bucket", "key", "reason"}}``),
  an observation without a sequencer (CONTRACT C7).

Anything else raises :class:`~s3ingest_fn.core.model.InvalidMessageError` with a reason code, so
it is classified ``invalid`` and never counted as success (CONTRACT C3, C9): so do a sequencer
not in S3's shape (:func:`s3ingest_fn.core.sequencer.problem`, C2), a field beyond its bound
(:mod:`s3ingest_fn.core.bounds`) and more than :data:`MAX_RECORDS_PER_MESSAGE` records.

Keys are decoded exactly once (CONTRACT C1): EventBridge and notification keys are
form-encoded (``+`` is a space, ``%2B`` a plus); repair keys are already raw.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_to_bytes

from s3ingest_fn.core import bounds, sequencer
from s3ingest_fn.core.model import Change, Format, InvalidMessageError, Kind

#: Largest body accepted, bytes. EventBridge events are at most 256 KiB
#: (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevent-size.html) and S3
#: notifications at most 64 KB; anything larger is not an S3 event.
MAX_BODY_BYTES = 256 * 1024
#: S3 object keys are at most 1024 bytes of UTF-8
#: (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html).
MAX_KEY_BYTES = 1024
#: Records one message may hold; more: the whole message is ``invalid`` (``too-many-records``),
#: nothing applied. S3 sends one record per message
#: (https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-how-to-event-types-and-destinations.html,
#: docs/payloads.md 1.1). A message's records run one after another (CONTRACT C10 runs messages
#: concurrently): about 5 ms each without effects on the local runtime
#: (``python -m bench --only records``), 51 ms each with effects in issue 24's run (1,349 in
#: 69 s). 100 take 0.5 to 5 s: inside the ingest function's 30 s default timeout with the rest
#: of its batch running beside it.
MAX_RECORDS_PER_MESSAGE = 100

_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")

_CREATED = "Object Created"
_DELETED = "Object Deleted"
#: EventBridge detail-types that never move ordering state (docs/payloads.md section 5, the
#: mapping table).
_EB_METADATA = frozenset(
    {
        "Object Restore Initiated",
        "Object Restore Completed",
        "Object Restore Expired",
        "Object Storage Class Changed",
        "Object Access Tier Changed",
        "Object Tags Added",
        "Object Tags Deleted",
        "Object ACL Updated",
    }
)
#: Notification ``eventName`` prefixes that never move ordering state (CONTRACT C3).
_NOTIFICATION_METADATA = (
    "ObjectRestore:",
    "ObjectTagging:",
    "ObjectAcl:",
    "LifecycleTransition",
    "IntelligentTiering",
    "Replication:",
)


@dataclass
class Parsed:
    """What one SQS message body holds.

    Attributes
    ----------
    changes : list[Change]
        One per S3 record in the body (usually one).
    ignored_reason : str or None
        Set when the body is acknowledged without ingesting anything (``test-event``).
    """

    changes: list[Change] = field(default_factory=list)
    ignored_reason: str | None = None


def decode_form_key(raw: Any) -> str:
    """Decode an ``application/x-www-form-urlencoded`` S3 key exactly once.

    Same result as ``urllib.parse.unquote_plus`` for every key S3 can send, but strict: a ``%``
    not followed by two hex digits, or bytes that are not UTF-8, are rejected instead of being
    silently replaced, because a replaced key would name a different object.

    Parameters
    ----------
    raw : Any
        The key as it appears in the event (``a+b%2Bc`` for ``a b+c``).

    Returns
    -------
    str
        The object key.

    Raises
    ------
    InvalidMessageError
        ``missing-key``, ``bad-percent-encoding``, ``key-not-utf8`` or ``key-too-long``.
    """
    if not isinstance(raw, str) or raw == "":
        raise InvalidMessageError("missing-key", f"key is {raw!r}")
    if "%" not in raw:  # fast path (most keys): only "+" needs decoding
        return _check_key(raw.replace("+", " "))
    if _BAD_PERCENT.search(raw):
        raise InvalidMessageError("bad-percent-encoding", raw[:200])
    try:
        key = unquote_to_bytes(raw.replace("+", " ")).decode("utf-8")
    except UnicodeError as exc:  # invalid UTF-8 after decoding, or a lone surrogate in the JSON
        raise InvalidMessageError("key-not-utf8", raw[:200]) from exc
    return _check_key(key)


def _check_key(key: str) -> str:
    try:
        size = len(key.encode("utf-8"))
    except UnicodeError as exc:  # a lone surrogate (JSON "\ud800") is no S3 key
        raise InvalidMessageError("key-not-utf8", repr(key[:200])) from exc
    if size > MAX_KEY_BYTES:
        raise InvalidMessageError("key-too-long", f"{size} bytes")
    return key


def parse_body(body: Any, now_s: float | None = None) -> Parsed:
    """Parse one SQS message body.

    Parameters
    ----------
    body : str
        The SQS ``body`` (a JSON string, possibly holding an SNS envelope).
    now_s : float, optional
        The handler's clock, Unix seconds (default :func:`time.time`): a sequencer whose time is
        more than :data:`~s3ingest_fn.core.sequencer.SKEW_SECONDS` ahead of it is invalid.

    Returns
    -------
    Parsed

    Raises
    ------
    InvalidMessageError
        ``body-too-large``, ``malformed-json``, ``unknown-shape``, ``too-many-records``, a
        sequencer's reason (``sequencer-not-hex``, ``sequencer-length``,
        ``sequencer-from-future``) or a field-level reason (``field-too-long: version-id``, ...).
    """
    if not isinstance(body, str):
        raise InvalidMessageError("unknown-shape", f"body is {type(body).__name__}")
    if len(body) > MAX_BODY_BYTES or len(body.encode("utf-8")) > MAX_BODY_BYTES:
        raise InvalidMessageError("body-too-large", f"{len(body.encode('utf-8'))} bytes")
    now = time.time() if now_s is None else now_s
    return _parse_document(_loads(body), depth=0, now_s=now)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, or an over-long integer
        raise InvalidMessageError("malformed-json", str(exc)[:200]) from exc


def _parse_document(doc: Any, depth: int, now_s: float) -> Parsed:
    if not isinstance(doc, dict):
        raise InvalidMessageError("unknown-shape", f"top level is {type(doc).__name__}")
    if doc.get("Event") == "s3:TestEvent":
        return Parsed(ignored_reason="test-event")
    if doc.get("Type") == "Notification" and "Message" in doc and depth == 0:
        message = doc["Message"]
        if not isinstance(message, str):
            raise InvalidMessageError("unknown-shape", "SNS Message is not a string")
        return _parse_document(_loads(message), depth=1, now_s=now_s)
    if "detail-type" in doc and "detail" in doc:
        return Parsed(changes=[_parse_eventbridge(doc, now_s)])
    if "Records" in doc:
        records = doc["Records"]
        if not isinstance(records, list) or not records:
            raise InvalidMessageError("unknown-shape", "Records is empty or not a list")
        if len(records) > MAX_RECORDS_PER_MESSAGE:
            raise InvalidMessageError(
                "too-many-records", f"{len(records)} records, at most {MAX_RECORDS_PER_MESSAGE}"
            )
        return Parsed(changes=[_parse_record(r, now_s) for r in records])
    if "s3ingestRepair" in doc:
        return Parsed(changes=[_parse_repair(doc["s3ingestRepair"])])
    names = ",".join(name[:40] for name in sorted(map(str, doc))[:10])
    raise InvalidMessageError("unknown-shape", "keys: " + names)


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def normalize_etag(value: Any) -> str | None:
    """ETag without surrounding quotes (events send it bare, the S3 API quoted).

    See docs/payloads.md section 1.4; bounded by :func:`s3ingest_fn.core.bounds.etag`.
    """
    return bounds.etag(value)


def normalize_version(value: Any) -> str | None:
    """Version id, with ``null`` (the null version, as the S3 API names it) and empty as None.

    Raises
    ------
    InvalidMessageError
        ``field-too-long: version-id`` beyond :data:`~s3ingest_fn.core.bounds.MAX_VERSION_ID_BYTES`.
    """
    text = bounds.utf8("version-id", value, bounds.MAX_VERSION_ID_BYTES)
    return None if text in (None, "null") else text


def _bucket(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidMessageError("missing-field", where)
    bounds.text("bucket", value, bounds.MAX_BUCKET_CHARS)
    return value


def _raw_key(value: Any) -> Any:
    """The key as on the wire, bounded before it is decoded (:data:`bounds.MAX_RAW_KEY_CHARS`)."""
    if isinstance(value, str) and len(value) > bounds.MAX_RAW_KEY_CHARS:
        raise InvalidMessageError("key-too-long", f"{len(value)} characters on the wire")
    return value  # decode_form_key refuses what is not a non-empty str


def _parse_eventbridge(doc: dict[str, Any], now_s: float) -> Change:
    if doc.get("source") != "aws.s3":
        raise InvalidMessageError(
            "unknown-shape", f"EventBridge source {_shown(doc.get('source'))}"
        )
    detail = doc.get("detail")
    if not isinstance(detail, dict):
        raise InvalidMessageError("unknown-shape", "detail is not an object")
    bucket = (
        (detail.get("bucket") or {}).get("name") if isinstance(detail.get("bucket"), dict) else None
    )
    obj = detail.get("object")
    if not isinstance(obj, dict):
        raise InvalidMessageError("missing-field", "detail.bucket.name or detail.object")
    bucket = _bucket(bucket, "detail.bucket.name or detail.object")
    key = decode_form_key(_raw_key(obj.get("key")))
    raw_key: str = obj["key"]
    detail_type = doc.get("detail-type")
    version_id = normalize_version(obj.get("version-id"))
    names_version = _opt_str(obj.get("version-id")) is not None  # "null" names the null version
    reason = bounds.text("reason", detail.get("reason"), bounds.MAX_EVENT_WORD_CHARS)
    deletion_type = bounds.text(
        "deletion-type", detail.get("deletion-type"), bounds.MAX_EVENT_WORD_CHARS
    )
    if detail_type == _CREATED:
        kind = Kind.CREATED
    elif detail_type == _DELETED:
        if deletion_type == "Delete Marker Created":
            kind = Kind.REMOVED
        else:
            kind = Kind.VERSION_REMOVED if names_version else Kind.REMOVED
    elif detail_type in _EB_METADATA:
        kind = Kind.METADATA
    else:
        raise InvalidMessageError("unknown-event", f"detail-type {_shown(detail_type)}")
    name = "/".join(p for p in (str(detail_type), reason, deletion_type) if p)
    return _change(
        obj,
        bucket=bucket,
        key=key,
        raw_key=raw_key,
        kind=kind,
        event_name=name,
        fmt=Format.EVENTBRIDGE,
        version_id=version_id,
        etag=obj.get("etag"),
        event_time=doc.get("time"),
        now_s=now_s,
        replay_name=doc.get("replay-name"),
        # "" when absent or not a string: EventBridge always sets it (the bucket owner's)
        account=bounds.text("account", doc.get("account"), bounds.MAX_EVENT_WORD_CHARS) or "",
    )


def _shown(value: Any) -> str:
    """A value of the input for an error's detail: its repr, at most 100 characters."""
    text = repr(value)
    return text if len(text) <= 100 else f"{text[:100]}... ({len(text)} characters)"


def _change(
    obj: dict[str, Any],
    *,
    bucket: str,
    key: str,
    raw_key: str,
    kind: Kind,
    event_name: str,
    fmt: Format,
    version_id: str | None,
    etag: Any,
    event_time: Any,
    now_s: float,
    replay_name: Any = None,
    account: str | None = None,
) -> Change:
    """The fields both S3 formats share (their names differ: ``etag``/``eTag``, ...)."""
    raw_seq = obj.get("sequencer")
    if kind is Kind.METADATA:
        # Metadata events carry no sequencer of the object's write order (CONTRACT C3): not
        # checked, not ordered, only bounded (it reaches the logs).
        seq = None
        bounds.text("sequencer", raw_seq, bounds.MAX_IGNORED_SEQUENCER_CHARS)
    else:
        problem = sequencer.problem(raw_seq, now_s)
        if problem is not None:
            raise InvalidMessageError(problem, _shown(raw_seq))
        seq = sequencer.normalize(raw_seq)
    return Change(
        bucket=bucket,
        key=key,
        raw_key=raw_key,
        kind=kind,
        event_name=event_name,
        fmt=fmt,
        sequencer=seq,
        raw_sequencer=raw_seq if isinstance(raw_seq, str) else None,
        version_id=version_id,
        etag=normalize_etag(etag),
        size=bounds.size(obj.get("size")),
        event_time=bounds.text("time", event_time, bounds.MAX_TIME_CHARS),
        replay_name=bounds.replay_name(replay_name),
        account=account,
    )


def _notification_kind(event_name: str, names_version: bool) -> Kind:
    if event_name.startswith("ObjectCreated:"):
        return Kind.CREATED
    if event_name.endswith(":DeleteMarkerCreated") and event_name.startswith(
        ("ObjectRemoved:", "LifecycleExpiration:")
    ):
        return Kind.REMOVED
    if event_name in ("ObjectRemoved:Delete", "LifecycleExpiration:Delete"):
        return Kind.VERSION_REMOVED if names_version else Kind.REMOVED
    if event_name.startswith(_NOTIFICATION_METADATA):
        return Kind.METADATA
    if event_name == "ReducedRedundancyLostObject":
        # The object is gone or not: only the bucket can say. Record what it holds now.
        return Kind.OBSERVE
    raise InvalidMessageError("unknown-event", f"eventName {_shown(event_name)}")


def _parse_record(record: Any, now_s: float) -> Change:
    if not isinstance(record, dict):
        raise InvalidMessageError("unknown-shape", "record is not an object")
    if record.get("eventSource") not in ("aws:s3", None):
        raise InvalidMessageError(
            "unknown-shape", f"eventSource {_shown(record.get('eventSource'))}"
        )
    s3 = record.get("s3")
    if (
        not isinstance(s3, dict)
        or not isinstance(s3.get("bucket"), dict)
        or not isinstance(s3.get("object"), dict)
    ):
        raise InvalidMessageError("missing-field", "s3.bucket or s3.object")
    bucket = _bucket(s3["bucket"].get("name"), "s3.bucket.name")
    obj = s3["object"]
    key = decode_form_key(_raw_key(obj.get("key")))
    raw_key: str = obj["key"]
    event_name = bounds.text("eventName", record.get("eventName"), bounds.MAX_EVENT_WORD_CHARS)
    if event_name is None:
        raise InvalidMessageError("missing-field", "eventName")
    # Real events carry no "s3:" prefix; several library fixtures do (docs/payloads.md 1.1).
    # Accept both.
    event_name = event_name.removeprefix("s3:")
    version_id = normalize_version(obj.get("versionId"))
    kind = _notification_kind(event_name, _opt_str(obj.get("versionId")) is not None)
    return _change(
        obj,
        bucket=bucket,
        key=key,
        raw_key=raw_key,
        kind=kind,
        event_name=event_name,
        fmt=Format.S3_NOTIFICATION,
        version_id=version_id,
        etag=obj.get("eTag"),
        event_time=record.get("eventTime"),
        now_s=now_s,
    )


def _parse_repair(body: Any) -> Change:
    if not isinstance(body, dict):
        raise InvalidMessageError("unknown-shape", "s3ingestRepair is not an object")
    bucket, key = body.get("bucket"), body.get("key")
    if not isinstance(bucket, str) or not bucket or not isinstance(key, str) or not key:
        raise InvalidMessageError("missing-field", "s3ingestRepair.bucket/key")
    bounds.text("bucket", bucket, bounds.MAX_BUCKET_CHARS)
    given = body.get("reason", "unspecified")
    reason = given if isinstance(given, str) else str(given)
    bounds.text("reason", reason, bounds.MAX_REPAIR_REASON_CHARS)
    return Change(
        bucket=bucket,
        key=_check_key(key),
        raw_key=key,
        kind=Kind.OBSERVE,
        event_name=f"Repair/{reason}",
        fmt=Format.REPAIR,
    )
