"""The onboarding's progress polls read each listing checkpoint once per write, not per poll."""

from __future__ import annotations

import json
from typing import Any

import boto3
from moto import mock_aws

from s3ingest.onboard import CHECKPOINT_FOLDER, PLAN_FILE, checkpoint_progress

PREFIX = f"{CHECKPOINT_FOLDER}/landing/run-1/"


class _CountingS3:
    """A boto3 S3 client that counts its GetObject calls."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.gets: list[str] = []

    def get_object(self, **kwargs: Any) -> Any:
        self.gets.append(kwargs["Key"])
        return self._client.get_object(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _put(s3: Any, name: str, doc: dict[str, Any]) -> None:
    s3.put_object(Bucket="checkpoints", Key=PREFIX + name, Body=json.dumps(doc).encode())


def test_a_poll_reads_only_the_checkpoints_written_since_the_last_one(monkeypatch: Any) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="checkpoints")
        _put(client, PLAN_FILE, {"shards": [{"id": "a"}, {"id": "b"}]})
        _put(client, "a.json", {"done": True, "counts": {"listed": 1000}})
        _put(client, "b.json", {"done": False, "counts": {"listed": 10}})
        s3 = _CountingS3(client)
        seen: dict[str, tuple[str, Any]] = {}

        first = checkpoint_progress(s3, "checkpoints", "landing", "run-1", seen)
        assert len(s3.gets) == 3
        assert first == {"shards": {"done": 1, "started": 2, "planned": 2}, "objects": 1010}

        s3.gets.clear()
        _put(client, "b.json", {"done": True, "counts": {"listed": 500}})
        second = checkpoint_progress(s3, "checkpoints", "landing", "run-1", seen)
        assert s3.gets == [PREFIX + "b.json"]
        assert second == {"shards": {"done": 2, "started": 2, "planned": 2}, "objects": 1500}

        s3.gets.clear()
        uncached = checkpoint_progress(s3, "checkpoints", "landing", "run-1")
        assert len(s3.gets) == 3
        assert uncached == second
