"""The ingest function's cold start makes only the DynamoDB client: S3 and SQS are made on
first use (issue 37), and then behave as the clients they wrap."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from s3ingest_fn import wiring
from s3ingest_fn.config import ClientConfig, IngestConfig
from tests.cold_start import ingest_cold_start_modules


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    services: list[str] = []

    def fake(clients: ClientConfig, service: str, **kwargs: Any) -> Any:
        services.append(service)
        return _Fake(service)

    monkeypatch.setattr(wiring, "client", fake)
    wiring.build_ingest_service.cache_clear()
    wiring._message_processor.cache_clear()
    yield services
    wiring.build_ingest_service.cache_clear()
    wiring._message_processor.cache_clear()


class _Fake:
    def __init__(self, service: str) -> None:
        self.service = service

    def head_object(self, **kwargs: Any) -> str:
        return f"{self.service}:{kwargs['Key']}"


def test_the_cold_start_makes_the_dynamodb_client_only(made: list[str]) -> None:
    settings = IngestConfig.from_env(
        {"LEDGER_TABLE_NAME": "ledger", "DEAD_LETTER_QUEUE_URL": "https://sqs/q"}
    )
    clients = ClientConfig.from_env({"AWS_DEFAULT_REGION": "us-east-1"})
    processor = wiring._message_processor(settings, clients)
    assert processor is not None
    assert made == ["dynamodb"]


def test_a_lazy_client_is_made_once_on_first_use_and_forwards(made: list[str]) -> None:
    clients = ClientConfig.from_env({"AWS_DEFAULT_REGION": "us-east-1"})
    lazy = wiring.lazy_client(clients, "s3")
    assert not lazy.made and made == []
    results: list[str] = []
    threads = [
        threading.Thread(target=lambda: results.append(lazy.head_object(Key="k"))) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == ["s3:k"] * 8
    assert lazy.made and made == ["s3"]
    assert lazy.service == "s3"


def test_the_cold_start_imports_no_boto3(tmp_path: Path) -> None:
    """The cold start's DynamoDB client is botocore's own: boto3 (and s3transfer, which it
    imports, about a third of the cold start) is imported on the first S3 client only."""
    loaded = [
        m
        for m in ingest_cold_start_modules(tmp_path)
        if m.split(".")[0] in ("boto3", "s3transfer", "botocore")
    ]
    assert "botocore.client" in loaded  # the check ran: the DynamoDB client was made
    assert [m for m in loaded if not m.startswith("botocore")] == []


def test_clients_are_botocore_s_with_the_configuration_and_s3_has_boto3_transfers() -> None:
    clients = ClientConfig(
        region="eu-west-1", access_key_id="AKIDEXAMPLE", secret_access_key="secret"
    )
    ddb = wiring._client(clients, "dynamodb")
    s3 = wiring._client(clients, "s3")
    assert ddb.meta.region_name == "eu-west-1" and s3.meta.region_name == "eu-west-1"
    assert ddb._request_signer._credentials.access_key == "AKIDEXAMPLE"
    assert s3._request_signer._credentials.secret_key == "secret"
    assert hasattr(s3, "upload_file") and hasattr(s3, "download_file")
    assert wiring._client(clients, "s3").meta.events is not None  # one boto3 session, reused


def test_the_cold_start_imports_no_ledger_scan(tmp_path: Path) -> None:
    """The ingest function never scans the ledger: the adapter's scan (and its columns) is
    imported on first use of its names, not with the adapter."""
    loaded = ingest_cold_start_modules(tmp_path)
    assert "s3ingest_fn.adapters.dynamo_ledger.operations" in loaded  # the check ran
    assert "s3ingest_fn.adapters.dynamo_ledger.scan" not in loaded
    assert "s3ingest_fn.core.ledger_columns" not in loaded
