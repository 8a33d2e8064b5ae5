"""The ledger's operations (:class:`DynamoLedger`, the :class:`~s3ingest_fn.core.ports.Ledger`
port): a strongly consistent read, and one conditional UpdateItem per named operation, built by
:mod:`s3ingest_fn.adapters.dynamo_ledger.updates`.

Writes use ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` so a rejected conditional write tells
duplicate from stale without a second request (CONTRACT C5;
https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html). Every write
is conditional on the item not being legacy; a write refused by a legacy item rewrites it in the
compact layout first (:meth:`DynamoLedger._migrate`: same revision, fencing token, effect and
history; ``op=migrate``, so the change stream does not publish it again) and then retries.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from s3ingest_fn.adapters.dynamo_ledger.client import DynamoDBClient, _transient
from s3ingest_fn.adapters.dynamo_ledger.codec import _written, item_of, row_from_item
from s3ingest_fn.adapters.dynamo_ledger.layout import (
    _LEGACY_GUARDED,
    _LEGACY_MARK,
    _OP,
    _OP_MIGRATE,
    COUNTER_PREFIX,
    PARTITION_KEY,
    TTL_ATTRIBUTE,
    effect_attributes,
    row_pk,
)
from s3ingest_fn.adapters.dynamo_ledger.updates import (
    behind_claim_request,
    change_request,
    close_request,
    finish_request,
    forget_request,
    hold_request,
    observation_condition,
    reclaim_request,
    release_request,
    review_request,
    sequenced_condition,
)
from s3ingest_fn.core.model import TransientError
from s3ingest_fn.core.row import (
    DEFAULT_PROCESSOR,
    DONE,
    MAX_TRAIL,
    PENDING,
    TRAIL_SLOTS,
    Claim,
    Effect,
    Hold,
    LedgerRow,
    Review,
    RowState,
    WriteMeta,
    WriteResult,
    fencing_token,
)


class DynamoLedger:
    """Ledger rows in one DynamoDB table (the :class:`~s3ingest_fn.core.ports.Ledger` port).

    Parameters
    ----------
    client : DynamoDBClient
        A boto3 DynamoDB client (injected: tests pass one bound to the emulator).
    table_name : str
    tombstone_ttl_seconds : int
        Lifetime of a tombstone; ``0`` keeps tombstones for ever (CONTRACT C6).
    clock : callable, optional
        Returns epoch seconds (float); injectable for tests.
    trail : int
        Review decisions kept on a row (``trailLength``; 1 to
        :data:`~s3ingest_fn.core.row.MAX_TRAIL`).
    """

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        tombstone_ttl_seconds: int,
        clock: Callable[[], float] = time.time,
        trail: int = TRAIL_SLOTS,
    ) -> None:
        if not 1 <= trail <= MAX_TRAIL:
            raise ValueError(f"trail must be 1..{MAX_TRAIL} review decisions, got {trail}")
        self._ddb = client
        self._table = table_name
        self._ttl = tombstone_ttl_seconds
        self._clock = clock
        self._trail = trail

    def get(self, bucket: str, key: str) -> LedgerRow | None:
        """Strongly consistent read of a row, or None.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        try:
            resp = self._ddb.get_item(
                TableName=self._table,
                Key={PARTITION_KEY: {"S": row_pk(bucket, key)}},
                ConsistentRead=True,
            )
        except (ClientError, BotoCoreError) as exc:
            raise _transient(exc) from exc
        item = resp.get("Item")
        return row_from_item(item) if item else None

    # -- the named operations (see s3ingest_fn.core.ports.Ledger) -------------------------

    def apply_if_newer(
        self, state: RowState, meta: WriteMeta, claim: Claim | None = None
    ) -> WriteResult:
        """Apply an event's own state when its sequencer is newer and the row holds no
        observed state (C5, C7). One UpdateItem.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._sequenced(state, meta, observed=False, require_exact=True, claim=claim)

    def apply_verified(
        self,
        state: RowState,
        meta: WriteMeta,
        *,
        observed: bool,
        expected_rev: int,
        claim: Claim | None = None,
    ) -> WriteResult:
        """Apply a state verified against the bucket when the sequencer is newer and the
        revision is still ``expected_rev`` (C7). One UpdateItem.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._sequenced(
            state,
            meta,
            observed=observed,
            require_exact=False,
            expected_rev=expected_rev,
            claim=claim,
        )

    def apply_observed_at(
        self, state: RowState, meta: WriteMeta, claim: Claim | None = None
    ) -> WriteResult:
        """Record a state read from the bucket at an event's sequencer, as a new change, when
        the sequencer is newer and the row does not hold ``state`` (C4). One UpdateItem.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._sequenced(
            state, meta, observed=True, require_exact=False, claim=claim, state_is=False
        )

    def advance_sequencer(
        self,
        state: RowState,
        meta: WriteMeta,
        *,
        observed: bool,
        expected_rev: int | None = None,
    ) -> WriteResult:
        """Move only the sequencer and the bookkeeping of a row that holds ``state``
        (``op=seq``: no new change, not published, no effect), when the sequencer is newer and
        the revision is still ``expected_rev`` (or, None, the row holds ``state``).

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._sequenced(
            state,
            meta,
            observed=observed,
            require_exact=False,
            expected_rev=expected_rev,
            same_change=True,
            state_is=True if expected_rev is None else None,
        )

    def record_observation(
        self,
        state: RowState,
        meta: WriteMeta,
        expected_rev: int | None,
        claim: Claim | None = None,
    ) -> WriteResult:
        """Record an observed state (C7) if the row has not moved since it was read.

        ``expected_rev=None`` means the row did not exist when read. The row's sequencer is
        kept.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._observe(state, meta, expected_rev, claim)

    def reset_sequencer(
        self,
        state: RowState,
        meta: WriteMeta,
        expected_rev: int,
        claim: Claim | None = None,
        *,
        same_change: bool = False,
    ) -> WriteResult:
        """Record the bucket's ``state`` as an observation with the row's sequencer removed
        (a stored sequencer S3 cannot have sent: CONTRACT C5, C7), if the row is still at
        ``expected_rev``: a new change (``claim``), or, ``same_change``, only the bookkeeping of
        a row that already holds ``state`` (``op=seq``: not published, no effect). The decision
        (``meta.reason``, e.g. ``sequencer-reset: sequencer-length``) goes onto the history.
        One UpdateItem.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._observe(
            state, meta, expected_rev, claim, same_change=same_change, clear_sequencer=True
        )

    def _observe(
        self,
        state: RowState,
        meta: WriteMeta,
        expected_rev: int | None,
        claim: Claim | None,
        **write: bool,
    ) -> WriteResult:
        """The UpdateItem of an observation (:meth:`record_observation`,
        :meth:`reset_sequencer`), conditioned on the row's revision; ``write``: the flags of
        ``_update`` (``same_change``, ``clear_sequencer``)."""
        cond, values = observation_condition(expected_rev)
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
            **write,
        )

    def reclaim(
        self,
        bucket: str,
        key: str,
        old_token: int,
        claim: Claim,
        processor: str = DEFAULT_PROCESSOR,
    ) -> WriteResult:
        """Take over ``processor``'s effect on the row: a pending one whose lease has expired
        (its worker crashed or timed out), or one that ended ``superseded`` while the row still
        holds its change (the caller has verified the bucket shows the row's state).

        One UpdateItem, conditional on the effect still holding that claim (fencing token
        ``old_token``), pending with an expired lease or superseded (other processors' leases
        do not matter: a newer change would have replaced this token). The effect becomes
        ``pending`` again; the new token is the ``fencing_token`` of the row's new revision and
        ``claim.now_ms`` (:mod:`s3ingest_fn.core.row`); ``queues`` gives an
        ``every-change`` processor's waiting changes.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._call(
            bucket,
            key,
            reclaim_request(processor, old_token, claim),
            token_attribute=effect_attributes(processor)[1],
        )

    def finish(
        self,
        bucket: str,
        key: str,
        token: int,
        status: str = DONE,
        *,
        processor: str = DEFAULT_PROCESSOR,
        change_id: str | None = None,
        more: bool = False,
        version: int = 1,
        at: int | None = None,
    ) -> bool:
        """Commit ``processor``'s effect (``status``: ``done``, ``superseded`` or ``skipped``,
        the hold policy's answer) if ``token``
        still holds the claim; removes the lease; ``done`` also records the change it completed
        for (``change_id``, default the row's change) and the processor's ``version``, and
        marks the write as an effect done at ``at`` (epoch ms) for the change stream. One
        UpdateItem.

        ``more``: an ``every-change`` processor's queue holds more changes after this one: only
        this one leaves the queue and the claim goes on.

        Returns
        -------
        bool
            False when another worker claimed the row since (this worker's lease expired).

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        request = finish_request(processor, token, status, change_id, more, version, at)

        def own(row: LedgerRow) -> WriteResult | None:
            """A retried ``more`` commit refused because its first attempt removed the head."""
            effect = row.effect_of(processor)
            if not more or change_id is None or effect is None or effect.token != token:
                return None
            head = effect.queue[0].change_id if effect.queue else None
            return WriteResult(applied=True, old=row) if head != change_id else None

        return self._call(bucket, key, request, own=own).applied

    def claim_behind(
        self,
        bucket: str,
        key: str,
        processor: str,
        change_id: str | None,
        old_token: int | None,
        claim: Claim,
        version: int = 1,
    ) -> WriteResult:
        """Claim ``processor``'s effect of the row's change for a reprocess run (CONTRACT C11):
        one UpdateItem, conditional on the row being present and still holding ``change_id``
        and on the effect being as read (absent when ``old_token`` is None; else held by
        ``old_token`` and done under a version below ``version``, superseded, or pending with
        an expired lease). A refusal returns the row (``old``): a newer change was applied,
        another worker claimed it, or it is already current.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._call(
            bucket,
            key,
            behind_claim_request(processor, change_id, old_token, claim, version),
            token_attribute=effect_attributes(processor)[1],
        )

    def forget(self, bucket: str, key: str, processor: str) -> bool:
        """Remove ``processor``'s effect state from the row (a processor removed from the
        configuration). One UpdateItem.

        Returns
        -------
        bool
            False when the row has no state of ``processor``.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._call(bucket, key, forget_request(processor)).applied

    def close(self, bucket: str, key: str, token: int, processor: str) -> bool:
        """Remove ``processor``'s effect state but the change it last completed (``fd``), if
        ``token`` still holds it: an every-change processor whose last run (an older change)
        ended superseded while the row's change does not concern it. One UpdateItem.

        Returns
        -------
        bool
            False when the state changed since (another claim).

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._call(bucket, key, close_request(processor, token)).applied

    def release(
        self, bucket: str, key: str, token: int, processor: str = DEFAULT_PROCESSOR
    ) -> bool:
        """End ``processor``'s claim's lease now (the processor failed): the retry may
        re-claim at once.

        Returns
        -------
        bool
            False when the claim was no longer this token's.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._call(bucket, key, release_request(processor, token)).applied

    def hold(
        self,
        bucket: str,
        key: str,
        token: int,
        processor: str,
        hold: Hold,
        review: Review | None,
    ) -> bool:
        """Record ``processor``'s claimed effect as ``held`` (instead of its commit), if
        ``token`` still holds the claim: the held change and why (``hold``), the lease
        removed, ``review`` pushed onto the trail (None: the change was held already and a
        newer change's claim passed it again). One UpdateItem; the change stream publishes
        ``Object Held`` for it.

        Returns
        -------
        bool
            False when another worker claimed the row since.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        request = hold_request(processor, token, hold, review, self._trail)
        return self._call(bucket, key, request).applied

    def review(self, bucket: str, key: str, review: Review, *, queued: int = 0) -> WriteResult:
        """Decide ``review.processor``'s held change ``review.change_id``: ``approved`` makes
        the effect pending with an expired lease (the next delivery of the key, or the repair
        the caller queues, re-claims and runs it without asking the policy again);
        ``rejected`` ends it (``rejected``), or, when newer changes wait behind it (an
        ``every-change`` processor's queue held ``queued`` > 1 changes when the row was read),
        drops only the held change and leaves the rest pending the same way. Conditional on
        the effect still holding that change and, for a rejection, its queue still holding
        ``queued`` changes (a newer change queued since refuses it: read and decide again); the
        decision goes onto the trail and the row's revision moves. One UpdateItem; the change
        stream publishes ``Change Approved`` or ``Change Rejected``.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        return self._call(bucket, key, review_request(review, queued, self._trail))

    def rank(self, name: str, window: int, member: str, above: int, ttl_seconds: int) -> int:
        """The mass-delete breaker's counter (:class:`~s3ingest_fn.core.hold.HoldCounter`) in
        the ledger table, on small items that expire by the table's TTL ``ttl_seconds`` later:
        ``#s3ingest/<name>/<window>`` counts the ranks given in the window (``n``), and
        ``#s3ingest/<name>/member/<member>`` keeps a member's rank. A member asked again (a
        retried or crash-resumed effect, in this window or a later one) gets its kept rank: one
        GetItem. A new one: one conditional UpdateItem of the count (while ``n < above``) and
        one conditional PutItem of its rank; past ``above``, the refused update alone.

        Returns
        -------
        int
            ``member``'s rank (1 to ``above``), or ``above + 1`` once ``above`` ranks were given
            in the window.

        Raises
        ------
        TransientError
            On throttling or a service error.
        """
        kept = {PARTITION_KEY: {"S": f"{COUNTER_PREFIX}{name}/member/{member}"}}
        expires = {"N": str(int(self._clock()) + ttl_seconds)}
        try:
            found = self._ddb.get_item(TableName=self._table, Key=kept, ConsistentRead=True)
            if "Item" in found:
                return int(found["Item"]["r"]["N"])
            try:
                counted = self._ddb.update_item(
                    TableName=self._table,
                    Key={PARTITION_KEY: {"S": f"{COUNTER_PREFIX}{name}/{window}"}},
                    UpdateExpression="SET #n = if_not_exists(#n, :zero) + :one, "
                    "#ttl = if_not_exists(#ttl, :ttl)",
                    ConditionExpression="attribute_not_exists(#n) OR #n < :above",
                    ExpressionAttributeNames={"#n": "n", "#ttl": TTL_ATTRIBUTE},
                    ExpressionAttributeValues={
                        ":zero": {"N": "0"},
                        ":one": {"N": "1"},
                        ":above": {"N": str(above)},
                        ":ttl": expires,
                    },
                    ReturnValues="UPDATED_NEW",
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                    return above + 1
                raise
            rank = int(counted["Attributes"]["n"]["N"])
            try:
                self._ddb.put_item(
                    TableName=self._table,
                    Item={**kept, "r": {"N": str(rank)}, TTL_ATTRIBUTE: expires},
                    ConditionExpression=f"attribute_not_exists({PARTITION_KEY})",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except ClientError as exc:  # the same change asked twice at once: the first wins
                if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise
                return int(cast("dict[str, Any]", exc.response.get("Item") or {})["r"]["N"])
            return rank
        except (ClientError, BotoCoreError) as exc:
            raise _transient(exc) from exc

    # -- the requests ----------------------------------------------------------------------

    def _sequenced(
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
        """A write ordered by ``meta.sequencer``: applied when the row is absent, or its
        sequencer is absent or lower; ``require_exact``: and the row holds no observed state;
        ``expected_rev``: and the revision is unchanged; ``state_is``: and the row holds
        (True) or does not hold (False) ``state``."""
        cond, values = sequenced_condition(
            state, meta, require_exact=require_exact, expected_rev=expected_rev, state_is=state_is
        )
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

    def _call(
        self,
        bucket: str,
        key: str,
        request: dict[str, Any],
        *,
        token_attribute: str | None = None,
        own: Callable[[LedgerRow], WriteResult | None] | None = None,
    ) -> WriteResult:
        """One UpdateItem, conditional on the item not being legacy; a legacy item refusing it
        is migrated and the request made again. An applied write's returned attributes give
        the fencing token (``token_attribute``, default any processor's) and the queues.

        ``own``: when botocore retried the request (a lost response, a connection error) and
        the retry failed its condition, the first attempt may have been applied: ``own`` reads
        the returned row and gives the applied result when the row holds this very write
        (:func:`own_write`), so the caller runs the effect it claimed instead of reading a
        ``duplicate`` (``docs/effects.md``, "The ambiguous write")."""
        request = dict(request)
        request["ConditionExpression"] = (
            f"({request['ConditionExpression']}) AND attribute_not_exists(#{_LEGACY_MARK})"
        )
        request["ExpressionAttributeNames"] = {
            **request["ExpressionAttributeNames"],
            f"#{_LEGACY_MARK}": _LEGACY_MARK,
        }
        for _ in range(3):
            try:
                resp = self._ddb.update_item(
                    TableName=self._table,
                    Key={PARTITION_KEY: {"S": row_pk(bucket, key)}},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    **request,
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                    item = cast("dict[str, Any] | None", exc.response.get("Item"))
                    if item and _LEGACY_MARK in item:
                        self._refuse_live_legacy_lease(item)
                        self._migrate(item)
                        continue
                    old = row_from_item(item) if item else None
                    retried = exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0)
                    mine = own(old) if own is not None and old is not None and retried else None
                    return mine or WriteResult(applied=False, old=old)
                raise _transient(exc) from exc
            except BotoCoreError as exc:
                raise _transient(exc) from exc
            return _written(resp.get("Attributes", {}), token_attribute)
        raise TransientError("dynamodb: a legacy ledger item kept changing during its migration")

    def _refuse_live_legacy_lease(self, item: Mapping[str, Any]) -> None:
        """A legacy item whose effect a worker of the previous release still holds (pending,
        lease not over) is left to that worker: its commit is conditional on the legacy fencing
        token, which a migration would rename, and the effect would run again.

        Raises
        ------
        TransientError
            Always when the lease is live: the message is retried after it.
        """
        effect = row_from_item(item).effect
        lease = effect.lease_until_ms if effect else None
        if effect and effect.status == PENDING and lease and lease > self._clock() * 1000:
            raise TransientError(
                "dynamodb: a legacy ledger item's effect is still leased by an earlier version"
            )

    def _migrate(self, item: Mapping[str, Any]) -> None:
        """Rewrite a legacy item in the compact layout, unchanged in meaning (same revision,
        effect, history; ``op=migrate``), if it is still the item read."""
        row = row_from_item(item)
        new = item_of(row)
        new[_OP] = {"S": _OP_MIGRATE}
        conditions = ["attribute_exists(#bucket)"]
        names = {"#bucket": _LEGACY_MARK}
        values: dict[str, Any] = {}
        for i, name in enumerate(_LEGACY_GUARDED):
            names[f"#g{i}"] = name
            if name in item:
                conditions.append(f"#g{i} = :g{i}")
                values[f":g{i}"] = item[name]
            else:
                conditions.append(f"attribute_not_exists(#g{i})")
        request: dict[str, Any] = {
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeNames": names,
        }
        if values:
            request["ExpressionAttributeValues"] = values
        try:
            self._ddb.put_item(TableName=self._table, Item=new, **request)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise _transient(exc) from exc
            # another writer migrated or changed it first: the caller's request runs again
        except BotoCoreError as exc:
            raise _transient(exc) from exc

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
        clear_sequencer: bool = False,
    ) -> WriteResult:
        """The write :func:`~s3ingest_fn.adapters.dynamo_ledger.updates.change_request`
        builds, made now; an applied write's result names the change it applied."""
        built = change_request(
            state,
            meta,
            now=self._clock(),
            ttl_seconds=self._ttl,
            observed=observed,
            condition=condition,
            values=values,
            change_key=change_key,
            claim=claim,
            same_change=same_change,
            clear_sequencer=clear_sequencer,
        )
        result = self._call(
            meta.bucket,
            meta.key,
            built.request,
            token_attribute=built.token_attribute,
            own=lambda row: own_write(row, built.change_id, claim),
        )
        if result.applied:
            return WriteResult(
                applied=True,
                token=result.token,
                change_id=built.change_id,
                queues=result.queues,
                holds=result.holds,
            )
        return result


def own_write(row: LedgerRow, change_id: str | None, claim: Claim | None) -> WriteResult | None:
    """The applied :class:`WriteResult` of a write applying ``change_id`` under ``claim``,
    read back from ``row`` (the item a retry of that write was refused by), or None when the
    row does not hold that write as it left it.

    The write holds only when the row's change is ``change_id`` and every processor the claim
    concerns is ``pending`` with exactly the claim's lease (epoch ms) and the fencing token
    :func:`~s3ingest_fn.core.row.fencing_token` of the row's revision and the claim's time: no
    other write has touched the row since, and no other worker's claim holds that lease and
    token. Without a claim (no processor concerned) nothing is pending, so None: the retry's
    ``duplicate`` loses nothing.

    botocore retries a request whose response was lost
    (https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html); DynamoDB
    may have applied the first attempt
    (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html).
    """
    if claim is None or not claim.processors or change_id is None or row.change_id != change_id:
        return None
    token = fencing_token(row.rev, claim.now_ms)
    effects: dict[str, Effect] = {}
    for name in claim.processors:
        effect = row.effect_of(name)
        if (
            effect is None
            or effect.status != PENDING
            or effect.token != token
            or effect.lease_until_ms != claim.lease_until_ms
        ):
            return None
        effects[name] = effect
    queued = [effects[name] for name in claim.queued]
    return WriteResult(
        applied=True,
        token=token,
        change_id=change_id,
        queues={name: effect.queue for name, effect in zip(claim.queued, queued, strict=True)},
        holds={
            name: effect.hold
            for name, effect in zip(claim.queued, queued, strict=True)
            if effect.hold is not None
        },
    )
