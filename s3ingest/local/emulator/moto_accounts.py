"""Accounts on the emulator as AWS keeps them apart (patch bodies named in
:mod:`s3ingest.local.emulator.moto_patches`, written against moto 5.2.5).

moto keeps each account's state apart and picks the account of a request from its access key
(an ``sts:AssumeRole`` key belongs to the role's account). Two gaps for buckets of other
accounts:

* moto lets any account read a bucket of another one (``MOTO_S3_ALLOW_CROSSACCOUNT_ACCESS``,
  default true); S3 refuses a caller the bucket's policy does not admit (403), and this
  project reads another account's bucket only through that account's role, so the emulator
  refuses cross-account bucket access always (:func:`refuse_other_accounts_buckets`);
* moto reads the access key of a request from its ``Authorization`` header or a Signature
  Version 2 presigned URL's ``AWSAccessKeyId``, not from a Signature Version 4 presigned URL's
  ``X-Amz-Credential`` (https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html),
  so such a URL always acted as the default account (:func:`presigned_urls_name_their_account`);
* a rule forwarding an event to another bus (the source stack's rule, to the central account's
  default bus) makes moto put it again as the target bus's account, with no ``resources``;
  EventBridge keeps the event's ``account`` (S3's: the bucket owner's), ``resources`` and
  ``time`` (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cross-account.html), and
  the ingest rule matches a bucket's name with its owner's account
  (:func:`forwarded_events_keep_their_account`).

* moto delivers an event to a target without its ``account`` (its default input template
  leaves the field out); EventBridge delivers the whole event
  (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-events-structure.html), and the
  ingest function refuses an event whose ``account`` is not the bucket's owner
  (:func:`delivered_events_hold_their_account`).

moto checks no ``ExpectedBucketOwner`` (its S3 responses never read the header) and evaluates no
``s3:ResourceAccount``: with the cross-account refusal above, a read through the wrong account's
credentials still fails with 403, as S3 answers a wrong ``ExpectedBucketOwner``.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

#: The sending event's fields a forwarded event keeps (set while a rule delivers an event).
_FORWARDING: ContextVar[dict[str, Any] | None] = ContextVar("s3ingest_forwarding", default=None)
_KEPT = ("account", "resources", "time")


def refuse_other_accounts_buckets() -> None:
    """A request on a bucket of another account answers 403 (moto's ``AccessDeniedByLock``)."""
    import moto.s3.models as s3_models

    if getattr(s3_models.s3_allow_crossdomain_access, "_s3ingest", False):
        return

    def refused() -> bool:
        return False

    refused._s3ingest = True  # type: ignore[attr-defined]
    s3_models.s3_allow_crossdomain_access = refused


def presigned_urls_name_their_account() -> None:
    """A Signature Version 4 presigned request acts as the account of its
    ``X-Amz-Credential``'s access key."""
    from moto.core.responses import BaseResponse

    original = BaseResponse.get_access_key
    if getattr(original, "_s3ingest", False):
        return

    def get_access_key(self: Any) -> str:
        credential = self.querystring.get("X-Amz-Credential")
        if "Authorization" not in self.headers and credential:
            return str(credential[0]).split("/", 1)[0]
        key: str = original(self)
        return key

    get_access_key._s3ingest = True  # type: ignore[attr-defined]
    BaseResponse.get_access_key = get_access_key  # type: ignore[method-assign]


def forwarded_events_keep_their_account() -> None:
    """Patch ``Rule.send_to_targets``: an event a rule delivers to another bus (moto's
    ``put_events`` on the target's backend, within the delivery) reaches that bus's rules with
    the sending event's ``account``, ``resources`` and ``time``."""
    from moto.events.models import Rule

    original = Rule.send_to_targets
    if getattr(original, "_s3ingest_forwarded", False):
        return

    def send_to_targets(self: Any, original_event: Any, transform_input: bool = True) -> None:
        sender = _FORWARDING.get()
        if sender is not None:  # delivered by another rule's bus target
            original_event = {**original_event, **sender}
        kept = {k: original_event[k] for k in _KEPT if k in original_event}
        token = _FORWARDING.set(kept)
        try:
            original(self, original_event, transform_input)
        finally:
            _FORWARDING.reset(token)

    # both marks: the disabled-rule patch, installed before, must not wrap this one again
    send_to_targets._s3ingest_forwarded = True  # type: ignore[attr-defined]
    send_to_targets._s3ingest_patched = True  # type: ignore[attr-defined]
    Rule.send_to_targets = send_to_targets  # type: ignore[method-assign]


def delivered_events_hold_their_account() -> None:
    """Patch ``EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE``: a target's event (a rule
    without an input transformer) holds ``account`` after ``version``, as EventBridge's."""
    from moto.events.utils import EventTemplateParser

    template = EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE
    if '"account":' in template:
        return
    marker = '"version": "0", '
    if marker not in template:  # pragma: no cover - the Target check names moto's version
        raise RuntimeError("moto's default event input template changed: read it again")
    EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE = template.replace(
        marker, f'{marker}"account": "<account>", ', 1
    )
