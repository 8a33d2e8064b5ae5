"""The redaction of object keys in the functions' logs (``logKeys``, issue 24): plain unchanged,
hashed stable and keyed, none absent; one filter on every function logger."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from s3ingest_fn import wiring
from s3ingest_fn.config import LOG_KEY_SECRET_ARN, LOG_KEYS, ConfigError, LogConfig, use_env
from s3ingest_fn.core.model import Outcome, Result
from s3ingest_fn.core.ports import PublishOutcome
from s3ingest_fn.handlers import change_stream, ingest
from s3ingest_fn.log_keys import HASH_HEX, KeyFilter, KeyPolicy, key_hash

KEY = "private/patient 0042/scan.dcm"
OTHER = "private/patient 0043/scan.dcm"
SECRET = b"s" * 64


def test_the_hash_is_hmac_sha256_truncated_stable_and_keyed() -> None:
    digest = key_hash(SECRET, KEY)
    assert digest == hmac.new(SECRET, KEY.encode(), hashlib.sha256).hexdigest()[:HASH_HEX]
    assert len(digest) == HASH_HEX and int(digest, 16) >= 0
    assert key_hash(SECRET, KEY) == digest  # stable: grep-able
    assert key_hash(b"t" * 64, KEY) != digest  # keyed: another secret, another hash
    assert key_hash(SECRET, OTHER) != digest
    assert key_hash(SECRET, "k\udcff") != key_hash(SECRET, "k")  # a lone surrogate hashes


def _fields() -> dict[str, Any]:
    return {
        "outcome": "retried",
        "key": KEY,
        "encoded_key": "private/patient+0042/scan.dcm",
        "reason": f"processor-failed: ValueError: cannot read {KEY}",
        "effect_errors": {"thumbs": f"thumbs: KeyError: {KEY!r}"},
        "samples": [{"key": OTHER, "kind": "missing"}],
        "out_of_scope_samples": ["private/old/x.bin"],
        "reports": [{"bucket": "b", "samples": [{"key": "private/r.bin", "kind": "missing"}]}],
        "keys": 3,  # a count, left as it is
    }


def test_plain_leaves_every_field_as_it_is() -> None:
    fields = _fields()
    assert KeyPolicy("plain").fields(fields) is fields
    assert fields == _fields()


def test_none_leaves_every_key_out() -> None:
    out = KeyPolicy("none").fields(_fields())
    text = json.dumps(out)
    assert "private/" not in text and "patient" not in text
    assert "key" not in out and "encoded_key" not in out and "key_hash" not in out
    assert out["reason"] == "processor-failed: ValueError: cannot read <key>"
    assert out["samples"] == [{"kind": "missing"}]
    assert out["out_of_scope_samples"] == []
    assert out["reports"] == [{"bucket": "b", "samples": [{"kind": "missing"}]}]
    assert out["keys"] == 3 and out["outcome"] == "retried"


def test_hashed_replaces_every_key_by_its_hash() -> None:
    policy = KeyPolicy("hashed", SECRET)
    out = policy.fields(_fields())
    text = json.dumps(out)
    assert "private/" not in text
    h = key_hash(SECRET, KEY)
    assert out["key_hash"] == h
    assert out["encoded_key_hash"] == key_hash(SECRET, _fields()["encoded_key"])
    assert out["reason"] == f"processor-failed: ValueError: cannot read key#{h}"
    assert out["effect_errors"] == {"thumbs": f"thumbs: KeyError: 'key#{h}'"}
    assert out["samples"] == [{"kind": "missing", "key_hash": key_hash(SECRET, OTHER)}]
    assert out["out_of_scope_samples"] == [key_hash(SECRET, "private/old/x.bin")]


def test_a_reconciliation_and_reprocess_summary_keep_no_key() -> None:
    # GIVEN the samples a reconciliation (rows behind each processor) and a reprocess run
    # (failed keys, with the processor's error quoting the key) log in their summaries
    fields = {
        "behind_samples": {"thumbs": [KEY, OTHER], "audit": []},
        "failures": [
            {"bucket": "b", "key": KEY, "error": f"processor-failed: thumbs: KeyError: {KEY}"}
        ],
    }
    # THEN none leaves them out, hashed replaces them, in place and in the errors' text
    out = KeyPolicy("none").fields(fields)
    assert "private/" not in json.dumps(out)
    assert out["behind_samples"] == {"thumbs": [], "audit": []}
    assert out["failures"] == [
        {"bucket": "b", "error": "processor-failed: thumbs: KeyError: <key>"}
    ]
    left = {"count": 1, "samples": [{"bucket": "b", "key": KEY}], "command": "s3ingest ..."}
    assert KeyPolicy("none").fields({"left_behind": left})["left_behind"] == {
        "count": 1,
        "samples": [{"bucket": "b"}],
        "command": "s3ingest ...",
    }
    hashed = KeyPolicy("hashed", SECRET).fields(fields)
    h = key_hash(SECRET, KEY)
    shown = KeyPolicy("hashed", SECRET).fields({"left_behind": left})["left_behind"]
    assert shown["samples"] == [{"bucket": "b", "key_hash": h}]
    assert hashed["behind_samples"]["thumbs"] == [h, key_hash(SECRET, OTHER)]
    assert hashed["failures"][0]["key_hash"] == h
    assert hashed["failures"][0]["error"].endswith(f"key#{h}")


def test_an_invalid_message_detail_that_is_its_key_is_left_out() -> None:
    fields = {"outcome": "invalid", "reason": "bad-percent-encoding", "detail": "private%ZZ"}
    for mode in ("none", "hashed"):
        assert "detail" not in KeyPolicy(mode, SECRET).fields(fields)
    other = {"outcome": "invalid", "reason": "key-too-long", "detail": "1100 bytes"}
    assert KeyPolicy("none").fields(other)["detail"] == "1100 bytes"


@pytest.fixture
def lines() -> Iterator[list[dict[str, Any]]]:
    """The ingest logger's records as Powertools' JSON lines (a handler of the test's own)."""
    found: list[dict[str, Any]] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            found.append(json.loads(self.format(record)))

    handler = Capture()
    handler.setFormatter(LambdaPowertoolsFormatter())
    logger = logging.getLogger(ingest.logger.name)
    logger.addHandler(handler)
    try:
        yield found
    finally:
        logger.removeHandler(handler)


def _record_line() -> None:
    result = Result(Outcome.APPLIED, "newer-sequencer", "b", KEY, "00AA", {"source": "live"})
    ingest._log_record(result, "m-1")


def test_the_ingest_line_follows_the_invocation_setting(
    lines: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert any(isinstance(f, KeyFilter) for f in logging.getLogger(ingest.logger.name).filters)
    with use_env({}):
        _record_line()
    with use_env({LOG_KEYS: "none"}):
        _record_line()
    monkeypatch.setattr(wiring, "function_key_policy", lambda: KeyPolicy("hashed", SECRET))
    _record_line()
    plain, none, hashed = lines
    assert plain["key"] == KEY
    assert "key" not in none and "key_hash" not in none and none["bucket"] == "b"
    assert "key" not in hashed and hashed["key_hash"] == key_hash(SECRET, KEY)


def test_a_policy_that_cannot_be_read_leaves_keys_out(lines: list[dict[str, Any]]) -> None:
    with use_env({LOG_KEYS: "hashed"}):  # no secret named: the configuration is invalid
        _record_line()
    (line,) = lines
    assert "key" not in line and "key_hash" not in line and line["outcome"] == "applied"


def test_log_config_reads_and_writes_its_variables() -> None:
    assert LogConfig.from_env({}) == LogConfig("plain")
    assert LogConfig("plain").to_env() == {}
    config = LogConfig("hashed", "arn:aws:secretsmanager:us-east-1:1:secret:k")
    assert LogConfig.from_env(config.to_env()) == config
    with pytest.raises(ConfigError, match="LOG_KEYS='secret' is not one of plain, hashed, none"):
        LogConfig.from_env({LOG_KEYS: "secret"})
    with pytest.raises(ConfigError, match=LOG_KEY_SECRET_ARN):
        LogConfig.from_env({LOG_KEYS: "hashed"})


def test_key_policy_reads_the_secret_once_given() -> None:
    class Secrets:
        calls: list[str] = []

        def get_secret_value(self, SecretId: str) -> dict[str, str]:
            self.calls.append(SecretId)
            return {"SecretString": "s" * 64}

    client = Secrets()
    assert wiring.key_policy(client, "none", None) == KeyPolicy("none")
    assert wiring.key_policy(client, "hashed", "arn:x") == KeyPolicy("hashed", SECRET)
    assert client.calls == ["arn:x"]
    with pytest.raises(ValueError, match="secret"):
        wiring.key_policy(client, "hashed", None)


def test_the_relay_adds_the_key_hash_and_keeps_the_key() -> None:
    sent: list[Any] = []

    class Publisher:
        def publish(self, entries: Any) -> PublishOutcome:
            sent.extend(entries)
            return PublishOutcome(refused={}, stopped=None)

    entry = {
        "Source": "s3ingest",
        "DetailType": "Object Ingested",
        "EventBusName": "bus",
        "Detail": json.dumps({"id": "c", "key": KEY}),
        "Resources": [],
    }
    wrapped = change_stream.KeyHashing(Publisher(), KeyPolicy("hashed", SECRET))
    outcome = wrapped.publish([entry])  # type: ignore[list-item]
    assert outcome == PublishOutcome(refused={}, stopped=None)
    detail = json.loads(sent[0]["Detail"])
    assert detail == {"id": "c", "key": KEY, change_stream.KEY_HASH_FIELD: key_hash(SECRET, KEY)}
