"""``s3ingest attest``: a completeness attestation of one bucket, stored in the stack's own
bucket, and ``s3ingest attest verify``: its roots recomputed from the inputs it names
(:mod:`s3ingest_fn.services.attestation`; docs/attestation.md)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from s3ingest_fn.core.diff import bucket_truth
from s3ingest_fn.core.effects import EffectTarget
from s3ingest_fn.core.scope import BucketScope
from s3ingest_fn.services.attestation import (
    AttestError,
    AttestRequest,
    attest,
    inventory_rows,
    recompute,
    recompute_bucket_root,
)
from s3ingest_fn.services.attestation_store import store
from s3ingest_fn.services.inventory import InventoryError, Manifest
from s3ingest_fn.services.reconcile import INVENTORY, Reconciler

#: What S3 answers for an object or a version that is gone.
_GONE = ("NoSuchKey", "NoSuchVersion", "404", "NotFound")


class Gone(Exception):
    """An input the document names no longer exists."""


def _get(s3: Any, bucket: str, key: str, version_id: str | None = None) -> bytes:
    kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key}
    if version_id:
        kwargs["VersionId"] = version_id
    try:
        return bytes(s3.get_object(**kwargs)["Body"].read())
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in _GONE:
            where = f"s3://{bucket}/{key}" + (f" (version {version_id})" if version_id else "")
            raise Gone(where) from exc
        raise


def attest_bucket(
    reconciler: Reconciler,
    s3: Any,
    *,
    store_bucket: str,
    stack: str,
    source: str,
    prefix: str,
    processors: Sequence[str] | None,
    targets: Sequence[EffectTarget] = (),
    margin_seconds: int | None = None,
    manifest: str | None = None,
) -> dict[str, Any]:
    """Attest the reconciler's bucket, store the leaves and the document in ``store_bucket``.

    Returns
    -------
    dict
        ``document`` (as stored), ``location`` (``bucket``, ``key``, ``version_id``),
        ``document_sha256`` (over the stored bytes), ``differences_total``.

    Raises
    ------
    AttestError
        When a reader fails or a processor named is not configured.
    """
    if targets and not reconciler.targets:
        reconciler.targets = tuple(targets)
    made = attest(
        reconciler,
        AttestRequest(
            source=source,
            prefix=prefix,
            processors=tuple(processors) if processors else None,
            margin_ms=margin_seconds * 1000 if margin_seconds is not None else None,
            manifest_key=manifest,
        ),
        stack=stack,
    )
    return store(made, s3, store_bucket)


def load_document(raw: str) -> dict[str, Any]:
    """The document of a saved file: the document itself, or ``attest --json``'s output.

    Raises
    ------
    ValueError
        When the file is not an attestation.
    """
    doc = json.loads(raw)
    if isinstance(doc, dict) and isinstance(doc.get("document"), dict):
        doc = doc["document"]
    if not isinstance(doc, dict) or not str(doc.get("attestation", "")).startswith(
        "s3ingest-attestation/"
    ):
        raise ValueError("not an s3ingest attestation document")
    return doc


def verify_document(document: dict[str, Any], s3: Any) -> dict[str, Any]:
    """Recompute the document's roots from the inputs it names, while they exist.

    Returns
    -------
    dict
        ``match`` (every recomputation matches), ``checks`` (one per input: ``input``,
        ``status`` ``match`` / ``mismatch`` / ``gone`` / ``not kept``, and what was found),
        ``gone`` (the inputs no longer there).
    """
    checks: list[dict[str, Any]] = []
    leaves_ref = document["inputs"]["leaves"]
    name = f"s3://{leaves_ref.get('bucket')}/{leaves_ref.get('key')}"
    leaves: bytes | None = None
    try:
        leaves = _get(s3, leaves_ref["bucket"], leaves_ref["key"], leaves_ref.get("version_id"))
    except Gone as exc:
        checks.append({"input": "leaves", "where": str(exc), "status": "gone"})
    if leaves is not None:
        found = recompute(document, leaves)
        checks.append(
            {
                "input": "leaves",
                "where": name,
                "status": "match" if found["match"] else "mismatch",
                "sha256_matches": found["leaves_sha256_matches"],
                "roots": found["roots"],
            }
        )
    bucket_input = document["inputs"]["bucket"]
    if bucket_input["kind"] == INVENTORY:
        checks.append(_verify_inventory(document, bucket_input, leaves, s3))
    else:
        checks.append(
            {
                "input": "bucket",
                "status": "not kept",
                "why": "a listing is of its moment: the bucket's side is recomputed from the "
                "leaves it produced",
            }
        )
    checks.append(
        {
            "input": "ledger",
            "status": "not kept",
            "why": "a Scan is of its moment: the ledger's side is recomputed from the leaves "
            "it produced",
        }
    )
    gone = [c["input"] for c in checks if c["status"] == "gone"]
    ok = not gone and all(c["status"] in ("match", "not kept") for c in checks)
    return {"match": ok, "checks": checks, "gone": gone, "roots": document["roots"]}


def _verify_inventory(
    document: dict[str, Any], ref: dict[str, Any], leaves: bytes | None, s3: Any
) -> dict[str, Any]:
    store, key = ref["inventory_bucket"], ref["manifest"]
    where = f"s3://{store}/{key}"
    try:
        raw = _get(s3, store, key)
        checksum = _get(s3, store, key.rsplit("/", 1)[0] + "/manifest.checksum")
        manifest = Manifest.parse(raw, checksum)
        if hashlib.sha256(raw).hexdigest() != ref["manifest_sha256"]:
            return {"input": "bucket", "where": where, "status": "mismatch", "why": "manifest"}
        truth = bucket_truth(
            inventory_rows(lambda k: _get(s3, store, k), manifest.files, manifest),
            prefix=document["prefix"],
        )
    except Gone as exc:
        return {"input": "bucket", "where": str(exc), "status": "gone"}
    except (InventoryError, AttestError) as exc:
        return {"input": "bucket", "where": where, "status": "mismatch", "why": str(exc)}
    if leaves is None:
        return {"input": "bucket", "where": where, "status": "present", "why": "leaves gone"}
    given = document.get("scope")
    if given:
        scope = BucketScope(
            given["name"], tuple(given.get("prefixes", ())), tuple(given.get("suffixes", ()))
        )
        truth = {k: t for k, t in truth.items() if scope.contains(k)}
    root, unnamed = recompute_bucket_root(document, leaves, truth)
    same = root == document["roots"]["bucket"] and not unnamed
    return {
        "input": "bucket",
        "where": where,
        "status": "match" if same else "mismatch",
        "root": root,
        "unnamed_keys": unnamed[:20],
    }


def errors() -> tuple[type[BaseException], ...]:
    """What an attestation's S3 calls raise beyond :class:`AttestError`."""
    return (ClientError, BotoCoreError)
