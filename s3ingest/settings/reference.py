"""The settings reference, ``docs/settings.md``, generated from the settings model: every context
key of :data:`~s3ingest.settings.context.DEFAULTS` with its default and its description, then the
fields of a ``buckets`` entry (:data:`~s3ingest.settings.buckets.BUCKET_FIELDS`) and of a
``processors`` entry (:data:`~s3ingest.settings.processors.PROCESSOR_FIELDS`).

``python -m s3ingest.settings.reference --write`` (``make settings-doc``) rewrites the page;
``--check`` exits 1 when the committed page is not :func:`render`'s output (a test does the same).
:func:`render` raises :class:`MissingDescriptionError` for a key without a description, so a new
setting cannot be added without documenting it. Links are relative to ``docs/``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from s3ingest.settings.buckets import BUCKET_FIELDS
from s3ingest.settings.context import DEFAULTS
from s3ingest.settings.model import Settings
from s3ingest.settings.processors import PROCESSOR_FIELDS

#: Where the generated page is committed, relative to the repository's root.
PAGE = Path("docs") / "settings.md"

#: What each context key means (Markdown, one table cell: no line breaks, ``|`` escaped).
DESCRIPTIONS: dict[str, str] = {
    "stage": "environment name; the stack is `S3Ingest-<stage>`",
    "bucketName": (
        "adopt one existing bucket instead of creating one (the same as `buckets` with one "
        '`{"name": ..., "existing": true}` entry): the stack switches on its EventBridge '
        "delivery, keeping every other notification configuration, and adds its own daily "
        "inventory configuration (`s3ingest-daily`), both undone on stack deletion "
        "([existing buckets](existing-buckets.md))"
    ),
    "buckets": (
        "the landing buckets, a JSON list (`-c 'buckets=[...]'`), instead of `bucketName`: each "
        "entry an object with the [fields below](#a-buckets-entry), created by the stack (no "
        '`existing`) or adopted (`"existing": true`, `name` required), with optional key '
        "filters the EventBridge rule applies ([existing buckets](existing-buckets.md), "
        "[buckets in other accounts](organisation.md))"
    ),
    "versioned": "versioning on the bucket the stack creates",
    "archiveRetentionDays": "EventBridge archive retention (replay window)",
    "queueRetentionDays": "ingest queue retention",
    "dlqRetentionDays": "dead-letter queue retention (at least `queueRetentionDays`)",
    "tombstoneMarginDays": "added to the tombstone lifetime (see [below](#tombstone-lifetime))",
    "functionTimeoutSeconds": (
        "ingest Lambda timeout; the queue's visibility timeout is 6 times this"
    ),
    "functionMemoryMb": "ingest Lambda memory",
    "batchSize": "SQS records per invocation",
    "maxBatchingWindowSeconds": "SQS batching window",
    "maxConcurrency": "concurrent invocations of the event source (2 to 1000)",
    "maxReceiveCount": "receives before a message goes to the DLQ",
    "recordConcurrency": "records of one batch processed at once (thread pool)",
    "logRetentionDays": "CloudWatch Logs retention of the function",
    "inventoryEnabled": (
        "daily S3 Inventory (CSV, all versions) to an inventory bucket the stack owns"
    ),
    "reconcileSchedule": (
        "when the reconcile Lambda runs (an EventBridge `rate(...)` or `cron(...)` expression)"
    ),
    "reconcileFanOut": (
        "reconcile with the Step Functions fan-out instead of one Lambda (needs the stack's "
        "inventory; [reconciliation](reconciliation.md))"
    ),
    "reconcileMemoryMb": "the reconcile Lambda's memory",
    "reconcileTimeoutSeconds": "the reconcile Lambda's timeout",
    "backfillEngine": ("`batch-operations` or `distributed-map` ([backfill](backfill.md#engines))"),
    "backfillFunctionTimeoutSeconds": "the backfill Lambda's timeout",
    "listingConcurrency": (
        "shards the listing backfill lists at once (its Distributed Map's `MaxConcurrency`, "
        "1 to 1000)"
    ),
    "ledgerWarmWriteUnits": (
        "pre-warmed write units per second of the ledger table (DynamoDB warm throughput, "
        "4000 to 40000), so a large backfill writes at full speed from its start; `null`: none"
    ),
    "alarmEmail": "an address subscribed to the alarm topic",
    "processor": (
        "your effect, `package.module:function`, run for every applied change "
        "([effects](processors.md)); with it, `functionTimeoutSeconds` and "
        "`backfillFunctionTimeoutSeconds` must be at least 10"
    ),
    "processorVersion": (
        "the version of `processor`, a whole number of at least 1: raise it when the processor's "
        "code changes so that the outputs of its earlier code are stale. Rows whose effect "
        "completed under a lower version are then behind, and `s3ingest reprocess --processor "
        "default` brings them up to date ([versions](processors.md#versions)); a `processors` "
        "entry has its own `version`"
    ),
    "processorPackageDir": (
        "a directory whose top-level packages are copied into the Lambda package, for a "
        "processor (or a `module`/`handler` of `processors`) outside `functions/`; with it set, "
        "every `module` and `handler` is looked for there only (copy an example from "
        "`functions/s3ingest_examples` into it to use both)"
    ),
    "processors": (
        "several named processors, a JSON list (`-c 'processors=[...]'`), instead of "
        "`processor`: each an object with the [fields below](#a-processors-entry) and exactly "
        'one of `"functionArn"`, `"handler"` or `"module"`. The functions that run the '
        "processors (ingest, backfill, the listing backfill's shard step) get `PROCESSORS` (the "
        "normalised list, a `handler` as the `functionArn` of its deployed function) and "
        "timeouts of at least the longest `timeoutSeconds` + 15 s (raised from their setting "
        "when it is lower; the queue's visibility timeout follows)"
    ),
    "processorPolicyStatements": (
        "extra IAM statements for the in-process processors (`processor`, or a `module` in "
        '`processors`), a JSON list of `{"Effect": "Allow" \\| "Deny", "Action": ..., '
        '"Resource": ...}` (optional `"Condition"`, `"Sid"`), added to the roles of the '
        "functions that run them (ingest, backfill, listing shard), so the stack needs no edit. "
        "An Allow of `*` or `service:*` actions on resource `*` is refused. Synth notes on each "
        "role what was merged into it (an info annotation, `cdk synth` prints it). A resource "
        "wildcard with explicit actions is acknowledged to cdk-nag as yours; a wildcard action "
        "never is: name the actions, or acknowledge `AwsSolutions-IAM5[Action::...]` on the "
        "role yourself (`S3IngestPipeline` users)"
    ),
    "hold": (
        "hold for review ([hold](hold.md)): which changes' effects wait for an operator's "
        "approve or reject instead of running, for every processor without a `hold` of its own "
        "(with `processor`: for it). A JSON object (`-c 'hold={\"deletes\": true}'`) of "
        '`"deletes": true` (every removal), `"deletes": {"above": 100, "windowSeconds": 300}` '
        "(the mass-delete breaker: removals beyond `above` within one window of "
        '`windowSeconds`, 1 to 86400, default 300), `"prefixes": ["published/"]` (any change '
        'under these) and `"policy": "package.module:function"` (your own answer, `run`, '
        '`skip`, `hold` or `{"action", "reason"}`); keys combine, the first rule that holds '
        "wins, in the order prefixes, deletes, policy. Needs `processor` or `processors`. The "
        "functions that run the processors get it as `HOLD` (counted with `PROCESSORS` in their "
        "2560-byte budget)"
    ),
    "trailLength": (
        "review decisions (held, approved, rejected) kept on each ledger row, newest first "
        "(1 to 20); the functions that run the processors get it as `TRAIL_LENGTH` when not the "
        "default"
    ),
    "holdAlarmSeconds": (
        "with a `hold` (the stack's or a processor's), the held-changes alarm fires when the "
        "oldest held change is older than this (at least 60). The age is measured when "
        "reconciliation runs (`reconcileSchedule`, daily by default; metrics `held_effects` and "
        "`held_oldest_seconds`), so the alarm can lag by up to that schedule"
    ),
    "changeStream": (
        "publish every applied change on the stack's own bus `s3ingest-changes-<stage>` "
        "([the change stream](processors.md#the-change-stream))"
    ),
    "lagAlarmSeconds": (
        "the end-to-end lag alarm fires when the p99 of live events' lag (S3 event time to the "
        "end of the record that wrote the ledger, `ingest_lag_ms`) over 5 minutes is above this "
        "(1 to 86400)"
    ),
    "runbookBaseUrl": (
        "where the runbook is published (`https://` only); every alarm description ends with "
        "`Runbook: <runbookBaseUrl>#<section>`. Point it at your own copy (fork, wiki, internal "
        "Git)"
    ),
    "tracing": (
        "X-Ray active tracing of the Lambda functions (with the Powertools tracer in the ingest "
        "function). Off, the functions have no X-Ray permission and "
        "`POWERTOOLS_TRACE_DISABLED=true`: the X-Ray SDK adds about 300 ms to a cold start and is "
        "in maintenance mode. The state machines are traced either way"
    ),
    "logKeys": (
        "how object keys appear in the function logs, the change audit log and the state "
        "machines' logs: `plain` (as they are), `hashed` (a keyed hash, HMAC-SHA256 truncated to "
        "16 hex digits, the same for the same key: the functions log `key_hash` for `key`, the "
        "audit log `keyHash`; `s3ingest log-key KEY` prints it; the key is a Secrets Manager "
        "secret the stack generates and retains, about 0.40 USD a month) or `none` (left out). "
        "With `hashed` or `none` the audit log keeps each change's detail type, id, bucket, "
        "kind, rev and sequencer (the change event itself keeps the key for subscribers), and "
        "the state machines log no execution data (no state inputs or outputs, only events and "
        "timing). Runbook: [finding a key in the logs](runbook.md#finding-a-key-in-the-logs)"
    ),
    "ingestReservedConcurrency": (
        "reserved concurrency of the ingest function (at least `maxConcurrency`): live ingest "
        "keeps its share of the account's concurrency whatever else runs; `null`: unreserved"
    ),
    "backfillReservedConcurrency": (
        "reserved concurrency of each backfill worker function (the Batch Operations task "
        "function, or with the Distributed Map engine the control function that runs each data "
        "file; the listing backfill's shard function; the reprocess run's segment function): a "
        "backfill never takes more than this; "
        "`null`: unreserved"
    ),
    "operatorRoleArns": (
        "JSON list of IAM role ARNs allowed to send to the ingest queue (a redrive); the queue's "
        "policy denies every other principal but the stack's own; `null`: none"
    ),
    "kmsKeyArn": (
        "a customer-managed KMS key for every resource of the stack that can be encrypted "
        "(ledger, queues and dead-letter queues, archives, change bus, log groups, the stack's "
        "buckets, alarm topic, state machines, secret, functions' environments; "
        "[encryption](encryption.md)): a key ARN (`arn:aws:kms:<region>:<account>:key/<id>`, "
        "whose policy must hold the statements `s3ingest.encryption.key_policy` generates) or "
        "`create` (a key the stack creates: rotated, retained, alias `alias/s3ingest-<stage>`). "
        "Each role gets exactly the key actions its own policy needs, on the key only. Unset: "
        "each service's own encryption, the template unchanged"
    ),
    "allowModuleProcessorsWithRemoteBuckets": (
        "`true` accepts in-process processors (`processor`, or a `module` in `processors`) "
        "beside buckets of other accounts (`buckets[].account`). Such a processor runs inside "
        "the pipeline's functions with their privileges: ledger writes, the read role of every "
        "other account's bucket, the log-key secret ([processors](processors.md#privileges)). "
        "Default `false`: refused at synth; deploy the processor as a `handler` or "
        "`functionArn` entry instead (a role of its own)"
    ),
}

#: What each field of a ``buckets`` entry means, with its default (Markdown, one table cell).
BUCKET_DESCRIPTIONS: dict[str, str] = {
    "name": (
        "the bucket's name: required with `existing`; for a created bucket, leave it out and "
        "CloudFormation names it"
    ),
    "existing": (
        "`true`: the bucket exists already and is adopted: the stack switches on its EventBridge "
        "delivery (`eventBridge`) and adds its inventory configuration, and changes nothing "
        "else. Default `false` (the stack creates it)"
    ),
    "id": (
        "construct id of the bucket's resources (letters and digits); logical ids derive from "
        "it, so keep it stable. Default `Landing` for the first bucket, `Landing2`, ... after"
    ),
    "versioned": (
        "versioning on a bucket the stack creates (an existing bucket keeps its own). Default "
        "`true`"
    ),
    "prefixes": (
        "key filters (decoded keys), a list: only keys with one of the prefixes are tracked; "
        "the EventBridge rule applies them. Default: every key"
    ),
    "suffixes": (
        "key filters (decoded keys), a list: only keys with one of the suffixes are tracked. "
        "Default: every key"
    ),
    "inventory": (
        "`true` (default): the stack's own daily S3 Inventory (configuration id "
        "`s3ingest-daily`, to the stack's inventory bucket); `false`: none (reconciliation "
        'lists the bucket, no inventory backfill); or an existing configuration `{"id", '
        '"bucket", "prefix"}` (CSV, with `Size`, `LastModifiedDate` and `ETag`, and all '
        "versions for a versioned bucket)"
    ),
    "eventBridge": (
        'adopted buckets: `true` (default): the stack switches on "Send notifications to '
        'Amazon EventBridge" and leaves it as found on deletion; `false` leaves the delivery to '
        "the bucket's owner (`s3ingest onboard` checks it; [existing buckets](existing-buckets.md))"
    ),
    "kmsKeyArn": (
        "an adopted SSE-KMS bucket's customer-managed key: `kms:Decrypt` on it is granted to "
        "exactly the roles that read the bucket "
        "([encryption](encryption.md#adopted-buckets-with-sse-kms)); the key's policy must allow "
        "this account. A bucket the stack creates is encrypted with the stack's `kmsKeyArn`"
    ),
    "account": (
        "the AWS account (12 digits) of another account's bucket, set up by that account's "
        "source stack ([buckets in other accounts](organisation.md)); the pipeline does not set "
        "it up itself"
    ),
    "region": (
        "the bucket's Region: refused unless the stack's (one pipeline per Region). Default: "
        "the stack's"
    ),
    "readRoleArn": (
        "the role of the bucket's account the pipeline assumes to read it. Default "
        "`arn:aws:iam::<account>:role/s3ingest-source-read-<region>` (the source stack's)"
    ),
}

#: What each field of a ``processors`` entry means (Markdown, one table cell).
PROCESSOR_DESCRIPTIONS: dict[str, str] = {
    "name": ("`^[a-z][a-z0-9-]{0,31}$`, unique (`default` is where `processor` keeps its state)"),
    "mode": (
        "`latest` (default) or `every-change` "
        "([several processors](effects.md#several-processors-and-delivery-modes))"
    ),
    "prefixes": "key filters (default: every key)",
    "suffixes": "key filters (default: every key)",
    "kinds": "`created` and/or `removed` (default both)",
    "timeoutSeconds": "a processor function's timeout, 1 to 885 (default 30), not for a `module`",
    "functionArn": (
        "your own Lambda function, any runtime, invoked synchronously under the claim: the stack "
        "grants `lambda:InvokeFunction` on that ARN only ([processor API](processor-api.md))"
    ),
    "handler": (
        "`package.module:function`, a Lambda handler of the bundle that the stack deploys as "
        "its own function with its own role; the example is `s3ingest_examples.sidecar:handler`"
    ),
    "module": "`package.module:function`, run in-process, as `processor`",
    "hold": (
        "this processor's own hold for review policy (the form of the `hold` setting); without "
        "it the stack-wide `hold` applies"
    ),
    "version": (
        "a whole number of at least 1 (default 1): raise it when outputs of the processor's "
        "earlier code are stale; rows done under a lower version are behind until `s3ingest "
        "reprocess --processor NAME` ([versions](processors.md#versions))"
    ),
}


class MissingDescriptionError(ValueError):
    """A setting or field without a description (or a description of none); ``names`` lists
    them."""

    def __init__(self, what: str, names: Sequence[str]) -> None:
        self.names = list(names)
        super().__init__(f"{what}: no description for (or unknown) {', '.join(self.names)}")


def _check(what: str, keys: Sequence[str], descriptions: Mapping[str, str]) -> None:
    missing = [k for k in keys if not descriptions.get(k, "").strip()]
    extra = [k for k in descriptions if k not in keys]
    if missing or extra:
        raise MissingDescriptionError(what, missing + extra)
    bad = [k for k in keys if "\n" in descriptions[k]]
    if bad:
        raise MissingDescriptionError(f"{what} (line break in a table cell)", bad)


def default_text(value: Any) -> str:
    """A default as the page shows it: JSON for ``None``, booleans and numbers, a string as is."""
    return value if isinstance(value, str) else json.dumps(value)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def render() -> str:
    """The Markdown of ``docs/settings.md``.

    Raises :class:`MissingDescriptionError` when a context key, a ``buckets`` field or a
    ``processors`` field has no description, or a description names none of them.
    """
    _check("settings (DEFAULTS)", list(DEFAULTS), DESCRIPTIONS)
    _check("buckets entry fields (BUCKET_FIELDS)", BUCKET_FIELDS, BUCKET_DESCRIPTIONS)
    _check("processors entry fields (PROCESSOR_FIELDS)", PROCESSOR_FIELDS, PROCESSOR_DESCRIPTIONS)
    default = Settings()
    days = default.tombstone_ttl_seconds // 86_400
    lines = [
        "# Settings",
        "",
        "<!-- Generated by `make settings-doc` (python -m s3ingest.settings.reference --write) "
        "from s3ingest/settings: edit the descriptions there, never this page. -->",
        "",
        "Settings are `cdk.json` context keys. Override them with `-c key=value`. Invalid settings "
        "fail synthesis with one error that lists every problem (an unknown key names the "
        "closest setting). `S3IngestPipeline` takes the same settings as keyword arguments "
        "named in snake_case ([in your own CDK app](cdk-construct.md)), and the local runtime "
        "reads the same keys.",
        "",
        *_table(
            ("key", "default", "meaning"),
            [(f"`{k}`", f"`{default_text(v)}`", DESCRIPTIONS[k]) for k, v in DEFAULTS.items()],
        ),
        "",
        "## A `buckets` entry",
        "",
        *_table(
            ("field", "meaning"),
            [(f"`{k}`", BUCKET_DESCRIPTIONS[k]) for k in BUCKET_FIELDS],
        ),
        "",
        "## A `processors` entry",
        "",
        "Exactly one of `functionArn`, `handler` and `module`; the rest is optional.",
        "",
        *_table(
            ("field", "meaning"),
            [(f"`{k}`", PROCESSOR_DESCRIPTIONS[k]) for k in PROCESSOR_FIELDS],
        ),
        "",
        "## Tombstone lifetime",
        "",
        "A tombstone (CONTRACT C6) lives for `archiveRetentionDays` + `queueRetentionDays` + "
        "`dlqRetentionDays` + `tombstoneMarginDays`. That is the longest time an older event can "
        "still come back: replayed from the archive, or redriven from the DLQ. With the defaults "
        f"it is {default.archive_retention_days} + {default.queue_retention_days} + "
        f"{default.dlq_retention_days} + {default.tombstone_margin_days} = {days} days.",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the page, write it (``--write``) or check the committed one (``--check``)."""
    parser = argparse.ArgumentParser(prog="python -m s3ingest.settings.reference")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help=f"rewrite {PAGE}")
    group.add_argument("--check", action="store_true", help=f"exit 1 if {PAGE} is not current")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the repository's root")
    args = parser.parse_args(argv)
    text = render()
    page = args.root / PAGE
    if args.write:
        page.write_text(text, encoding="utf-8")
    elif args.check:
        if not page.exists() or page.read_text(encoding="utf-8") != text:
            print(f"{PAGE} is not current: run make settings-doc", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
