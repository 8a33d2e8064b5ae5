"""The settings reference, ``docs/settings.md``, generated from the settings model: every context
key of :data:`~s3ingest.settings.DEFAULTS` with its default and the description its field
declares, then the
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
from s3ingest.settings.fields import declared
from s3ingest.settings.model import DEFAULTS, Settings
from s3ingest.settings.processors import PROCESSOR_FIELDS

#: Where the generated page is committed, relative to the repository's root.
PAGE = Path("docs") / "settings.md"

#: What each context key means (Markdown, one table cell): the settings fields' descriptions.
DESCRIPTIONS: dict[str, str] = {key: spec.description for key, _, spec in declared(Settings)}

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
