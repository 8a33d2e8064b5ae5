"""The bucket against the ledger (CONTRACT C12): what each key is in the bucket, what the ledger
says, and the differences worth a repair.

Memory: one small tuple per key of the bucket (about 200 bytes with the key), the ledger is
streamed. Each ledger row is matched by popping its key from the bucket map, so what is left at
the end is exactly the bucket's keys the ledger has no row for.

:func:`classify` (a ledger row against its key's state, or against nothing) and
:func:`classify_unrecorded` (a key without a row) are the rules; :func:`diff` applies them over
a map of the bucket, the streamed listing run
(:mod:`s3ingest_fn.services.reconcile_listing`) key by key over a spilled ledger.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from s3ingest_fn.core import sequencer
from s3ingest_fn.core.model import InventoryRow
from s3ingest_fn.core.row import PENDING, LedgerRow

MISSING = "missing"
DELETED_BUT_LIVE = "deleted_but_live"
CONTENT_MISMATCH = "content_mismatch"
#: The row's state may match the bucket, but its stored sequencer is one S3 cannot have sent
#: (:func:`~s3ingest_fn.core.sequencer.contradicted`: a forged one written before events were
#: checked, issue 24, or one above every real sequencer of now, issue 34): every later real
#: event of the key would be ``stale``. The repair resets it (CONTRACT C5, C7, C12); a repair of
#: any other drift resets the row's sequencer too.
SEQUENCER_CONTRADICTED = "sequencer_contradicted"
DRIFT_KINDS = (MISSING, DELETED_BUT_LIVE, CONTENT_MISMATCH, SEQUENCER_CONTRADICTED)
#: Not drift between ledger and bucket: a processor effect left ``pending`` by a worker that
#: died, whose lease expired before the snapshot, and whose message never came back (it reached
#: the dead-letter queue). A repair event for the key re-claims and re-runs it (CONTRACT C11).
PENDING_EFFECT = "pending_effect"
#: Not drift either: the ledger equals the bucket, but the row's effect has not completed for the
#: row's change (it ended ``superseded`` and the newer changes that would have run their own were
#: lost). A repair event verifies the bucket still shows the row's state and re-runs the effect
#: against the current object (CONTRACT C11, C12; :attr:`LedgerRow.effect_behind`).
EFFECT_BEHIND = "effect_behind"


class Truth(NamedTuple):
    """A key's current state in the bucket, from its latest version in a listing or inventory.

    ``visible`` is False when the latest version is a delete marker.
    """

    visible: bool
    version_id: str | None
    etag: str | None
    last_modified_ms: int | None


def bucket_truth(rows: Iterable[InventoryRow], *, prefix: str = "") -> dict[str, Truth]:
    """Reduce version rows to each key's current state.

    Parameters
    ----------
    rows : iterable of InventoryRow
        One row per version (delete markers included) or one per object (current-only reports,
        unversioned listings), in any order: inventory rows are not sorted.
    prefix : str
        Only keys starting with it.

    Returns
    -------
    dict
        key -> :class:`Truth`. Keys whose versions are all non-current (cannot happen in a
        consistent report) are absent.
    """
    truth: dict[str, Truth] = {}
    for row in rows:
        if not row.is_latest or not row.key.startswith(prefix):
            continue
        seen = truth.get(row.key)
        if seen is not None and (seen.last_modified_ms or 0) > (row.last_modified_ms or 0):
            continue
        truth[row.key] = Truth(
            visible=not row.is_delete_marker,
            version_id=None if row.is_delete_marker else row.version_id,
            etag=None if row.is_delete_marker else row.etag,
            last_modified_ms=row.last_modified_ms,
        )
    return truth


@dataclass(frozen=True)
class Drift:
    """One difference between the ledger and the bucket.

    Attributes
    ----------
    kind : str
        ``missing`` (visible in the bucket, absent or tombstoned in the ledger),
        ``deleted_but_live`` (present in the ledger, not visible in the bucket) or
        ``content_mismatch`` (both present, other version id or ETag),
        ``sequencer_contradicted`` (:data:`SEQUENCER_CONTRADICTED`); or
        ``pending_effect`` (:data:`PENDING_EFFECT`) or ``effect_behind``
        (:data:`EFFECT_BEHIND`), neither counted as drift.
    key : str
    ledger : LedgerRow or None
        The ledger row as scanned.
    bucket : Truth or None
    """

    kind: str
    key: str
    ledger: LedgerRow | None
    bucket: Truth | None


@dataclass
class DiffStats:
    """Counts of one diff: ``skipped_recent`` the rows and objects skipped as changed after the
    diff's ``taken_at_ms`` (the snapshot minus the margin), ``skipped_after_snapshot`` those of
    them changed after ``snapshot_ms`` itself (the rest changed within the margin before it)."""

    ledger_rows: int = 0
    skipped_recent: int = 0
    skipped_after_snapshot: int = 0
    #: When the source was taken (epoch ms); None: every skip counts as after the snapshot.
    snapshot_ms: int | None = None

    def skip(self, changed_ms: int) -> None:
        """Count one skipped row or object, changed at ``changed_ms``."""
        self.skipped_recent += 1
        if self.snapshot_ms is None or changed_ms > self.snapshot_ms:
            self.skipped_after_snapshot += 1


class DiffTap(Protocol):
    """What :func:`diff` shows of its pass to whoever builds on it (the attestation's trees,
    :class:`~s3ingest_fn.services.attestation_pass.TreeTap`)."""

    def row(self, row: LedgerRow, seen: Truth | None) -> None:
        """Each ledger row under the prefix, with its key's state taken out of the map."""

    def rest(self, truth: dict[str, Truth]) -> None:
        """The map once the ledger is read: the keys without a row."""


def diff(
    truth: dict[str, Truth],
    ledger_rows: Iterable[LedgerRow],
    *,
    taken_at_ms: int,
    compare_versions: bool,
    compare_etags: bool,
    stats: DiffStats | None = None,
    prefix: str = "",
    tap: DiffTap | None = None,
) -> Iterator[Drift]:
    """Yield the drift between the bucket (``truth``) and the ledger.

    Parameters
    ----------
    truth : dict
        From :func:`bucket_truth`; consumed (keys are popped as ledger rows match them).
    ledger_rows : iterable of LedgerRow
        Ledger rows (a scan may leave out what the diff does not read: the key, state, version,
        ETag, sequencer, update time and effect are enough).
    taken_at_ms : int
        When the listing or inventory was taken, minus the safety margin, epoch milliseconds.
        A ledger row updated after it, or an object modified after it, is skipped: the source of
        truth may not show that change yet (CONTRACT C12).
    compare_versions, compare_etags : bool
        Whether the source carries version ids / ETags (a report may lack the columns).
    stats : DiffStats, optional
        Filled with counts.
    prefix : str
        Only ledger keys starting with it.
    tap : DiffTap, optional
        Shown each row with its key's state, then the keys left (:class:`DiffTap`).
    """
    stats = stats if stats is not None else DiffStats()
    for row in ledger_rows:
        key = row.key
        if not key.startswith(prefix):
            continue
        stats.ledger_rows += 1
        seen = truth.pop(key, None)
        if tap is not None:
            tap.row(row, seen)
        found = classify(
            row,
            seen,
            taken_at_ms=taken_at_ms,
            compare_versions=compare_versions,
            compare_etags=compare_etags,
            stats=stats,
        )
        if found is not None:
            yield found
    if tap is not None:
        tap.rest(truth)
    for key, left in truth.items():
        found = classify_unrecorded(key, left, taken_at_ms=taken_at_ms, stats=stats)
        if found is not None:
            yield found


def classify(
    row: LedgerRow,
    seen: Truth | None,
    *,
    taken_at_ms: int,
    compare_versions: bool,
    compare_etags: bool,
    stats: DiffStats,
) -> Drift | None:
    """One ledger row against its key's state in the bucket (None: the source did not show the
    key); the difference worth a repair, or None. Counts ``stats.skipped_recent`` (never
    ``ledger_rows``: the caller counts the rows it reads). See :func:`diff` for the arguments.
    """
    key = row.key
    effect = row.effect
    if (
        effect is not None
        and effect.status == PENDING
        and (effect.lease_until_ms or 0) < taken_at_ms
    ):
        return Drift(PENDING_EFFECT, key, row, seen)  # one repair serves both
    changed_ms = max(row.updated_at, (seen.last_modified_ms or 0) if seen is not None else 0)
    if changed_ms > taken_at_ms:
        stats.skip(changed_ms)
        return None
    present = row.present
    kind: str | None = None
    if seen is None or not seen.visible:
        kind = DELETED_BUT_LIVE if present else None
    elif not present:
        kind = MISSING
    elif (compare_versions and row.version_id != seen.version_id) or (
        compare_etags and row.etag != seen.etag
    ):
        kind = CONTENT_MISMATCH
    if kind is None and row.seq is not None and sequencer.contradicted(row.seq, taken_at_ms / 1000):
        kind = SEQUENCER_CONTRADICTED  # judged at the snapshot's time: never later than now
    if kind is None and effect is not None and row.effect_behind:
        kind = EFFECT_BEHIND  # a drift's repair records a new change, which runs its own
    return Drift(kind, key, row, seen) if kind is not None else None


def suspect_sequencer(row: LedgerRow, now_s: float) -> str | None:
    """The row's stored sequencer when S3 cannot have sent it at ``now_s`` (epoch seconds),
    else None: what a reconciliation's work files keep of a row's sequencer (a later
    :func:`classify` can only find fewer of them contradicted, never more)."""
    if row.seq is not None and sequencer.contradicted(row.seq, now_s) is not None:
        return row.seq
    return None


def classify_unrecorded(
    key: str, seen: Truth, *, taken_at_ms: int, stats: DiffStats
) -> Drift | None:
    """A key the source shows and the ledger has no row for: ``missing`` when visible and not
    modified after ``taken_at_ms`` (then counted in ``stats.skipped_recent``), else None."""
    if not seen.visible:
        return None
    if (seen.last_modified_ms or 0) > taken_at_ms:
        stats.skip(seen.last_modified_ms or 0)
        return None
    return Drift(MISSING, key, None, seen)
