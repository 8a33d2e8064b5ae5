"""What a write that claimed effects says before they run (CONTRACT C11): whether it returned
every queue it joined, and whether it was the key's first write.

A delete of a key the ledger never held (no row before it: a forged delete, or a delete that
arrived before its object's create) writes the tombstone that orders the key's later events
(C6), but no processor ever ran for the key, so there is nothing downstream to remove: its
claimed removal effects are closed (:meth:`~s3ingest_fn.core.ports.Ledger.close`, the write
the commit would have cost) instead of run. The write's fencing token tells it without a read:
it is :func:`~s3ingest_fn.core.row.fencing_token` of the row's new revision, 1 only for a row
the write created.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from s3ingest_fn.core.model import TransientError
from s3ingest_fn.core.row import DEFAULT_PROCESSOR, Claim, WriteResult, fencing_token

if TYPE_CHECKING:
    from collections.abc import Sequence

    from s3ingest_fn.core.model import Result
    from s3ingest_fn.core.ports import Ledger

#: The effect status of a removal closed because the ledger never held the key.
NEVER_HELD = "not-run: key-never-held"


def check_queues(claim: Claim, write: WriteResult) -> None:
    """Raise :class:`TransientError` when the claiming write (``ALL_NEW``: the whole row)
    returned no queue of an ``every-change`` processor it joined: never expected."""
    missing = [name for name in claim.queued if name not in write.queues]
    if missing:
        raise TransientError(f"ledger: the claiming write returned no queue of {missing}")


def never_held(write: WriteResult, claim: Claim) -> bool:
    """Whether the applied, claiming ``write`` created the row (its new revision is 1)."""
    return write.token is not None and write.token == fencing_token(1, claim.now_ms)


def close(
    ledger: Ledger,
    result: Result,
    write: WriteResult,
    claim: Claim,
    configured: Sequence[str],
) -> Result:
    """Close the removal effects ``write`` claimed on a row it created (:func:`never_held`):
    none runs; ``result.extra["effect"]`` is :data:`NEVER_HELD` (per processor when named
    processors are ``configured``).

    Raises
    ------
    TransientError
        The ledger failed: the message is retried (the claim's lease ends with the invocation).
    """
    assert write.token is not None
    for name in claim.processors:
        ledger.close(str(result.bucket), str(result.key), write.token, name)
    result.extra.update({"change_id": write.change_id, "token": write.token})
    if tuple(configured) == (DEFAULT_PROCESSOR,):
        result.extra["effect"] = NEVER_HELD
    else:
        result.extra["effect"] = dict.fromkeys(claim.processors, NEVER_HELD)
    return result
