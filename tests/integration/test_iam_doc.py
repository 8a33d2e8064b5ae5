"""``docs/iam.md``'s per-command table is the operator commands' recorded AWS calls
(:mod:`tests.iam_commands`): current, and saying which commands need the stack's key and
``operatorRoleArns``."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.iam_commands import BEGIN, DOC, END, generated


@pytest.fixture(scope="module")
def table(emulator: Any) -> str:
    """The generated ``docs/iam.md``, recorded once for the module (40 to 90 s)."""
    return generated(emulator)


def _rows(text: str) -> dict[str, list[str]]:
    """Command label -> its rows of the generated table."""
    section = text.split(BEGIN, 1)[1].split(END, 1)[0]
    rows: dict[str, list[str]] = {}
    label = ""
    for line in section.splitlines()[2:]:
        first = line.split("|")[1].strip()
        label = first or label
        rows.setdefault(label, []).append(line)
    return rows


def test_docs_iam_is_current(table: str) -> None:
    # GIVEN the commands' calls recorded now WHEN the table is rendered THEN the doc has it
    assert table == DOC.read_text(encoding="utf-8"), "docs/iam.md is not current: make iam-doc"


def test_the_commands_that_read_or_write_encrypted_data_need_the_key(table: str) -> None:
    rows = _rows(table)
    needs_key = {
        label for label, lines in rows.items() if any("the stack's key" in line for line in lines)
    }
    # the ledger, the queues or the buckets' objects: kms:Decrypt at least
    for command in ("explain", "held", "approve", "reject", "redrive", "repair", "reconcile"):
        assert any(re.match(f"`{command}[ `]", label) for label in needs_key), command
    # status reads queue attributes, metrics and executions, and of the stack's objects only
    # the newest attestation: the key for that one
    status = rows["`status`"]
    reads = [line for line in status if "s3:GetObject" in line]
    assert "`status`" in needs_key
    assert reads and all("keys under `attestations/`" in line for line in reads), reads
    assert not any("dynamodb:" in line or "sqs:ReceiveMessage" in line for line in status)


def test_the_commands_that_send_to_the_ingest_queue_name_operator_role_arns(table: str) -> None:
    rows = _rows(table)
    senders = {
        label for label, lines in rows.items() if any("operatorRoleArns" in line for line in lines)
    }
    assert senders == {
        "`repair`",
        "`approve`",
        "`redrive`, invalid messages kept",
        "`reconcile --source inventory`",
        "`reconcile --source listing`",
    }
