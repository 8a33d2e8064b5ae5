"""Types shared by the parser, the decision logic and the adapters.

Pure data: no AWS calls here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Kind(StrEnum):
    """What an event says happened to an object (CONTRACT C3)."""

    CREATED = "created"
    #: A delete that hides the key: unversioned delete, or a delete marker created.
    REMOVED = "removed"
    #: A delete of one specific version: the key may still be visible (CONTRACT C4).
    VERSION_REMOVED = "version_removed"
    #: Tagging, ACL, restore, storage class, access tier, replication: never moves ordering state.
    METADATA = "metadata"
    #: ``s3:TestEvent``: acknowledged, nothing ingested.
    TEST = "test"
    #: A sequencer-less input (repair, backfill): the handler reads the object's current state.
    OBSERVE = "observe"
    #: A listing's latest entry of a visible key (the listing backfill): the state it carries
    #: (version id, ETag, size) is what the bucket held when it was listed, an older HEAD.
    LISTED = "listed"


class Outcome(StrEnum):
    """How one message ended (CONTRACT C9). Each is a metric and a structured log line."""

    APPLIED = "applied"
    DUPLICATE = "duplicate"
    STALE = "stale"
    SUPERSEDED = "superseded"
    IGNORED = "ignored"
    INVALID = "invalid"
    RETRIED = "retried"


class Format(StrEnum):
    """The wire format an event arrived in (decides how its key is decoded, CONTRACT C1)."""

    EVENTBRIDGE = "eventbridge"
    S3_NOTIFICATION = "s3-notification"
    TEST_EVENT = "test-event"
    REPAIR = "repair"
    BACKFILL = "backfill"
    #: A bucket listing's entry (ListObjectVersions): keys arrive decoded.
    LISTING = "listing"


@dataclass(frozen=True)
class Change:
    """One S3 event about one object, parsed and normalised.

    Attributes
    ----------
    bucket : str
        Bucket name.
    key : str
        Decoded object key (CONTRACT C1: decoded exactly once by the format's rule).
    raw_key : str
        The key exactly as it appeared on the wire, kept for troubleshooting.
    kind : Kind
    event_name : str
        ``ObjectCreated:Put``-style name, or EventBridge ``detail-type/reason``.
    sequencer : str or None
        Normalised sequencer (see :mod:`sequencer`), or ``None`` when absent or unusable.
    raw_sequencer : str or None
        The sequencer as received.
    version_id : str or None
        Object version; ``None`` when the bucket is unversioned or the field is absent.
    etag : str or None
        ETag without quotes.
    size : int or None
        Object size in bytes.
    event_time : str or None
        Event time as received (ISO-8601); informational only, never used for ordering.
    fmt : Format
    replay_name : str or None
        EventBridge ``replay-name`` when the event was replayed from an archive.
    last_modified_ms : int or None
        A listing's ``LastModified`` (epoch ms); informational only, never used for ordering.
    account : str or None
        An EventBridge event's ``account`` (the bucket owner's account, whatever bus forwarded
        it); ``None`` for the other shapes, which carry no account of the bucket's owner.
    """

    bucket: str
    key: str
    raw_key: str
    kind: Kind
    event_name: str
    fmt: Format
    sequencer: str | None = None
    raw_sequencer: str | None = None
    version_id: str | None = None
    etag: str | None = None
    size: int | None = None
    event_time: str | None = None
    replay_name: str | None = None
    last_modified_ms: int | None = None
    account: str | None = None


@dataclass(frozen=True)
class ObjectState:
    """What the bucket holds for a key right now (from a HEAD).

    ``visible`` is False when the key does not exist or its current version is a delete marker.
    """

    visible: bool
    version_id: str | None = None
    etag: str | None = None
    size: int | None = None


@dataclass(frozen=True, slots=True)
class InventoryRow:
    """One object version as an inventory (or a listing) reports it.

    ``key`` is decoded. ``version_id`` None means unversioned or the null version.
    ``is_latest`` is True for unversioned reports. ``last_modified_ms`` may be None.
    """

    bucket: str
    key: str
    version_id: str | None
    is_latest: bool
    is_delete_marker: bool
    etag: str | None
    size: int | None
    last_modified_ms: int | None


@dataclass
class Result:
    """The outcome of one record, for the partial batch response, the metrics and the logs."""

    outcome: Outcome
    reason: str
    bucket: str | None = None
    key: str | None = None
    sequencer: str | None = None
    extra: dict[str, object] = field(default_factory=dict)


class InvalidMessageError(ValueError):
    """A message that can never be ingested (bad JSON, unknown shape, bad key): the ``invalid``
    outcome. ``reason`` is a short machine-readable code."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


class TransientError(RuntimeError):
    """A failure worth retrying (throttling, a service error): the ``retried`` outcome.

    ``extra`` holds fields for the record's result (the change id and effect of the claim that
    failed), merged into the ``retried`` Result by the processing layer.
    """

    #: Set on a processor's failure after its change's row was written (CONTRACT C11): the row
    #: is done, the effect pending with its claim released. A live message is retried as for
    #: any transient error; a backfill, which only has to bring the row in, counts the key done
    #: and leaves the effect to ``s3ingest reprocess --processor P`` or reconciliation
    #: (``docs/backfill.md``). A ledger write that fails, or a worker killed before its commit,
    #: never sets it.
    effects_pending: bool = False

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.extra: dict[str, object] = {}


class EffectNotStarted(TransientError):
    """An effect that was not started: its claim was not written (too little time left in the
    invocation, or the claim's write failed). Nothing changed; running it again is safe."""
