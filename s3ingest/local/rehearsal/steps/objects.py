"""S3 operations and deliveries: ``put``, ``copy``, ``delete``, ``deliver``, ``flush``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from s3ingest.local.emulator.chaos import Chaos
from s3ingest.local.emulator.s3faithful import Op
from s3ingest.local.rehearsal.steps.base import Run, ScenarioError, Step, check_chaos, check_key


@dataclass
class Put(Step):
    """``{"op": "put", "key": K, "body": TEXT}``: PutObject (``"storage_class": C`` puts it in
    that class: ``GLACIER`` for a later ``restore``); S3's event (if EventBridge delivery is on
    for the bucket) is queued for a flush."""

    op = "put"
    refusal_is_file_error = True

    key: str
    body: str
    bucket: str | None = None
    storage_class: str | None = None

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        check_key(lineno, doc["key"])
        if not isinstance(doc["body"], str):
            raise ScenarioError(f"line {lineno}: put body must be a string")
        if doc.get("storage_class", "STANDARD") not in STORAGE_CLASSES:
            raise ScenarioError(
                f"line {lineno}: put storage_class must be one of {', '.join(STORAGE_CLASSES)}"
            )

    def check_in_order(self, lineno: int, versioning: str | None, puts: dict[int, str]) -> None:
        puts[lineno] = self.key

    def run(self, run: Run, lineno: int) -> None:
        s3 = run.rt.bucket(self.bucket)
        done = s3.put(self.key, str(self.body), self.storage_class)
        created(run, lineno, done, s3.versioning)


@dataclass
class Copy(Step):
    """``{"op": "copy", "key": K, "source": S}``: CopyObject of key ``S``'s current version to
    ``K`` in the same bucket; S3's event (reason ``CopyObject``) is queued for a flush."""

    op = "copy"
    refusal_is_file_error = True

    key: str
    source: str
    bucket: str | None = None

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        check_key(lineno, doc["key"])
        check_key(lineno, doc["source"])

    def check_in_order(self, lineno: int, versioning: str | None, puts: dict[int, str]) -> None:
        puts[lineno] = self.key

    def run(self, run: Run, lineno: int) -> None:
        s3 = run.rt.bucket(self.bucket)
        created(run, lineno, s3.copy(self.key, self.source), s3.versioning)


@dataclass
class Delete(Step):
    """``{"op": "delete", "key": K}`` or with ``"version_id": V``: DeleteObject (a delete marker
    in a versioned bucket, one version when ``version_id`` is given; ``"@N"`` names the version
    the ``put`` on line N created)."""

    op = "delete"
    refusal_is_file_error = True

    key: str
    version_id: str | None = None
    bucket: str | None = None

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        check_key(lineno, doc["key"])
        if "version_id" in doc and (
            not isinstance(doc["version_id"], str) or not doc["version_id"]
        ):
            raise ScenarioError(f"line {lineno}: version_id must be a non-empty string")

    def check_in_order(self, lineno: int, versioning: str | None, puts: dict[int, str]) -> None:
        ref = version_ref(self.version_id)
        if versioning is None and self.version_id not in (None, "null") and ref is None:
            raise ScenarioError(
                f"line {lineno}: the bucket is not versioned: S3 refuses a "
                "version_id other than 'null' (InvalidArgument)"
            )
        if ref is None:
            return
        if ref not in puts:
            raise ScenarioError(
                f"line {lineno}: version_id {self.version_id!r} names no put "
                '("@N" is the version created by the put on an earlier line N)'
            )
        if puts[ref] != self.key:
            raise ScenarioError(
                f"line {lineno}: version_id {self.version_id!r} names the put of "
                f"{puts[ref]!r} on line {ref}, not of {self.key!r}"
            )

    def run(self, run: Run, lineno: int) -> None:
        version = run.versions.resolve(lineno, self.version_id)
        s3 = run.rt.bucket(self.bucket)
        created(run, lineno, s3.delete(self.key, version), s3.versioning)


#: The storage classes a ``put`` takes (S3's PutObject ``x-amz-storage-class``).
STORAGE_CLASSES = (
    "STANDARD",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER",
    "DEEP_ARCHIVE",
    "GLACIER_IR",
)


def created(run: Run, lineno: int, done: Op, versioning: str | None) -> None:
    """Note the versions ``done`` (an S3 operation of line ``lineno``) made or removed, and the
    line its event came from."""
    run.versions.record(lineno, done, versioning)
    run.origins[(done.key, done.event["detail"]["object"]["sequencer"])] = lineno


@dataclass
class Deliver(Step):
    """``{"op": "deliver", "body": B}``: one SQS message whose body is ``B`` exactly as AWS
    would send it (a JSON object, serialised, or a string, sent as is), then the queue is
    drained."""

    op = "deliver"

    body: str | dict[str, Any] | list[Any]

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        if not isinstance(doc["body"], (str, dict, list)):
            raise ScenarioError(f"line {lineno}: deliver body must be a JSON object or a string")

    def run(self, run: Run, lineno: int) -> None:
        body = self.body
        run.rt.send_raw(body if isinstance(body, str) else json.dumps(body))
        run.rt.drain()


@dataclass
class Flush(Step):
    """``{"op": "flush", "chaos": {...}}``: deliver every event the S3 operations emitted so
    far under that chaos (:class:`~s3ingest.local.emulator.chaos.Chaos`), then drain the queue."""

    op = "flush"

    chaos: dict[str, Any] | None = None

    @classmethod
    def check(cls, lineno: int, doc: dict[str, Any]) -> None:
        check_chaos(lineno, doc)

    def run(self, run: Run, lineno: int) -> None:
        run.rt.flush(Chaos.from_json(self.chaos))
        run.rt.drain()


def version_ref(version_id: Any) -> int | None:
    """The put line ``N`` of a ``"version_id": "@N"`` reference; None for a literal version."""
    if isinstance(version_id, str) and version_id.startswith("@"):
        number = version_id[1:]
        return int(number) if number.isascii() and number.isdigit() else -1
    return None


class Versions:
    """Which version each put line created, and whether it still exists, for ``"@N"``."""

    def __init__(self) -> None:
        self._created: dict[int, str] = {}  # put line -> version id ("null": the null version)
        self._gone: set[int] = set()
        self._null_owner: dict[str, int] = {}  # key -> the put line owning its null version

    def resolve(self, lineno: int, version: str | None) -> str | None:
        """The version id a delete step names (``@N`` resolved).

        Raises
        ------
        ScenarioError
            When the version put on line N does not exist any more.
        """
        ref = version_ref(version)
        if ref is None:
            return version
        if ref in self._gone:
            raise ScenarioError(
                f"line {lineno}: version_id {version!r}: the version put on line "
                f"{ref} does not exist any more"
            )
        return self._created[ref]

    def record(self, lineno: int, op: Op, versioning: str | None) -> None:
        """Note what ``op`` created or removed."""
        owner = self._null_owner.get(op.key)
        if op.kind == "put":
            version = op.version_id or "null"
            self._created[lineno] = version
            if version == "null":  # a new null version replaces the old one
                self._replace_null(op.key, lineno)
        elif op.version_id is not None:  # one version deleted
            self._gone.update(
                line
                for line, v in self._created.items()
                if v == op.version_id and (v != "null" or line == owner)
            )
            if op.version_id == "null":
                self._null_owner.pop(op.key, None)
        elif versioning != "Enabled":  # unversioned, or a null delete marker (Suspended)
            self._replace_null(op.key, None)

    def _replace_null(self, key: str, line: int | None) -> None:
        owner = self._null_owner.pop(key, None)
        if owner is not None:
            self._gone.add(owner)
        if line is not None:
            self._null_owner[key] = line
