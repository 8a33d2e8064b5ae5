"""Merkle trees of a completeness attestation (issue 38): one over the bucket's side of a
reconciliation snapshot, one over the ledger's, leaves in key order, so that equal roots mean
every key of the snapshot is in the ledger with the bucket's version and ETag and every named
processor's effect is done at its version. ``docs/attestation.md`` specifies the bytes.

**Leaf.** Fields, in order: the encoding's name (:data:`ENCODING`), bucket, key, version id,
ETag, state (:data:`PRESENT` or :data:`ABSENT`), then for each processor, sorted by name, its
name and its value (the version whose effect is done, :data:`NOT_DONE`, or :data:`NOT_CONCERNED`).
Each field is UTF-8 (``surrogatepass``), prefixed with its length in bytes as 4 bytes big-endian;
the leaf is the 4-byte big-endian count of fields followed by the fields. A missing value is
the empty string.

**Hashes.** SHA-256 with the domain separation of RFC 6962 section 2.1 (Certificate
Transparency): a leaf's hash is ``SHA-256(0x00 || leaf)``, a node's ``SHA-256(0x01 || h1 || ...
|| hm)`` over its children's hashes, ``1 <= m <=`` :data:`FANOUT`. A leaf can never be taken
for a node, nor a node for a leaf.

**Tree.** Level 0 is the leaves' hashes in key order (UTF-8 bytes, S3's listing order). Level
``i + 1`` hashes each run of :data:`FANOUT` consecutive level-``i`` hashes, the last run
possibly shorter (one child included); the first level with one hash holds the root. No leaf:
the root is ``SHA-256()`` (RFC 6962's empty tree); one leaf: its hash. The leaf at index ``j``
is reached from the root by the base-``FANOUT`` digits of ``j`` (:func:`path_of`).

**Partitions.** :class:`Fragment` builds the tree of a run of consecutive leaves starting at a
known index, in ``O(FANOUT x depth)`` memory (the nodes whose group is still open at either
edge); :meth:`Fragment.combine` joins the fragments of adjacent runs, in order, and
:meth:`Fragment.root` of the joined fragment equals the whole build's. A partition's first index
is the count of leaves before it (each partition counts its leaves before any is hashed).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime


def iso_ms(ms: int) -> str:
    """A document's time: epoch milliseconds ``ms`` as ISO 8601 UTC with microseconds
    (``2026-03-01T00:00:00.000000Z``)."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


#: The leaf encoding's name, the leaf's first field: a later encoding gets another name.
ENCODING = "s3ingest-attestation-leaf/1"
#: Children of a node at most.
FANOUT = 16
#: Domain separation prefixes (RFC 6962 section 2.1).
LEAF_PREFIX, NODE_PREFIX = b"\x00", b"\x01"
#: A leaf's state: the side holds the key (visible in the bucket; present in the ledger), or not.
PRESENT, ABSENT = "present", "absent"
#: A processor's value when the key does not concern it (its filters, or no object).
NOT_CONCERNED = "-"
#: A processor's value on the ledger's side when no effect of it is done for the row's change.
NOT_DONE = "none"
#: ``SHA-256()``: the root of a tree without leaves.
EMPTY_ROOT = hashlib.sha256(b"").digest()


def _field(value: str) -> bytes:
    raw = value.encode("utf-8", "surrogatepass")
    return len(raw).to_bytes(4, "big") + raw


@dataclass(frozen=True)
class Leaf:
    """One key as one side of a snapshot holds it.

    Attributes
    ----------
    bucket, key : str
    version_id, etag : str
        Empty when the side holds none (an absent key, an unversioned bucket, a source
        without the column); the ETag without quotes.
    state : str
        :data:`PRESENT` or :data:`ABSENT`.
    processors : tuple of (str, str)
        ``(name, value)`` per processor attested, sorted by name.
    """

    bucket: str
    key: str
    version_id: str = ""
    etag: str = ""
    state: str = PRESENT
    processors: tuple[tuple[str, str], ...] = field(default=())

    def encode(self) -> bytes:
        """The leaf's bytes (the module's docstring)."""
        fields = [ENCODING, self.bucket, self.key, self.version_id, self.etag, self.state]
        for name, value in sorted(self.processors):
            fields += [name, value]
        return len(fields).to_bytes(4, "big") + b"".join(_field(f) for f in fields)

    def hash(self) -> bytes:
        """``SHA-256(0x00 || leaf)``, 32 bytes."""
        return leaf_hash(self.encode())


def absent(bucket: str, key: str, processors: Iterable[str]) -> Leaf:
    """The leaf of a key a side does not hold: no version or ETag, every processor
    :data:`NOT_CONCERNED`."""
    return Leaf(bucket, key, state=ABSENT, processors=tuple((p, NOT_CONCERNED) for p in processors))


def leaf_hash(leaf: bytes) -> bytes:
    """``SHA-256(0x00 || leaf)``."""
    return hashlib.sha256(LEAF_PREFIX + leaf).digest()


def node_hash(children: Sequence[bytes]) -> bytes:
    """``SHA-256(0x01 || children...)`` over 1 to :data:`FANOUT` child hashes."""
    if not 1 <= len(children) <= FANOUT:
        raise ValueError(f"a node has 1 to {FANOUT} children, not {len(children)}")
    return hashlib.sha256(NODE_PREFIX + b"".join(children)).digest()


def key_order(key: str) -> bytes:
    """A key's sort key: its UTF-8 bytes (S3's listing order)."""
    return key.encode("utf-8", "surrogatepass")


def levels_of(leaf_hashes: Sequence[bytes]) -> list[list[bytes]]:
    """Every level of the tree over ``leaf_hashes`` (level 0 first, the root's level last):
    the tree held whole, ``O(n)`` memory (:class:`Fragment` builds the root without it)."""
    levels = [list(leaf_hashes)]
    if not levels[0]:
        return [[EMPTY_ROOT]]
    while len(levels[-1]) > 1:
        below = levels[-1]
        levels.append([node_hash(below[i : i + FANOUT]) for i in range(0, len(below), FANOUT)])
    return levels


def root_of(leaf_hashes: Sequence[bytes]) -> bytes:
    """The root over ``leaf_hashes`` (by whole levels)."""
    return levels_of(leaf_hashes)[-1][0]


def depth_of(count: int) -> int:
    """Levels above the leaves of a tree of ``count`` leaves (0 for one leaf or none)."""
    depth, width = 0, max(count, 1)
    while width > 1:
        width = -(-width // FANOUT)
        depth += 1
    return depth


def path_of(index: int, count: int) -> tuple[int, ...]:
    """The child indices from the root to leaf ``index`` of a tree of ``count`` leaves."""
    if not 0 <= index < count:
        raise ValueError(f"leaf {index} of {count}")
    digits = []
    for _ in range(depth_of(count)):
        index, digit = divmod(index, FANOUT)
        digits.append(digit)
    return tuple(reversed(digits))


class Fragment:
    """The tree of a run of consecutive leaves, built leaf by leaf.

    Holds, per level, the nodes complete within the run whose parent is not (``O(FANOUT x
    depth)``: at most ``FANOUT - 1`` at each edge per level).

    Parameters
    ----------
    start : int
        Index of the run's first leaf in the whole sequence (0 for the first run).
    """

    def __init__(self, start: int = 0) -> None:
        if start < 0:
            raise ValueError("start must be >= 0")
        self.start = start
        self.count = 0
        #: levels[i]: (index at level i, hash), ascending.
        self.levels: list[list[tuple[int, bytes]]] = []

    def add(self, leaf: bytes) -> None:
        """Append one leaf hash (:meth:`Leaf.hash`)."""
        self._put(0, self.start + self.count, leaf)
        self.count += 1

    def extend(self, hashes: Iterable[bytes]) -> Fragment:
        """Append leaf hashes; return self."""
        for h in hashes:
            self.add(h)
        return self

    def _put(self, level: int, index: int, digest: bytes) -> None:
        while True:
            if len(self.levels) == level:
                self.levels.append([])
            nodes = self.levels[level]
            nodes.append((index, digest))
            first = index - FANOUT + 1
            if index % FANOUT != FANOUT - 1 or len(nodes) < FANOUT or nodes[-FANOUT][0] != first:
                return
            children = [h for _, h in nodes[-FANOUT:]]
            del nodes[-FANOUT:]
            level, index, digest = level + 1, index // FANOUT, node_hash(children)

    def held(self) -> int:
        """Hashes held (the memory bound's measure)."""
        return sum(len(nodes) for nodes in self.levels)

    def combine(self, after: Fragment) -> Fragment:
        """This run followed by ``after`` (which must start where this one ends), as a new
        fragment.

        Raises
        ------
        ValueError
            When ``after`` does not start at this run's end.
        """
        if after.start != self.start + self.count:
            raise ValueError(f"the next run starts at {after.start}, not {self.start + self.count}")
        joined = Fragment(self.start)
        joined.count = self.count + after.count
        carries: list[tuple[int, bytes]] = []
        level = 0
        while level < max(len(self.levels), len(after.levels)) or carries:
            mine = self.levels[level] if level < len(self.levels) else []
            theirs = after.levels[level] if level < len(after.levels) else []
            # this run's nodes end before the boundary, the carries from below straddle it,
            # the next run's begin after it: ascending as they come
            kept, carries = _collapse([*mine, *carries, *theirs])
            joined.levels.append(kept)
            level += 1
        while joined.levels and not joined.levels[-1]:
            joined.levels.pop()
        return joined

    def root(self) -> bytes:
        """The root of the whole sequence, when this fragment covers it from its first leaf.

        Raises
        ------
        ValueError
            When the fragment does not start at 0.
        """
        if self.start != 0:
            raise ValueError("the root needs the fragment of the whole sequence (start 0)")
        if self.count == 0:
            return EMPTY_ROOT
        carry: list[tuple[int, bytes]] = []
        levels = [list(nodes) for nodes in self.levels]
        level = 0
        while True:
            if level == len(levels):
                levels.append([])
            nodes = levels[level] + carry
            top = all(not above for above in levels[level + 1 :])
            if top and len(nodes) == 1:
                return nodes[0][1]
            carry = [(nodes[0][0] // FANOUT, node_hash([h for _, h in nodes]))] if nodes else []
            level += 1


def _collapse(
    nodes: list[tuple[int, bytes]],
) -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]]]:
    """Ascending nodes of one level: those whose group is incomplete, and the parents of the
    complete groups (:data:`FANOUT` nodes with one parent)."""
    kept: list[tuple[int, bytes]] = []
    parents: list[tuple[int, bytes]] = []
    i = 0
    while i < len(nodes):
        parent = nodes[i][0] // FANOUT
        j = i
        while j < len(nodes) and nodes[j][0] // FANOUT == parent:
            j += 1
        if j - i == FANOUT:
            parents.append((parent, node_hash([h for _, h in nodes[i:j]])))
        else:
            kept.extend(nodes[i:j])
        i = j
    return kept, parents


def combine(fragments: Sequence[Fragment]) -> Fragment:
    """The fragments of adjacent runs, in order, joined into one.

    Raises
    ------
    ValueError
        When there are none, or a run does not start where the one before ends.
    """
    if not fragments:
        raise ValueError("no fragment")
    joined = fragments[0]
    for after in fragments[1:]:
        joined = joined.combine(after)
    return joined


@dataclass(frozen=True)
class Difference:
    """A key whose leaves differ: its index in the sequence and its path from the root."""

    index: int
    key: str
    path: tuple[int, ...]

    def as_dict(self) -> dict[str, object]:
        """JSON-ready values."""
        return {"key": self.key, "index": self.index, "path": list(self.path)}


def compare(
    left: Sequence[Sequence[bytes]], right: Sequence[Sequence[bytes]], keys: Sequence[str]
) -> list[Difference]:
    """Every key whose leaves differ between two trees over the same key sequence, found by
    descending from the roots through the nodes that differ only.

    Parameters
    ----------
    left, right : list of levels
        :func:`levels_of` of each side's leaf hashes.
    keys : sequence of str
        The key of each leaf index.

    Raises
    ------
    ValueError
        When the trees have another number of leaves than ``keys``.
    """
    count = len(keys)
    for levels in (left, right):
        if len(levels[0]) != count and not (count == 0 and levels[0] == [EMPTY_ROOT]):
            raise ValueError("the trees are not over the same key sequence")
    if count == 0:
        return []
    top = len(left) - 1
    frontier = [0] if left[top][0] != right[top][0] else []
    for level in range(top, 0, -1):
        below_l, below_r = left[level - 1], right[level - 1]
        frontier = [
            child
            for node in frontier
            for child in range(node * FANOUT, min((node + 1) * FANOUT, len(below_l)))
            if below_l[child] != below_r[child]
        ]
    return [Difference(i, keys[i], path_of(i, count)) for i in frontier]


class PairBuilder:
    """Both sides' trees over one key sequence, built in one pass, leaf pair by leaf pair in
    key order, naming each key whose leaves differ (its path computed at the end, when the
    depth is known).

    Parameters
    ----------
    start : int
        The index of the first pair (a partition's).
    """

    def __init__(self, start: int = 0) -> None:
        self.left, self.right = Fragment(start), Fragment(start)
        self._differing: list[tuple[int, str]] = []
        self._last: bytes | None = None

    def add(self, key: str, left: Leaf, right: Leaf) -> None:
        """Append one key's leaves.

        Raises
        ------
        ValueError
            When ``key`` does not sort after the previous key (UTF-8 bytes).
        """
        order = key_order(key)
        if self._last is not None and order <= self._last:
            raise ValueError(f"keys out of order at {key!r}")
        self._last = order
        lh = left.hash()
        rh = lh if right is left else right.hash()  # one leaf for both sides: hashed once
        if lh != rh:
            self._differing.append((self.left.start + self.left.count, key))
        self.left.add(lh)
        self.right.add(rh)

    @property
    def count(self) -> int:
        """Pairs added."""
        return self.left.count

    def roots(self) -> tuple[bytes, bytes]:
        """Both roots (a builder started at 0)."""
        return self.left.root(), self.right.root()

    def differences(self, total: int | None = None) -> list[Difference]:
        """The keys whose leaves differ, with their paths in a tree of ``total`` leaves (this
        builder's count by default)."""
        count = self.left.start + self.left.count if total is None else total
        return [Difference(i, k, path_of(i, count)) for i, k in self._differing]
