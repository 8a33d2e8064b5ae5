"""Example processor: a JSON metadata sidecar per object, in a separate output bucket.

Two ways to run it, writing the same sidecars:

- as a **processor function** (its own Lambda, :func:`handler`, built with the
  :mod:`s3ingest_processor` decorator): a processor entry ``{"handler":
  "s3ingest_examples.sidecar:handler"}``. It reads the bytes through the request's presigned URL
  only (no permission on the landing bucket) and needs ``OUTPUT_BUCKET`` (PutObject and
  DeleteObject there);
- as an in-process processor (:func:`process`) in the ingest Lambda: the context key
  ``processor`` = ``"s3ingest_examples.sidecar:process"``.

Either way the stack creates the output bucket and passes ``OUTPUT_BUCKET`` (and optionally
``OUTPUT_PREFIX``, default ``sidecars/``).

For a created object it reads the bytes *of that change* (pinned by version or ETag, CONTRACT
C8) and writes ``<OUTPUT_PREFIX><bucket>/<key>.json``: named by bucket and key, as a ledger row
(CONTRACT C1), so buckets holding the same key keep their own sidecars. For a key too long for
that name to fit S3's 1,024-byte limit it writes ``<OUTPUT_PREFIX>_sha256/<bucket>/<SHA-256 of
the key>.json`` (no bucket name starts with ``_``: the two forms never meet; see
:func:`sidecar_key`)::

    {"bucket", "key", "versionId", "etag", "sequencer", "changeId", "token",
     "bytes", "sha256", "lines", "json": true|false}

(``lines`` counts newline characters; ``json`` says whether the whole object parses as JSON).
For a removed object it deletes the sidecar. Both are idempotent: running the effect again after
a crash leaves an equivalent sidecar (only ``token``, the fencing token of the run, differs).
Objects are read in chunks; only the first :data:`JSON_CHECK_BYTES` are held to tell JSON.

It never writes where it reads: when the output bucket is the landing bucket itself, keys under
the output prefix are skipped, so the processor cannot trigger itself.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

from s3ingest_fn.core.effects import AppliedChange, PinnedContent

if TYPE_CHECKING:
    from s3ingest_processor import Change, Content  # pragma: no cover

DEFAULT_PREFIX = "sidecars/"
#: S3's limit on a key, UTF-8 bytes (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html).
MAX_KEY_BYTES = 1024
#: Folder under the prefix for sidecars of keys too long to be named after.
HASHED_FOLDER = "_sha256/"
#: Objects up to this size are checked for being JSON (the rest report ``"json": null``).
JSON_CHECK_BYTES = 8 << 20


def _s3() -> Any:
    """boto3's default S3 client, one per endpoint (``AWS_ENDPOINT_URL`` points the local
    runtime's function environment at its emulator)."""
    return _client(os.environ.get("AWS_ENDPOINT_URL"))


@cache
def _client(endpoint: str | None) -> Any:
    import boto3

    return boto3.client("s3")


class ChangeFields(Protocol):
    """What a sidecar needs of a change: an :class:`AppliedChange` (in-process) or an
    :class:`s3ingest_processor.Change` (processor function) alike."""

    @property
    def bucket(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def version_id(self) -> str | None: ...
    @property
    def etag(self) -> str | None: ...
    @property
    def sequencer(self) -> str | None: ...
    @property
    def change_id(self) -> str: ...
    @property
    def token(self) -> int: ...


class Chunks(Protocol):
    """The change's bytes in chunks: :class:`PinnedContent` (in-process) or
    :class:`s3ingest_processor.Content` (processor function)."""

    def stream(self, chunk_size: int = ...) -> Iterator[bytes]: ...


def sidecar_key(bucket: str, key: str, prefix: str = DEFAULT_PREFIX) -> str:
    """Where the sidecar of object ``key`` of landing bucket ``bucket`` goes:
    ``<prefix><bucket>/<key>.json``, or, when that would pass S3's limit of
    :data:`MAX_KEY_BYTES` UTF-8 bytes, ``<prefix>_sha256/<bucket>/<hex SHA-256 of key>.json``
    (the sidecar's ``bucket`` and ``key`` fields name the object). A bucket name starts with a
    letter or a digit (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html),
    so no plain name falls under ``<prefix>_sha256/``."""
    plain = f"{prefix}{bucket}/{key}.json"
    if len(plain.encode("utf-8")) <= MAX_KEY_BYTES:
        return plain
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
    return f"{prefix}{HASHED_FOLDER}{bucket}/{digest}.json"


def describe(change: ChangeFields, chunks: Iterable[bytes]) -> dict[str, Any]:
    """The sidecar document of one created object.

    Parameters
    ----------
    change : AppliedChange or s3ingest_processor.Change
    chunks : iterable of bytes
        The change's bytes (from :meth:`PinnedContent.stream` or
        :meth:`s3ingest_processor.Content.stream`).

    Returns
    -------
    dict
        ``{"bucket", "key", "versionId", "etag", "sequencer", "changeId", "token", "bytes",
        "sha256", "lines", "json"}``; ``json`` is None for objects over
        :data:`JSON_CHECK_BYTES`.
    """
    digest, size, lines = hashlib.sha256(), 0, 0
    head = bytearray()
    for chunk in chunks:
        digest.update(chunk)
        size += len(chunk)
        lines += chunk.count(b"\n")
        if len(head) <= JSON_CHECK_BYTES:
            head += chunk
    is_json: bool | None = None
    if size <= JSON_CHECK_BYTES:
        try:
            json.loads(bytes(head))
            is_json = True
        except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
            is_json = False
    return {
        "bucket": change.bucket,
        "key": change.key,
        "versionId": change.version_id,
        "etag": change.etag,
        "sequencer": change.sequencer,
        "changeId": change.change_id,
        "token": change.token,
        "bytes": size,
        "sha256": digest.hexdigest(),
        "lines": lines,
        "json": is_json,
    }


def process(change: AppliedChange, content: PinnedContent | None) -> None:
    """The processor entry point (``s3ingest_examples.sidecar:process``), called the same way by
    the deployed functions and the local runtime: configuration comes from the function's
    environment (``OUTPUT_BUCKET``, optional ``OUTPUT_PREFIX``), the S3 client from boto3's
    default chain.

    Raises
    ------
    SupersededError
        From the pinned read, when a newer write replaced the object.
    KeyError
        When ``OUTPUT_BUCKET`` is not set.
    """
    write_sidecar(
        change,
        content,
        s3=_s3(),
        output_bucket=os.environ["OUTPUT_BUCKET"],
        prefix=os.environ.get("OUTPUT_PREFIX", DEFAULT_PREFIX),
    )


def write_sidecar(
    change: ChangeFields,
    content: Chunks | None,
    *,
    s3: Any,
    output_bucket: str,
    prefix: str = DEFAULT_PREFIX,
) -> None:
    """Write (created) or delete (removed) the sidecar of ``change``.

    Parameters
    ----------
    change : AppliedChange or s3ingest_processor.Change
    content : PinnedContent, s3ingest_processor.Content or None
        The change's bytes (creates only).
    s3 : S3Client
        Needs PutObject and DeleteObject on ``output_bucket``.
    output_bucket, prefix : str
        Where sidecars go (:func:`sidecar_key`).
    """
    if output_bucket == change.bucket and change.key.startswith(prefix):
        return  # our own output: never process it
    target = sidecar_key(change.bucket, change.key, prefix)
    if content is None:
        s3.delete_object(Bucket=output_bucket, Key=target)
        return
    doc = describe(change, content.stream())
    s3.put_object(
        Bucket=output_bucket,
        Key=target,
        Body=json.dumps(doc, indent=2).encode(),
        ContentType="application/json",
        Metadata={"s3ingest-change-id": change.change_id, "s3ingest-token": str(change.token)},
    )


def process_function(change: Change, content: Content | None) -> None:
    """The sidecar as a processor function's body (see :data:`handler`): the same document as
    :func:`process`, the bytes read through the request's presigned URL.

    Raises
    ------
    s3ingest_processor.Superseded
        From the read, when a newer write replaced the object (the handler answers
        ``superseded``).
    KeyError
        When ``OUTPUT_BUCKET`` is not set (a function error: retried).
    """
    write_sidecar(
        change,
        content,
        s3=_s3(),
        output_bucket=os.environ["OUTPUT_BUCKET"],
        prefix=os.environ.get("OUTPUT_PREFIX", DEFAULT_PREFIX),
    )


def handler(event: Any, context: Any) -> dict[str, Any]:
    """The Lambda handler of the sidecar processor function
    (``s3ingest_examples.sidecar:handler``): the processor request in, ``{"status": "done" |
    "superseded"}`` out (``docs/processor-api.md``); :func:`process_function` under the
    :func:`s3ingest_processor.processor` decorator.

    The decorator is applied at the first call, so that this module (and :func:`process`, the
    in-process processor) imports in a bundle without ``s3ingest_processor``.
    """
    return _function_handler()(event, context)


@cache
def _function_handler() -> Any:
    from s3ingest_processor import processor

    return processor(process_function)
