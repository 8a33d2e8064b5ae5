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
it is classified ``invalid`` and never counted as success (CONTRACT C3, C9).

Keys are decoded exactly once (CONTRACT C1): EventBridge and notification keys are
form-encoded (``+`` is a space, ``%2B`` a plus); repair keys are already raw.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_to_bytes

from s3ingest_fn.core import sequencer
from s3ingest_fn.core.model import Change, Format, InvalidMessageError, Kind

#: Largest body accepted, bytes. EventBridge events are at most 256 KiB
#: (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevent-size.html) and S3
#: notifications at most 64 KB; anything larger is not an S3 event.
MAX_BODY_BYTES = 256 * 1024
#: S3 object keys are at most 1024 bytes of UTF-8
#: (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html).
MAX_KEY_BYTES = 1024

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


def parse_body(body: Any) -> Parsed:
    """Parse one SQS message body.

    Parameters
    ----------
    body : str
        The SQS ``body`` (a JSON string, possibly holding an SNS envelope).

    Returns
    -------
    Parsed

    Raises
    ------
    InvalidMessageError
        ``body-too-large``, ``malformed-json``, ``unknown-shape`` or a field-level reason.
    """
    if not isinstance(body, str):
        raise InvalidMessageError("unknown-shape", f"body is {type(body).__name__}")
    if len(body.encode("utf-8")) > MAX_BODY_BYTES:
        raise InvalidMessageError("body-too-large", f"{len(body.encode('utf-8'))} bytes")
    return _parse_document(_loads(body), depth=0)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, or an over-long integer
        raise InvalidMessageError("malformed-json", str(exc)[:200]) from exc


def _parse_document(doc: Any, depth: int) -> Parsed:
    if not isinstance(doc, dict):
        raise InvalidMessageError("unknown-shape", f"top level is {type(doc).__name__}")
    if doc.get("Event") == "s3:TestEvent":
        return Parsed(ignored_reason="test-event")
    if doc.get("Type") == "Notification" and "Message" in doc and depth == 0:
        message = doc["Message"]
        if not isinstance(message, str):
            raise InvalidMessageError("unknown-shape", "SNS Message is not a string")
        return _parse_document(_loads(message), depth=1)
    if "detail-type" in doc and "detail" in doc:
        return Parsed(changes=[_parse_eventbridge(doc)])
    if "Records" in doc:
        records = doc["Records"]
        if not isinstance(records, list) or not records:
            raise InvalidMessageError("unknown-shape", "Records is empty or not a list")
        return Parsed(changes=[_parse_record(r) for r in records])
    if "s3ingestRepair" in doc:
        return Parsed(changes=[_parse_repair(doc["s3ingestRepair"])])
    raise InvalidMessageError("unknown-shape", "keys: " + ",".join(sorted(map(str, doc))[:10]))


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def _opt_size(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20:
        return int(value)
    return None


def normalize_etag(value: Any) -> str | None:
    """ETag without surrounding quotes (events send it bare, the S3 API quoted).

    See docs/payloads.md section 1.4.
    """
    text = _opt_str(value)
    return (text.strip('"') or None) if text else None


def normalize_version(value: Any) -> str | None:
    """Version id, with ``null`` (the null version, as the S3 API names it) and empty as None."""
    text = _opt_str(value)
    return None if text in (None, "null") else text


def _parse_eventbridge(doc: dict[str, Any]) -> Change:
    if doc.get("source") != "aws.s3":
        raise InvalidMessageError("unknown-shape", f"EventBridge source {doc.get('source')!r}")
    detail = doc.get("detail")
    if not isinstance(detail, dict):
        raise InvalidMessageError("unknown-shape", "detail is not an object")
    bucket = (
        (detail.get("bucket") or {}).get("name") if isinstance(detail.get("bucket"), dict) else None
    )
    obj = detail.get("object")
    if not isinstance(bucket, str) or not bucket or not isinstance(obj, dict):
        raise InvalidMessageError("missing-field", "detail.bucket.name or detail.object")
    key = decode_form_key(obj.get("key"))
    raw_key: str = obj["key"]
    detail_type = doc.get("detail-type")
    version_id = normalize_version(obj.get("version-id"))
    names_version = _opt_str(obj.get("version-id")) is not None  # "null" names the null version
    reason = _opt_str(detail.get("reason"))
    deletion_type = _opt_str(detail.get("deletion-type"))
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
        raise InvalidMessageError("unknown-event", f"detail-type {detail_type!r}")
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
        replay_name=doc.get("replay-name"),
    )


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
    replay_name: Any = None,
) -> Change:
    """The fields both S3 formats share (their names differ: ``etag``/``eTag``, ...)."""
    raw_seq = obj.get("sequencer")
    return Change(
        bucket=bucket,
        key=key,
        raw_key=raw_key,
        kind=kind,
        event_name=event_name,
        fmt=fmt,
        # Metadata events carry no sequencer of the object's write order (CONTRACT C3).
        sequencer=sequencer.normalize(raw_seq) if kind is not Kind.METADATA else None,
        raw_sequencer=raw_seq if isinstance(raw_seq, str) else None,
        version_id=version_id,
        etag=normalize_etag(etag),
        size=_opt_size(obj.get("size")),
        event_time=_opt_str(event_time),
        replay_name=_opt_str(replay_name),
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
    raise InvalidMessageError("unknown-event", f"eventName {event_name!r}")


def _parse_record(record: Any) -> Change:
    if not isinstance(record, dict):
        raise InvalidMessageError("unknown-shape", "record is not an object")
    if record.get("eventSource") not in ("aws:s3", None):
        raise InvalidMessageError("unknown-shape", f"eventSource {record.get('eventSource')!r}")
    s3 = record.get("s3")
    if (
        not isinstance(s3, dict)
        or not isinstance(s3.get("bucket"), dict)
        or not isinstance(s3.get("object"), dict)
    ):
        raise InvalidMessageError("missing-field", "s3.bucket or s3.object")
    bucket = s3["bucket"].get("name")
    if not isinstance(bucket, str) or not bucket:
        raise InvalidMessageError("missing-field", "s3.bucket.name")
    obj = s3["object"]
    key = decode_form_key(obj.get("key"))
    raw_key: str = obj["key"]
    event_name = record.get("eventName")
    if not isinstance(event_name, str) or not event_name:
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
    )


def _parse_repair(body: Any) -> Change:
    if not isinstance(body, dict):
        raise InvalidMessageError("unknown-shape", "s3ingestRepair is not an object")
    bucket, key = body.get("bucket"), body.get("key")
    if not isinstance(bucket, str) or not bucket or not isinstance(key, str) or not key:
        raise InvalidMessageError("missing-field", "s3ingestRepair.bucket/key")
    return Change(
        bucket=bucket,
        key=_check_key(key),
        raw_key=key,
        kind=Kind.OBSERVE,
        event_name=f"Repair/{body.get('reason', 'unspecified')}",
        fmt=Format.REPAIR,
    )
