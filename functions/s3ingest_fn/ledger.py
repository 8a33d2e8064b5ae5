"""The DynamoDB ledger adapter: one row per (bucket, decoded key).

Row layout (attribute names are part of the product's interface: the CLI and reconciliation read
them):

=============  ====  ==========================================================================
pk             S     ``<bucket>/<key>`` (bucket names cannot contain ``/``, so this is unique)
bucket, key    S     bucket name and decoded key (CONTRACT C1)
raw_key        S     the key as last received on the wire
state          S     ``present`` or ``deleted`` (a tombstone, CONTRACT C6)
seq            S     highest applied sequencer, normalised (see :mod:`sequencer`); absent when
                     only observations touched the row
raw_seq        S     that sequencer as received
observed       BOOL  true when the state came from reading the bucket (C7), so it may be newer
                     than ``seq``
version_id     S     current version (absent: unversioned or null version)
etag, size           current ETag (no quotes) and size
rev            N     revision, +1 on every write (optimistic concurrency for observations)
event_name     S     what last changed the row; ``reason``: why it was applied
source         S     ``live``, ``replay``, ``repair`` or ``backfill``
updated_at     N     epoch milliseconds of the last write
expires_at     N     epoch seconds; only on tombstones (DynamoDB TTL)
h0, h1, h2     M     the last three applied decisions, newest first: ``seq``, ``event``,
                     ``reason``, ``source``, ``at`` (epoch ms), ``state``; NULL until filled.
                     Skipped events (duplicate, stale) write nothing (CONTRACT C5); they are
                     explained by the row's ``seq`` and this history, and logged one line each.
op             S     what the last write was: ``apply`` (a change was applied: the change
                     stream publishes exactly these), ``claim`` (an effect was re-claimed),
                     ``release`` (a failed effect gave its lease up), ``commit`` (an effect
                     was committed) or ``seq`` (an event moved the sequencer but the row
                     already held its state: no new change)
chg_id         S     deterministic id of the applied change (:func:`effects.change_id`)
chg_seq        S     that change's own sequencer as received; absent when the change is an
                     observation (``raw_seq`` may then be an older event's)
fx             S     effect of the applied change (only with a processor): ``pending``,
                     ``done`` or ``superseded`` (CONTRACT C11, :mod:`s3ingest_fn.effects`)
fx_token       N     fencing token of the effect's claim (the row's ``rev`` when claimed)
fx_lease       N     epoch ms until which the claiming worker may still run; removed on commit
fx_done        S     the change id (``chg_id``) whose effect last completed (``done``): the
                     state the effect output describes. Behind the row (:func:`effect_behind`)
                     when the row's change ended ``superseded`` and no newer change has been
                     applied since: reconciliation re-runs it (CONTRACT C11, C12)
=============  ====  ==========================================================================

Writes use ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` so a rejected conditional write tells
duplicate from stale without a second request (CONTRACT C5;
https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from s3ingest_fn.effects import DONE, PENDING, SUPERSEDED, Claim, change_id
from s3ingest_fn.model import TransientError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient  # pragma: no cover

PRESENT = "present"
DELETED = "deleted"
#: Applied decisions kept on a row (``h0`` newest). Three compact entries keep a typical row
#: under 1 KB, so a write stays one write request unit.
HISTORY_SLOTS = 3


def effect_behind(row: Mapping[str, Any]) -> bool:
    """Whether the row's effect has not completed for the row's current change (CONTRACT C11).

    True when the change's effect ended ``superseded`` (its pinned read found newer bytes) and
    the row still holds that change: a superseded effect is final only once a newer change of
    the key has been applied (that write claims the row's effect anew, so ``fx`` is then the
    newer change's). A ``done`` effect is always the row's change's (``fx_done`` = ``chg_id``):
    every write that changes ``chg_id`` claims the effect or removes ``fx``. Rows without
    ``fx`` (no processor when they were written) are never behind; a ``pending`` effect is
    counted apart (reconciliation's ``pending_effects``).
    """
    return row.get("fx") == SUPERSEDED


def row_pk(bucket: str, key: str) -> str:
    """Partition key of a ledger row (CONTRACT C1: two buckets never share a row)."""
    return f"{bucket}/{key}"


@dataclass(frozen=True)
class RowState:
    """The object state a write records.

    ``present=False`` makes the row a tombstone; ``version_id``/``etag``/``size`` describe the
    current version when present.
    """

    present: bool
    version_id: str | None = None
    etag: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class WriteMeta:
    """Bookkeeping written with a state: who changed the row and why."""

    bucket: str
    key: str
    raw_key: str
    event_name: str
    reason: str
    source: str
    sequencer: str | None = None
    raw_sequencer: str | None = None


@dataclass(frozen=True)
class WriteResult:
    """Result of a conditional write: ``applied``, or the row that made the condition fail."""

    applied: bool
    old: dict[str, Any] | None = None
    #: The claim's fencing token, when the write claimed an effect.
    token: int | None = None
    #: The applied change's id (``chg_id``), when applied.
    change_id: str | None = None


class DynamoLedger:
    """Ledger rows in one DynamoDB table.

    Parameters
    ----------
    client : DynamoDBClient
        A boto3 DynamoDB client (injected: tests pass one bound to the emulator).
    table_name : str
    tombstone_ttl_seconds : int
        Lifetime of a tombstone; ``0`` keeps tombstones for ever (CONTRACT C6).
    clock : callable, optional
        Returns epoch seconds (float); injectable for tests.
    """

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        tombstone_ttl_seconds: int,
        clock: Any = time.time,
    ) -> None:
        self._ddb = client
        self._table = table_name
        self._ttl = tombstone_ttl_seconds
        self._clock = clock

    def get(self, bucket: str, key: str) -> dict[str, Any] | None:
        """Strongly consistent read of a row, as plain Python values, or None.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        try:
            resp = self._ddb.get_item(
                TableName=self._table, Key={"pk": {"S": row_pk(bucket, key)}}, ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as exc:
            raise _transient(exc) from exc
        item = resp.get("Item")
        return from_item(item) if item else None

    def write_sequenced(
        self,
        state: RowState,
        meta: WriteMeta,
        *,
        observed: bool,
        require_exact: bool,
        expected_rev: int | None = None,
        claim: Claim | None = None,
        same_change: bool = False,
        state_is: bool | None = None,
    ) -> WriteResult:
        """Record ``state`` at ``meta.sequencer`` if that sequencer is newer than the row's.

        One UpdateItem request. Its condition: the row does not exist, or its ``seq`` is absent or
        lower than the incoming one; with ``require_exact`` also the row must not hold an observed
        state (C7: a sequenced event is verified against the bucket before it is applied over an
        observation); with ``expected_rev`` also the row's revision must be unchanged. With a
        ``claim``, the same write claims the change's effect, and needs no live lease on the row.
        With ``same_change`` (the row already holds ``state``: the caller either read the row and
        passes ``expected_rev``, or passes ``state_is=True``), only the sequencer and bookkeeping
        move: the row keeps its change id and effect, and the write is not a new change
        (``op=seq``: not published, no effect).

        Returns
        -------
        WriteResult
            ``applied=False`` with the old row (from ``ALL_OLD``) when the condition failed.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        if meta.sequencer is None:
            raise ValueError("write_sequenced needs a sequencer")
        clauses = ["(attribute_not_exists(#seq) OR #seq < :in_seq)"]
        values: dict[str, Any] = {":in_seq": {"S": meta.sequencer}}
        if require_exact:
            clauses.append("(attribute_not_exists(#observed) OR #observed = :false)")
            values[":false"] = {"BOOL": False}
        if expected_rev is not None:
            clauses.append("#rev = :expected_rev")
            values[":expected_rev"] = {"N": str(expected_rev)}
        inner = clauses[0] if len(clauses) == 1 else "(" + " AND ".join(clauses) + ")"
        cond = "attribute_not_exists(#pk) OR " + inner
        if state_is is not None:
            held = _state_equals(state, values)
            cond = f"({cond}) AND " + (held if state_is else f"(NOT {held})")
        return self._update(
            state,
            meta,
            observed=observed,
            condition=cond,
            values=values,
            claim=claim,
            same_change=same_change,
            change_key=meta.sequencer,
        )

    def write_observation(
        self, state: RowState, meta: WriteMeta, expected_rev: int | None, claim: Claim | None = None
    ) -> WriteResult:
        """Record an observed state (C7) if the row has not moved since it was read.

        ``expected_rev=None`` means the row did not exist when read. The row's ``seq`` is kept.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        if expected_rev is None:
            cond, values = "attribute_not_exists(#pk)", {}
        else:
            cond, values = "#rev = :expected_rev", {":expected_rev": {"N": str(expected_rev)}}
        # An observation has no sequencer: its change is named by the revision it creates, so
        # the same state observed again after another change is a new change. A row created by
        # an observation is named by the time too: a tombstone row expires (TTL) and a later
        # row of the key starts again from revision 1.
        return self._update(
            state,
            meta,
            observed=True,
            condition=cond,
            values=values,
            claim=claim,
            change_key=(
                f"obs@{expected_rev + 1}"
                if expected_rev is not None
                else f"obs@new@{int(self._clock() * 1000)}"
            ),
        )

    def reclaim(self, bucket: str, key: str, old_token: int, claim: Claim) -> WriteResult:
        """Take over the row's effect: a pending one whose lease has expired (its worker crashed
        or timed out), or one that ended ``superseded`` while the row still holds its change
        (:func:`effect_behind`; the caller has verified the bucket shows the row's state).

        One UpdateItem, conditional on the row still holding that claim (``fx_token`` =
        ``old_token``), pending with an expired lease or superseded. The effect becomes
        ``pending`` again; the new token is the row's new revision.

        Returns
        -------
        WriteResult
            ``applied`` with the new ``token``, or the row that made the condition fail.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._call(
            bucket,
            key,
            {
                "UpdateExpression": "SET #rev = if_not_exists(#rev, :zero) + :one, "
                "#fx_token = if_not_exists(#rev, :zero) + :one, "
                "#fx_lease = :lease, #op = :claim, #fx = :pending",
                "ConditionExpression": "#fx_token = :old AND ((#fx = :pending AND #fx_lease < :now)"
                " OR #fx = :superseded)",
                "ExpressionAttributeNames": {
                    f"#{n}": n for n in ("rev", "fx_token", "fx_lease", "op", "fx")
                },
                "ExpressionAttributeValues": {
                    ":zero": {"N": "0"},
                    ":one": {"N": "1"},
                    ":claim": {"S": "claim"},
                    ":lease": {"N": str(claim.lease_until_ms)},
                    ":pending": {"S": PENDING},
                    ":superseded": {"S": SUPERSEDED},
                    ":old": {"N": str(old_token)},
                    ":now": {"N": str(claim.now_ms)},
                },
                "ReturnValues": "UPDATED_NEW",
            },
        )

    def finish_effect(self, bucket: str, key: str, token: int, status: str = DONE) -> bool:
        """Commit an effect (``status``: ``done`` or ``superseded``) if ``token`` still holds the
        claim; removes the lease; ``done`` also records the change it completed for
        (``fx_done``). One UpdateItem.

        Returns
        -------
        bool
            False when another worker claimed the row since (this worker's lease expired).

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        names = {"#fx": "fx", "#op": "op", "#fx_lease": "fx_lease", "#fx_token": "fx_token"}
        expr = "SET #fx = :status, #op = :commit"
        if status == DONE:
            expr += ", #fx_done = #chg_id"
            names.update({"#fx_done": "fx_done", "#chg_id": "chg_id"})
        return self._call(
            bucket,
            key,
            {
                "UpdateExpression": expr + " REMOVE #fx_lease",
                "ConditionExpression": "#fx_token = :token",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": {
                    ":status": {"S": status},
                    ":commit": {"S": "commit"},
                    ":token": {"N": str(token)},
                },
            },
        ).applied

    def release(self, bucket: str, key: str, token: int) -> bool:
        """End a claim's lease now (the processor failed): the retry may re-claim at once.

        Returns
        -------
        bool
            False when the claim was no longer this token's.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._call(
            bucket,
            key,
            {
                # op changes too, so the change stream (op = apply) does not publish it again
                "UpdateExpression": "SET #fx_lease = :zero, #op = :release",
                "ConditionExpression": "#fx_token = :token AND #fx = :pending",
                "ExpressionAttributeNames": {
                    "#fx_lease": "fx_lease",
                    "#fx_token": "fx_token",
                    "#fx": "fx",
                    "#op": "op",
                },
                "ExpressionAttributeValues": {
                    ":zero": {"N": "0"},
                    ":token": {"N": str(token)},
                    ":pending": {"S": PENDING},
                    ":release": {"S": "release"},
                },
            },
        ).applied

    def _call(self, bucket: str, key: str, request: dict[str, Any]) -> WriteResult:
        try:
            resp = self._ddb.update_item(
                TableName=self._table,
                Key={"pk": {"S": row_pk(bucket, key)}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **request,
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                item = exc.response.get("Item")
                return WriteResult(applied=False, old=from_item(item) if item else None)
            raise _transient(exc) from exc
        except BotoCoreError as exc:
            raise _transient(exc) from exc
        token = resp.get("Attributes", {}).get("fx_token", {}).get("N")
        return WriteResult(applied=True, token=int(token) if token is not None else None)

    def _update(
        self,
        state: RowState,
        meta: WriteMeta,
        *,
        observed: bool,
        condition: str,
        values: dict[str, Any],
        change_key: str | None,
        claim: Claim | None = None,
        same_change: bool = False,
    ) -> WriteResult:
        now = self._clock()
        sets = {
            "bucket": {"S": meta.bucket},
            "key": {"S": meta.key},
            "raw_key": {"S": meta.raw_key},
            "state": {"S": PRESENT if state.present else DELETED},
            "observed": {"BOOL": observed},
            "event_name": {"S": meta.event_name},
            "reason": {"S": meta.reason},
            "source": {"S": meta.source},
            "updated_at": {"N": str(int(now * 1000))},
            "op": {"S": "seq" if same_change else "apply"},
        }
        removes: list[str] = []
        chg: str | None = None
        if same_change:
            if claim is not None:
                raise ValueError("a same-change write claims no effect")
        else:
            chg = change_id(
                meta.bucket, meta.key, change_key, state.present, state.version_id, state.etag
            )
            sets["chg_id"] = {"S": chg}
            if meta.sequencer is not None:  # the applied change's own sequencer
                sets["chg_seq"] = {"S": meta.raw_sequencer or meta.sequencer}
            else:
                removes.append("chg_seq")
            if claim is not None:
                sets["fx"] = {"S": PENDING}
                sets["fx_lease"] = {"N": str(claim.lease_until_ms)}
                values[":now"] = {"N": str(claim.now_ms)}
                # a live lease of another change's effect blocks this write (module effects)
                condition = (
                    f"({condition}) AND (attribute_not_exists(#fx_lease) OR #fx_lease < :now)"
                )
            else:
                removes.extend(("fx", "fx_lease", "fx_token", "fx_done"))
        if meta.sequencer is not None:
            sets["seq"] = {"S": meta.sequencer}
            sets["raw_seq"] = {"S": meta.raw_sequencer or meta.sequencer}
        for attr, text in (("version_id", state.version_id), ("etag", state.etag)):
            if state.present and text is not None:
                sets[attr] = {"S": text}
            else:
                removes.append(attr)
        if state.present and state.size is not None:
            sets["size"] = {"N": str(state.size)}
        else:
            removes.append("size")
        if not state.present and self._ttl > 0:
            sets["expires_at"] = {"N": str(int(now) + self._ttl)}
        else:
            removes.append("expires_at")
        # Every attribute goes through a "#name" placeholder: several (key, size, state, source)
        # are DynamoDB reserved words.
        for name, value in sets.items():
            values[f":{name}"] = value
        values[":one"], values[":zero"] = {"N": "1"}, {"N": "0"}
        expr = "SET " + ", ".join(f"#{name} = :{name}" for name in sets)
        expr += ", #rev = if_not_exists(#rev, :zero) + :one"
        if claim is not None:
            expr += ", #fx_token = if_not_exists(#rev, :zero) + :one"
        # Decision history: the last HISTORY_SLOTS applied decisions, newest in h0, shifted in
        # the same request (operands read the item as it was before this update).
        values[":decision"] = {
            "M": {
                "seq": {"S": meta.raw_sequencer or meta.sequencer or "-"},
                "event": {"S": meta.event_name[:200]},
                "reason": {"S": meta.reason},
                "source": {"S": meta.source},
                "at": {"N": str(int(now * 1000))},
                "state": sets["state"],
            }
        }
        values[":nodecision"] = {"NULL": True}
        for i in range(HISTORY_SLOTS - 1, 0, -1):
            expr += f", #h{i} = if_not_exists(#h{i - 1}, :nodecision)"
        expr += ", #h0 = :decision"
        if removes:
            expr += " REMOVE " + ", ".join(f"#{name}" for name in removes)
        used = expr + " " + condition
        history = tuple(f"h{i}" for i in range(HISTORY_SLOTS))
        names = {
            f"#{n}": n
            for n in (
                *sets,
                *removes,
                "rev",
                "pk",
                "seq",
                "observed",
                *history,
                "fx_token",
                "fx_lease",
            )
            if re.search(rf"#{n}\b", used)
        }
        request: dict[str, Any] = {
            "UpdateExpression": expr,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        if claim is not None:
            request["ReturnValues"] = "UPDATED_NEW"
        result = self._call(meta.bucket, meta.key, request)
        if result.applied:
            return WriteResult(applied=True, token=result.token, change_id=chg)
        return result


def _state_equals(state: RowState, values: dict[str, Any]) -> str:
    """A condition: the row holds ``state`` (same presence, version id and ETag)."""
    if not state.present:
        values[":st_deleted"] = {"S": DELETED}
        return "#state = :st_deleted"
    values[":st_present"] = {"S": PRESENT}
    clauses = ["#state = :st_present"]
    for attr, text in (("version_id", state.version_id), ("etag", state.etag)):
        if text is None:
            clauses.append(f"attribute_not_exists(#{attr})")
        else:
            values[f":st_{attr}"] = {"S": text}
            clauses.append(f"#{attr} = :st_{attr}")
    return "(" + " AND ".join(clauses) + ")"


def _transient(exc: Exception) -> TransientError:
    """Every DynamoDB failure but a failed condition is retried; SQS redrive bounds the retries."""
    if isinstance(exc, ClientError):
        return TransientError(f"dynamodb: {exc.response.get('Error', {}).get('Code', 'unknown')}")
    return TransientError(f"dynamodb: {exc.__class__.__name__}")


def from_item(item: dict[str, Any]) -> dict[str, Any]:
    """Convert a DynamoDB attribute-value map of a ledger row to plain Python values."""
    out: dict[str, Any] = {}
    for name, av in item.items():
        ((typ, val),) = av.items()
        if typ == "N":
            out[name] = int(val) if val.lstrip("-").isdigit() else float(val)
        elif typ in ("S", "BOOL"):
            out[name] = val
        elif typ == "NULL":
            out[name] = None
        elif typ == "M":
            out[name] = from_item(val)
        else:
            out[name] = val
    return out
