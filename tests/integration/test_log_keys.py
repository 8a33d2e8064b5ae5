"""``logKeys`` over a local run (issue 24, Done when: "with ``logKeys: none`` no log line of a
local run contains a key"): live puts and deletes through the ingest handler with its
per-record line (as deployed), the example processor, the change relay, a fan-out
reconciliation that finds and repairs missed keys, a listing backfill and an invalid message
whose detail is its malformed key; every record the functions' loggers emit is captured (their
Powertools JSON lines, at DEBUG) and every other record reaching the root logger at INFO (the
level Lambda's JSON log format passes; botocore's DEBUG wire log is never on in a function)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from typer.testing import CliRunner

from s3ingest.local.stack.runtime import LocalRuntime, local_settings
from s3ingest_fn import contract
from s3ingest_fn.core.model import Result
from s3ingest_fn.handlers import ingest
from s3ingest_fn.log_keys import key_hash

#: What every key of the run starts with (in any encoding): no other text of a log line has it.
MARK = "zqlk"
LIVE = ("zqlk-alpha/report 7731.csv", "zqlk-beta/ünïcode-8842.txt", "zqlk-gamma/gone-5519.bin")
#: A put whose event is lost: the reconciliation finds it (a drift sample) and repairs it.
MISSED = "zqlk-delta/missed-6604.bin"
#: A put whose event is lost, recorded by the listing backfill.
LISTED = "zqlk-epsilon/listed-3390.bin"
#: A key that is not valid percent-encoding (``invalid``, its detail the raw key).
MALFORMED = "zqlk-zeta%ZZ-4471"
#: The functions' loggers (Powertools, one per service).
SERVICES = sorted(
    {
        contract.INGEST_SERVICE,
        contract.CHANGE_RELAY_SERVICE,
        contract.RECONCILE_SERVICE,
        contract.BACKFILL_SERVICE,
        contract.LISTING_SERVICE,
        contract.DELIVERY_CHECK_SERVICE,
        contract.BUCKET_SETUP_SERVICE,
    }
)


class _Capture(logging.Handler):
    """Every record handled, as the Powertools JSON line it formats to."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.setFormatter(LambdaPowertoolsFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def captured() -> Iterator[_Capture]:
    """A capture on every function logger at DEBUG and on the root logger at INFO (restored
    after)."""
    capture, root = _Capture(logging.DEBUG), logging.getLogger()
    wide = _Capture(logging.INFO)
    wide.lines = capture.lines
    # a function logger's record that propagates is the first capture's already
    wide.addFilter(lambda record: record.name not in SERVICES)
    loggers = [logging.getLogger(name) for name in SERVICES]
    levels = [(lg, lg.level) for lg in [*loggers, root]]
    for lg in loggers:
        lg.addHandler(capture)
        lg.setLevel(logging.DEBUG)
    root.addHandler(wide)
    root.setLevel(logging.INFO)
    try:
        yield capture
    finally:
        for lg in loggers:
            lg.removeHandler(capture)
        root.removeHandler(wide)
        for lg, level in levels:
            lg.setLevel(level)


def _logging_handler(rt: LocalRuntime) -> None:
    """The runtime's ingest handler, logging each record as the deployed handler does (its
    default ``emit``, :func:`s3ingest_fn.handlers.ingest._log_record`) besides recording it."""

    def emit(result: Result, message_id: str) -> None:
        rt._emit(result, message_id)
        ingest._log_record(result, message_id)

    rt.handler = ingest.make_handler(rt.processor, rt.settings.record_concurrency, emit=emit)


def _malformed_body(bucket: str) -> str:
    record = {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "eventName": "ObjectCreated:Put",
        "eventTime": "2026-12-02T10:00:00.000Z",
        "s3": {
            "bucket": {"name": bucket},
            "object": {"key": MALFORMED, "size": 1, "sequencer": "0066AED6DCD90281E5"},
        },
    }
    return json.dumps({"Records": [record]})


def _run(emulator: Any, mode: str) -> LocalRuntime:
    rt = LocalRuntime(emulator, local_settings(log_keys=mode))
    _logging_handler(rt)
    for key in LIVE:
        rt.faithful.put(key, f"body of {key}")
    rt.flush()
    rt.drain()
    rt.faithful.delete(LIVE[2])
    rt.flush()
    rt.drain()
    rt.send_raw(_malformed_body(rt.resources.bucket))
    rt.drain()
    rt.faithful.put(MISSED, b"missed")
    rt.faithful.take_pending()  # its event is lost
    summary = rt.reconcile_fan_out(partitions=2, segments=1)
    assert summary["drift"]["missing"] == 1
    rt.faithful.put(LISTED, b"listed")
    rt.faithful.take_pending()
    assert rt.backfill_listing()["execution"]["status"] == "SUCCEEDED"
    assert rt.compare().differences == []
    return rt


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["plain", "none"])
def test_with_log_keys_none_no_log_line_of_a_local_run_contains_a_key(
    emulator: Any, captured: _Capture, mode: str
) -> None:
    rt = _run(emulator, mode)
    try:
        lines = captured.lines
        assert any('"record processed"' in line for line in lines)
        assert any('"reconciliation finished"' in line for line in lines)
        assert any('"change published"' in line for line in lines)
        assert any('"listing shard"' in line for line in lines)
        assert any('"bad-percent-encoding"' in line for line in lines)
        keyed = [line for line in lines if MARK in line]
        if mode == "plain":  # today's lines name the keys: the check below can fail
            text = "\n".join(keyed)
            for stem in ("zqlk-alpha", "zqlk-beta", "zqlk-gamma", "zqlk-delta", "zqlk-zeta"):
                assert stem in text, stem
        else:
            assert keyed == []
            assert not any('"key_hash"' in line for line in lines)
    finally:
        rt.close()


def test_hashed_lines_carry_the_keyed_hash_the_cli_computes(
    emulator: Any, captured: _Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from s3ingest import cli
    from s3ingest.cli import context as cli_context
    from s3ingest.commands.context import Deployed
    from s3ingest.deployed import DeployedStack

    rt = LocalRuntime(emulator, local_settings(log_keys="hashed"))
    try:
        _logging_handler(rt)
        rt.faithful.put(LIVE[0], b"x")
        rt.flush()
        rt.drain()
        arn = rt.resources.log_key_secret_arn
        assert arn is not None
        secret = emulator.client("secretsmanager").get_secret_value(SecretId=arn)["SecretString"]
        expected = key_hash(secret.encode(), LIVE[0])
        records = [json.loads(line) for line in captured.lines if "record processed" in line]
        assert [r["key_hash"] for r in records] == [expected]
        assert not any(MARK in line for line in captured.lines)
        # the change event keeps the key for subscribers and adds its hash
        (change,) = rt.changes
        assert (change["detail"]["key"], change["detail"]["keyHash"]) == (LIVE[0], expected)

        class _Session:
            def client(self, service: str) -> Any:
                return emulator.client(service)

        stack = DeployedStack("S3Ingest-test", {"LogKeySecretArn": arn})
        monkeypatch.setattr(cli_context, "connect", lambda name: Deployed(_Session(), stack))
        result = CliRunner().invoke(cli.app, ["log-key", LIVE[0], "--stack", "X", "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == {"key_hash": expected}
        plain = CliRunner().invoke(cli.app, ["log-key", LIVE[0], "--stack", "X"])
        assert plain.stdout.strip() == expected
        monkeypatch.setattr(
            cli_context,
            "connect",
            lambda name: Deployed(_Session(), DeployedStack("S3Ingest-test", {})),
        )
        missing = CliRunner().invoke(cli.app, ["log-key", LIVE[0], "--stack", "X"])
        assert missing.exit_code == 3 and "LogKeySecretArn" in missing.output
    finally:
        rt.close()


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("plain", "logs object keys in plain (logKeys: plain)"),
        ("none", "leaves object keys out of its logs (logKeys: none)"),
    ],
)
def test_log_key_says_a_stack_hashes_no_key(
    emulator: Any, monkeypatch: pytest.MonkeyPatch, mode: str, says: str
) -> None:
    from s3ingest import cli
    from s3ingest.cli import context as cli_context
    from s3ingest.commands.context import Deployed
    from s3ingest.deployed import DeployedStack
    from s3ingest.local.stack.daemon import outputs

    # GIVEN a local stack (the outputs local up writes) whose logs hash no key
    rt = LocalRuntime(emulator, local_settings(log_keys=mode))
    try:
        stack = DeployedStack("S3Ingest-local", outputs(rt))
        monkeypatch.setattr(cli_context, "connect", lambda name: Deployed(None, stack))
        # WHEN log-key is asked for a key's hash
        result = CliRunner().invoke(cli.app, ["log-key", LIVE[0], "--stack", "X"])
        # THEN it says there is no hash to look up, not that the stack lacks an output
        assert result.exit_code == 3
        said = " ".join(result.output.split())
        assert says in said and "to look up" in said
        assert "is it an s3ingest stack" not in said
    finally:
        rt.close()
