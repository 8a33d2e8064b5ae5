"""Delivery incidents on the local runtime, and the operator's commands run against it.

* :class:`Incidents` holds a scenario's incident steps (``disable_rule``, ``enable_rule``,
  ``break_queue_policy``, ``restore_queue_policy``, ``fail_processor``, ``squat``: another
  account takes a landing bucket's name) and runs ``redrive``,
  ``status`` and ``explain`` through the functions the CLI commands call
  (:func:`s3ingest.commands.redrive.redrive`, :func:`s3ingest.commands.status.stack_status`,
  :func:`s3ingest.commands.explain.explain_key`) over the local deployment's clients.

Delivery is stopped in the emulator itself (:mod:`s3ingest.local.emulator.moto_delivery`): a
disabled rule matches nothing and a queue policy's Deny for ``events.amazonaws.com`` stops the
rule's delivery, as in AWS; the archive's own rule keeps archiving (a flush's events:
:mod:`s3ingest.local.stack.delivery`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from s3ingest import outputs as output

if TYPE_CHECKING:
    from s3ingest.commands.context import Deployed
    from s3ingest.local.stack.runtime import LocalRuntime

#: The statement :meth:`Incidents.break_queue_policy` writes (as a deploy that shuts the
#: ingest rule out of its queue would).
DENY_SID = "s3ingest-rehearsal-deny-eventbridge"


def local_deployed(rt: LocalRuntime) -> Deployed:
    """The local deployment as the CLI's commands see a stack (:class:`Deployed`), its
    outputs named as the stack's and its clients the emulator's."""
    from s3ingest.commands.context import Deployed
    from s3ingest.deployed import DeployedStack
    from s3ingest_fn.effect_targets import hold_names, targets_json

    res = rt.resources
    outputs = {
        output.QUEUE_URL: res.queue_url,
        output.DEAD_LETTER_QUEUE_URL: res.dlq_url,
        output.BUCKET_NAME: res.bucket,
        output.BUCKET_NAMES: ",".join(res.bucket_names),
        output.BUCKET_SCOPE: rt.scope.to_json(),
        output.LEDGER_TABLE_NAME: res.table,
        output.ARCHIVE_ARN: rt.events.describe_archive(ArchiveName=res.archive)["ArchiveArn"],
    }
    if res.change_dlq_url:
        outputs[output.CHANGE_DEAD_LETTER_QUEUE_URL] = res.change_dlq_url
    names = [entry["name"] for entry in rt.settings.processor_entries() if entry.get("name")]
    if names:
        outputs[output.PROCESSOR_NAMES] = ",".join(names)
        outputs[output.PROCESSOR_TARGETS] = targets_json(rt.settings.processor_entries())
    outputs[output.HOLD_PROCESSORS] = json.dumps(
        hold_names(rt.settings.processor_entries(), rt.settings.hold)
    )
    clients = {
        "sqs": rt.sqs,
        "events": rt.events,
        "dynamodb": rt.ddb,
        "s3": rt.s3,
        "cloudwatch": rt.emu.client("cloudwatch"),
        "stepfunctions": rt.emu.client("stepfunctions"),
    }
    # named by its metrics' stack dimension (what status reads the last drift under)
    return Deployed(None, DeployedStack(name=rt.metrics_stack, outputs=outputs), clients)


class Incidents:
    """A scenario's incident steps on ``rt``, and what its operator commands answered."""

    def __init__(self, rt: LocalRuntime) -> None:
        self.rt = rt
        self._saved_policy: str | None = None
        self.redrives: list[dict[str, Any]] = []
        self.statuses: list[dict[str, Any]] = []
        self.explanations: list[dict[str, Any]] = []

    def disable_rule(self) -> None:
        """``DisableRule`` on the ingest rule (events flushed meanwhile are archived only)."""
        self.rt.events.disable_rule(Name=self.rt.resources.rule)

    def enable_rule(self) -> None:
        """``EnableRule`` on the ingest rule."""
        self.rt.events.enable_rule(Name=self.rt.resources.rule)

    def break_queue_policy(self) -> None:
        """Replace the ingest queue's policy by one denying EventBridge ``sqs:SendMessage``."""
        res = self.rt.resources
        if self._saved_policy is None:
            attrs = self.rt.sqs.get_queue_attributes(
                QueueUrl=res.queue_url, AttributeNames=["Policy"]
            ).get("Attributes", {})
            self._saved_policy = attrs.get("Policy", "")
        deny = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": DENY_SID,
                    "Effect": "Deny",
                    "Principal": {"Service": "events.amazonaws.com"},
                    "Action": "sqs:SendMessage",
                    "Resource": res.queue_arn,
                }
            ],
        }
        self.rt.sqs.set_queue_attributes(
            QueueUrl=res.queue_url, Attributes={"Policy": json.dumps(deny)}
        )

    def restore_queue_policy(self) -> None:
        """Put back the policy :meth:`break_queue_policy` replaced."""
        saved, self._saved_policy = self._saved_policy or "", None
        self.rt.sqs.set_queue_attributes(
            QueueUrl=self.rt.resources.queue_url, Attributes={"Policy": saved}
        )

    def fail_processor(self, on: bool, processor: str | None = None) -> None:
        """Start (``on``) or end a processor's failure window (``None``: every processor):
        each of its runs raises, the message comes back and, after ``maxReceiveCount``
        receives, goes to the dead-letter queue."""
        name = processor or "*"
        failing = set(self.rt.recorder.failing)
        if on:
            failing.add(name)
        elif processor is None:
            failing.clear()
        else:
            failing.discard(name)
        self.rt.recorder.failing = frozenset(failing)

    def redrive(
        self, step: int | None, *, max_messages: int = 1000, include_invalid: bool = False
    ) -> dict[str, Any]:
        """What ``s3ingest redrive`` does (defaults as its options), then a drain."""
        from s3ingest.commands.redrive import redrive

        res = self.rt.resources
        result = redrive(
            self.rt.sqs,
            res.dlq_url,
            res.queue_url,
            dry_run=False,
            max_messages=max_messages,
            include_invalid=include_invalid,
        )
        self.rt.drain()
        entry = {"step": step, **_plain(result)}
        self.redrives.append(entry)
        return entry

    def status(self, step: int | None, max_age_seconds: int = 900) -> dict[str, Any]:
        """What ``s3ingest status --json`` prints."""
        from s3ingest.commands.status import stack_status

        result = stack_status(local_deployed(self.rt), max_age_seconds=max_age_seconds)
        entry = {"step": step, **_plain(result)}
        self.statuses.append(entry)
        return entry

    def explain(self, step: int | None, key: str, bucket: str | None = None) -> dict[str, Any]:
        """What ``s3ingest explain KEY --json`` prints."""
        from s3ingest.commands.explain import explain_key

        deployed = local_deployed(self.rt)
        name = bucket or self.rt.resources.bucket
        result = explain_key(
            deployed.ledger(),
            deployed.objects(),
            name,
            key,
            deployed.stack.processor_targets(),
            deployed.stack.scope(),
        )
        entry = {"step": step, "bucket_name": name, "key": key, **_plain(result)}
        self.explanations.append(entry)
        return entry

    def squat(self, bucket: str | None, account: str) -> None:
        """Another account takes landing bucket ``bucket``'s name (the first when None): the
        owner's bucket is emptied and deleted (the name is free, as when it was never created),
        ``account`` creates a bucket of that name with EventBridge delivery on and a rule of its
        own forwarding its events to the pipeline's bus, and later ``put`` and ``delete`` steps
        on the bucket are that account's. Owners, not names: nothing of it may reach the ledger
        (the oracle's truth for the bucket is empty, :attr:`Oracles.foreign`)."""
        from s3ingest.local.emulator.s3faithful import FaithfulS3
        from s3ingest.local.emulator.server import forward_events

        rt = self.rt
        landing = rt.resources.landing(bucket)
        name = landing.name
        owner = rt.emu.account_client("s3", landing.account)
        for page in owner.get_paginator("list_object_versions").paginate(Bucket=name):
            for entry in page.get("Versions", []) + page.get("DeleteMarkers", []):
                owner.delete_object(Bucket=name, Key=entry["Key"], VersionId=entry["VersionId"])
        owner.delete_bucket(Bucket=name)
        s3 = rt.emu.account_client("s3", account)
        s3.create_bucket(Bucket=name)
        s3.put_bucket_notification_configuration(
            Bucket=name, NotificationConfiguration={"EventBridgeConfiguration": {}}
        )
        bus_arn = rt.events.describe_event_bus()["Arn"]
        forward_events(rt.emu, account, [{"name": name, "account": account}], bus_arn, "squat")
        squatter = FaithfulS3(
            s3, name, None, rt.sequencer_clock, follow_notification=True, account=account
        )
        rt.buckets[name] = squatter
        if rt.faithful.bucket == name:
            rt.faithful = squatter
        rt.oracles.foreign.add(name)


def _plain(doc: Any) -> Any:
    """``doc`` as the CLI's ``--json`` prints it (datetimes as text)."""
    from s3ingest.cli.render import to_json

    return json.loads(to_json(doc))
