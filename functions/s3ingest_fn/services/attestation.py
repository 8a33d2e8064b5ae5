"""A completeness attestation of one bucket (issue 38): from one reconciliation snapshot, read
with the reconciliation's own readers (a listing or an S3 Inventory report for the bucket, the
ledger's parallel Scan), a Merkle tree over the bucket's side and one over the ledger's
(:mod:`s3ingest_fn.core.attestation`), and the document that states them.

The snapshot's keys are the keys visible in the bucket and the keys present in the ledger (the
union, in the bucket's scope, under the prefix), less the keys either side changed after the
snapshot minus the margin (the reconciliation's rule, CONTRACT C12: counted and listed as
``skipped``). Each side has one leaf per key: a key the side does not hold is an ``absent``
leaf, so both trees have the same shape and a differing leaf names its key.

Per processor attested, the bucket's side states the version the key is owed (the processor's
version; :data:`~s3ingest_fn.core.attestation.NOT_CONCERNED` when its filters leave the key out,
or for ``s3ingest verify``'s canary keys), the ledger's side the version whose effect is done for
the row's change (:data:`~s3ingest_fn.core.attestation.NOT_DONE` when none is; as
:meth:`~s3ingest_fn.core.effects.EffectTarget.behind` judges a ``done`` effect).

Memory: each key's state on both sides (about 300 bytes a key); the tree itself is streamed.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

from s3ingest_fn.contract import ATTESTATION_ROOT, CANARY_PREFIX
from s3ingest_fn.core.attestation import (
    ENCODING,
    FANOUT,
    NOT_CONCERNED,
    NOT_DONE,
    PRESENT,
    Leaf,
    PairBuilder,
    absent,
    iso_ms,
    key_order,
)
from s3ingest_fn.core.diff import Truth, bucket_truth
from s3ingest_fn.core.effects import CREATED, EffectTarget
from s3ingest_fn.core.model import InventoryRow, TransientError
from s3ingest_fn.core.row import DONE, LedgerRow
from s3ingest_fn.services.inventory import InventoryError, read_rows
from s3ingest_fn.services.reconcile import (
    LISTING,
    Reconciler,
    ReconcileReport,
    inventory_inputs,
)
from s3ingest_fn.services.reconcile_listing import listing_prefixes
from s3ingest_fn.services.reconcile_run import DEFAULT_MARGIN_MS, ReconcileError

#: The document's format.
DOCUMENT = "s3ingest-attestation/1"
#: The leaves file's bytes kept in memory before it is spooled to a temporary file (a leaf
#: pair is about 250 bytes: beyond this, memory would grow with the keys).
LEAVES_IN_MEMORY = 8 << 20
#: Differing keys the document names at most (``differences_total`` counts them all).
DOCUMENT_DIFFERENCES = 1000
ROOT = ATTESTATION_ROOT


class AttestError(Exception):
    """The attestation could not be made or checked (a reader failed, a processor not
    configured, an input gone)."""


@dataclass(frozen=True)
class AttestRequest:
    """One attestation: the source of the bucket's side (``listing`` or ``inventory``), the
    prefix, the processors (names; None: every configured one), the margin (ms; None: the
    reconciliation's default for the source), an inventory manifest's key (None: the newest)."""

    source: str = LISTING
    prefix: str = ""
    processors: tuple[str, ...] | None = None
    margin_ms: int | None = None
    manifest_key: str | None = None
    page_size: int = 1000


@dataclass
class Attestation:
    """An attestation made: ``document`` (JSON-ready), the leaves file (JSON lines, spooled
    to a temporary file past :data:`LEAVES_IN_MEMORY` bytes: :meth:`leaves_file`;
    :attr:`leaves` its bytes), and every differing key."""

    document: dict[str, Any]
    spool: IO[bytes]
    differences: list[dict[str, Any]] = field(default_factory=list)

    def leaves_file(self) -> IO[bytes]:
        """The leaves file, from its start (PutObject's ``Body``)."""
        self.spool.seek(0)
        return self.spool

    @property
    def leaves(self) -> bytes:
        """The leaves file's bytes (all in memory: for small attestations and tests)."""
        return self.leaves_file().read()


def _targets(r: Reconciler, names: Sequence[str] | None) -> tuple[EffectTarget, ...]:
    configured = {t.name: t for t in r.targets}
    if names is None:
        return tuple(sorted(configured.values(), key=lambda t: t.name))
    unknown = [n for n in names if n not in configured]
    if unknown:
        raise AttestError(
            f"processor {', '.join(unknown)} is not configured on the stack "
            f"(configured: {', '.join(sorted(configured)) or 'none'})"
        )
    return tuple(sorted((configured[n] for n in set(names)), key=lambda t: t.name))


def target_dict(t: EffectTarget) -> dict[str, Any]:
    """A processor as the document names it."""
    return {
        "name": t.name,
        "version": t.version,
        "prefixes": list(t.prefixes),
        "suffixes": list(t.suffixes),
    }


def target_of(d: dict[str, Any]) -> EffectTarget:
    """:func:`target_dict`'s inverse."""
    return EffectTarget(
        d["name"], int(d["version"]), tuple(d["prefixes"]), tuple(d.get("suffixes", ()))
    )


def _owed(key: str, t: EffectTarget) -> bool:
    return not key.startswith(CANARY_PREFIX) and t.concerns(key, CREATED)


def bucket_leaf(
    bucket: str, key: str, seen: Truth | None, targets: Sequence[EffectTarget], fields: set[str]
) -> Leaf:
    """The bucket's side of ``key``: visible (its version, ETag, each processor's version
    owed) or absent."""
    if seen is None or not seen.visible:
        return absent(bucket, key, [t.name for t in targets])
    return Leaf(
        bucket,
        key,
        (seen.version_id or "") if "version_id" in fields else "",
        (seen.etag or "") if "etag" in fields else "",
        PRESENT,
        tuple((t.name, str(t.version) if _owed(key, t) else NOT_CONCERNED) for t in targets),
    )


def _done_version(row: LedgerRow, t: EffectTarget) -> str:
    if not _owed(row.key, t):
        return NOT_CONCERNED
    effect = row.effects().get(t.name)
    if effect is None or effect.status != DONE:
        return NOT_DONE
    if (
        None not in (effect.done_change_id, row.change_id)
        and effect.done_change_id != row.change_id
    ):
        return NOT_DONE  # done for an earlier change
    return str(effect.version)


def ledger_leaf(
    bucket: str,
    key: str,
    row: LedgerRow | None,
    targets: Sequence[EffectTarget],
    fields: set[str],
) -> Leaf:
    """The ledger's side of ``key``: a present row (its version, ETag, each processor's done
    version) or absent (no row, a tombstone)."""
    if row is None or not row.present:
        return absent(bucket, key, [t.name for t in targets])
    return Leaf(
        bucket,
        key,
        (row.version_id or "") if "version_id" in fields else "",
        (row.etag or "") if "etag" in fields else "",
        PRESENT,
        tuple((t.name, _done_version(row, t)) for t in targets),
    )


def _leaf_json(leaf: Leaf) -> dict[str, Any]:
    return {
        "version_id": leaf.version_id,
        "etag": leaf.etag,
        "state": leaf.state,
        "processors": dict(leaf.processors),
    }


def leaf_from_json(bucket: str, key: str, d: dict[str, Any]) -> Leaf:
    """A leaf of the leaves file."""
    return Leaf(
        bucket,
        key,
        d["version_id"],
        d["etag"],
        d["state"],
        tuple(sorted((str(n), str(v)) for n, v in d["processors"].items())),
    )


class _Snapshot:
    """The two sides read once: the bucket's state per key, the ledger's rows per key."""

    def __init__(self, r: Reconciler, request: AttestRequest, clock: Callable[[], float]):
        self.r, self.request = r, request
        self.report = ReconcileReport(
            source=request.source, bucket=r.bucket, prefix=request.prefix, dry_run=True
        )
        self.inputs: dict[str, Any] = {}
        self.fields = {"version_id", "etag"}
        self._clock = clock

    def bucket_side(self) -> dict[str, Truth]:
        r, request = self.r, self.request
        try:
            if request.source == LISTING:
                taken = int(self._clock() * 1000)
                requests, rows = 0, 0
                truth: dict[str, Truth] = {}
                for prefix in listing_prefixes(request.prefix, r.scope.prefixes):
                    for page in r.listing.pages(r.bucket, prefix, None, request.page_size):
                        requests += 1
                        rows += len(page.rows)
                        truth.update(bucket_truth(page.rows, prefix=prefix))
                self.inputs["bucket"] = {
                    "kind": LISTING,
                    "taken_at": iso_ms(taken),
                    "taken_at_ms": taken,
                    "requests": requests,
                    "rows": rows,
                }
            else:
                key = request.manifest_key or r.newest_manifest()
                manifest, raw, checksum = r.manifest_read(key)
                taken = manifest.created_ms
                truth = bucket_truth(
                    inventory_rows(r.get_inventory_object, manifest.files, manifest),
                    prefix=request.prefix,
                )
                columns = set(manifest.columns)
                if not columns & {"VersionId", "version_id"}:
                    self.fields.discard("version_id")
                if not columns & {"ETag", "e_tag"}:
                    self.fields.discard("etag")
                self.inputs["bucket"] = inventory_inputs(
                    r.inventory_bucket, key, manifest, raw, checksum
                )
        except (TransientError, ReconcileError) as exc:
            raise AttestError(f"reading the bucket's state failed: {exc}") from exc
        self.taken_ms = taken
        return {k: t for k, t in truth.items() if r.scope.contains(k)}

    def ledger_side(self) -> dict[str, LedgerRow]:
        report = self.report
        try:
            rows = {
                row.key: row
                for row in self.r.scoped(
                    self.r.scan_ledger(report, lambda phase, n: None), report, self.request.prefix
                )
            }
        except (TransientError, ReconcileError) as exc:
            raise AttestError(f"reading the ledger failed: {exc}") from exc
        self.inputs["ledger"] = {
            "kind": "ledger-scan",
            "table": self.r.table,
            "read_at": iso_ms(int(self._clock() * 1000)),
            "requests": report.ledger_requests,
            "rows": len(rows),
        }
        return rows


def inventory_rows(
    read: Callable[[str], bytes], files: Iterable[str], manifest: Any
) -> Iterator[InventoryRow]:
    """The rows of an inventory report's data files, each read with ``read(key)``.

    Raises
    ------
    AttestError
        When a data file is not a valid one.
    """
    for data_key in files:
        try:
            yield from read_rows(manifest, read(data_key))
        except InventoryError as exc:
            raise AttestError(f"{data_key}: {exc}") from exc


def attest(
    r: Reconciler,
    request: AttestRequest,
    *,
    stack: str,
    clock: Callable[[], float] = time.time,
) -> Attestation:
    """Attest ``r``'s bucket once (the module's docstring).

    Returns
    -------
    Attestation
        The document (without ``document_sha256`` and the leaves' location: the caller stores
        them, :func:`seal`), the leaves file, the differing keys.

    Raises
    ------
    AttestError
        When a reader fails or a processor named is not configured.
    """
    targets = _targets(r, request.processors)
    snap = _Snapshot(r, request, clock)
    truth = snap.bucket_side()
    rows = snap.ledger_side()
    margin = (
        request.margin_ms if request.margin_ms is not None else DEFAULT_MARGIN_MS[request.source]
    )
    cutoff = snap.taken_ms - margin
    names = {k for k, t in truth.items() if t.visible} | {
        k for k, row in rows.items() if row.present
    }
    tree = TreeWriter(r.bucket, targets, snap.fields, cutoff)
    for key in sorted(names, key=key_order):
        tree.key(key, truth.get(key), rows.get(key))
    return tree.attestation(
        stack=stack,
        scope=r.scope.as_dict(),
        prefix=request.prefix,
        source=request.source,
        taken_ms=snap.taken_ms,
        margin_ms=margin,
        inputs=snap.inputs,
    )


class TreeWriter:
    """Both trees and the leaves file of one attestation, fed key by key in key order
    (:func:`attest` over its snapshot; :mod:`s3ingest_fn.services.attestation_pass` over the
    diff's pass): the same bytes from the same keys and leaves whichever feeds it.

    Parameters
    ----------
    bucket : str
    targets : sequence of EffectTarget
        The processors attested, sorted by name.
    fields : set of str
        ``version_id`` and ``etag`` when the snapshot carries them.
    cutoff_ms : int
        The snapshot's time minus the margin: a key either side changed after it is skipped.
    """

    def __init__(
        self, bucket: str, targets: Sequence[EffectTarget], fields: set[str], cutoff_ms: int
    ) -> None:
        self.bucket, self.targets, self.fields, self.cutoff = bucket, targets, fields, cutoff_ms
        self.builder = PairBuilder()
        #: The leaves file, spooled (:class:`Attestation` keeps it open).
        self.lines: IO[bytes] = tempfile.SpooledTemporaryFile(LEAVES_IN_MEMORY)  # noqa: SIM115
        self.digest = hashlib.sha256()
        self.size = 0
        self.skipped = 0
        self.counts = {"bucket_present": 0, "ledger_present": 0}

    def changed(self, seen: Truth | None, row: LedgerRow | None) -> int:
        """When either side last changed the key (epoch ms; 0: unknown)."""
        return max(
            row.updated_at if row is not None else 0,
            (seen.last_modified_ms or 0) if seen is not None else 0,
        )

    def key(self, key: str, seen: Truth | None, row: LedgerRow | None) -> None:
        """One key of the snapshot's names (visible in the bucket or present in the ledger),
        after the previous one in key order."""
        if self.changed(seen, row) > self.cutoff:
            self.skip(key)
            return
        self.leaves(
            key,
            bucket_leaf(self.bucket, key, seen, self.targets, self.fields),
            ledger_leaf(self.bucket, key, row, self.targets, self.fields),
        )

    def skip(self, key: str) -> None:
        """A key changed after the cutoff: named in the leaves file, no leaf."""
        self.skipped += 1
        self._line({"key": key, "skipped": True})

    def _line(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry).encode() + b"\n"
        self.lines.write(line)
        self.digest.update(line)
        self.size += len(line)

    def leaves(self, key: str, left: Leaf, right: Leaf) -> None:
        """A key's two leaves (the bucket's, the ledger's)."""
        self.counts["bucket_present"] += left.state == PRESENT
        self.counts["ledger_present"] += right.state == PRESENT
        self.builder.add(key, left, right)
        bucket = _leaf_json(left)
        ledger = bucket if right is left else _leaf_json(right)
        self._line({"key": key, "bucket": bucket, "ledger": ledger})

    def attestation(
        self,
        *,
        stack: str,
        scope: dict[str, Any],
        prefix: str,
        source: str,
        taken_ms: int,
        margin_ms: int,
        inputs: dict[str, Any],
    ) -> Attestation:
        """The attestation of the keys fed (:func:`attest`'s result)."""
        builder = self.builder
        bucket_root, ledger_root = builder.roots()
        differences = [d.as_dict() for d in builder.differences()]
        document: dict[str, Any] = {
            "attestation": DOCUMENT,
            "stack": stack,
            "bucket": self.bucket,
            "prefix": prefix,
            "scope": scope,
            "snapshot": {
                "source": source,
                "taken_at": iso_ms(taken_ms),
                "taken_at_ms": taken_ms,
                "margin_s": margin_ms / 1000,
            },
            "tree": {"encoding": ENCODING, "hash": "sha256", "fanout": FANOUT},
            "fields": sorted(self.fields),
            "processors": [target_dict(t) for t in self.targets],
            "inputs": {
                **inputs,
                "leaves": {"sha256": self.digest.hexdigest(), "bytes": self.size},
            },
            "counts": {
                "keys": builder.count,
                **self.counts,
                "skipped_recent": self.skipped,
                "differing": len(differences),
            },
            "roots": {"bucket": bucket_root.hex(), "ledger": ledger_root.hex()},
            "equal": bucket_root == ledger_root,
            "differences": differences[:DOCUMENT_DIFFERENCES],
            "differences_total": len(differences),
        }
        return Attestation(document, self.lines, differences)


def document_key(document: dict[str, Any]) -> str:
    """The document's key in the stack's bucket: ``attestations/<bucket>/<snapshot time>.json``
    (one per snapshot: the same snapshot attested again writes a new version of it)."""
    stamp = datetime.fromtimestamp(document["snapshot"]["taken_at_ms"] / 1000, UTC)
    name = stamp.strftime("%Y%m%dT%H%M%S") + f"{document['snapshot']['taken_at_ms'] % 1000:03d}Z"
    prefix = document["prefix"]
    tail = f"{name}-{hashlib.sha256(prefix.encode()).hexdigest()[:8]}" if prefix else name
    return f"{ROOT}/{document['bucket']}/{tail}.json"


def document_bytes(document: dict[str, Any]) -> bytes:
    """The document as stored: sorted keys, two-space indent, a final newline (its SHA-256 is
    over these bytes)."""
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()


def recompute(document: dict[str, Any], leaves: bytes) -> dict[str, Any]:
    """Both roots from a leaves file, checked against ``document``.

    Returns
    -------
    dict
        ``leaves_sha256_matches``, ``roots`` (recomputed), ``match`` (roots equal the
        document's and the file is the one named), ``differences`` (keys whose leaves differ).
    """
    bucket = document["bucket"]
    builder = PairBuilder()
    for line in leaves.splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        if entry.get("skipped"):
            continue
        key = entry["key"]
        builder.add(
            key,
            leaf_from_json(bucket, key, entry["bucket"]),
            leaf_from_json(bucket, key, entry["ledger"]),
        )
    left, right = builder.roots()
    sha_ok = hashlib.sha256(leaves).hexdigest() == document["inputs"]["leaves"]["sha256"]
    roots = {"bucket": left.hex(), "ledger": right.hex()}
    return {
        "leaves_sha256_matches": sha_ok,
        "roots": roots,
        "match": sha_ok and roots == document["roots"],
        "differences": [d.as_dict() for d in builder.differences()],
    }


def recompute_bucket_root(
    document: dict[str, Any], leaves: bytes, truth: dict[str, Truth]
) -> tuple[str, list[str]]:
    """The bucket's root (hex) from the bucket's state ``truth`` (an inventory report read
    again) over the keys and skips of the leaves file, and the keys visible in ``truth`` that
    the leaves file does not name (none when it is the snapshot's)."""
    bucket = document["bucket"]
    targets = [target_of(t) for t in document["processors"]]
    fields = set(document["fields"])
    builder = PairBuilder()
    named: set[str] = set()
    for line in leaves.splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        key = entry["key"]
        named.add(key)
        if entry.get("skipped"):
            continue
        leaf = bucket_leaf(bucket, key, truth.get(key), targets, fields)
        builder.add(key, leaf, leaf)
    unnamed = sorted(k for k, t in truth.items() if t.visible and k not in named)
    return builder.roots()[0].hex(), unnamed
