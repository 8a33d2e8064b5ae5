"""The unit tests run without a network (tests/unit/conftest.py, pytest-socket)."""

from __future__ import annotations

import socket

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import HTTPClientError
from pytest_socket import SocketBlockedError

#: pytest-socket warns as it refuses; here the refusal is the point.
pytestmark = pytest.mark.filterwarnings("ignore:A test tried to use socket")


def test_a_unit_test_cannot_open_a_socket() -> None:
    with pytest.raises(SocketBlockedError):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)


def test_nor_reach_aws_through_a_client() -> None:
    # GIVEN a client of a real endpoint (credentials are the suite's fakes)
    s3 = boto3.client("s3", region_name="us-east-1", config=Config(retries={"max_attempts": 1}))
    # WHEN it calls: THEN nothing leaves the process
    with pytest.raises(HTTPClientError, match="A test tried to use socket"):
        s3.list_buckets()


@pytest.mark.allow_hosts(["127.0.0.1"])
def test_a_test_may_name_the_hosts_it_connects_to() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        assert sock.fileno() >= 0
