"""The scenario steps' registry (:mod:`s3ingest.local.rehearsal.steps`) against their reference:
every step has its line in a step table of ``docs/scenarios.md`` (the incident steps: ``docs/
local-runtime.md#incidents-in-scenarios``) naming each of its fields, and every step line there
is a registered step; the report lists the steps fill are the result's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from s3ingest.local.rehearsal.steps import STEPS

ROOT = Path(__file__).resolve().parents[2]
#: The pages whose tables list the steps.
PAGES = (ROOT / "docs" / "scenarios.md", ROOT / "docs" / "local-runtime.md")
OP = re.compile(r'\{"op": "(\w+)"')
#: The row naming the ops that take ``"bucket"`` (``"bucket": N`` on `put`, `delete`, ...).
BUCKET_ROW = re.compile(r'^\| `"bucket": N` on (.*?) \|')


def _rows() -> dict[str, list[str]]:
    """Each op's table rows (the whole row), from every page."""
    rows: dict[str, list[str]] = {}
    for page in PAGES:
        for line in page.read_text(encoding="utf-8").splitlines():
            if not line.startswith("| "):
                continue
            first = line.split(" | ")[0]
            for op in OP.findall(first):
                rows.setdefault(op, []).append(line)
            if bucket := BUCKET_ROW.match(line):
                for op in re.findall(r"`(\w+)`", bucket.group(1)):
                    rows.setdefault(op, []).append('"bucket"')
    return rows


def test_every_documented_step_is_registered() -> None:
    assert sorted(set(_rows()) - set(STEPS)) == []


@pytest.mark.parametrize("op", list(STEPS))
def test_every_step_has_its_doc_line_naming_its_fields(op: str) -> None:
    rows = _rows().get(op)
    assert rows, f'no table row starting {{"op": "{op}"}} in docs/scenarios.md'
    text = "\n".join(rows)
    undocumented = [name for name in STEPS[op].json_fields() if f'"{name}"' not in text]
    assert undocumented == []


def test_the_steps_report_lists_are_the_results_keys_documented() -> None:
    reports = {step.report for step in STEPS.values() if step.report}
    assert reports >= {"reconciliations", "backfills", "reviews", "redrives"}
    text = (ROOT / "docs" / "scenarios.md").read_text(encoding="utf-8")
    text += (ROOT / "docs" / "local-runtime.md").read_text(encoding="utf-8")
    assert sorted(r for r in reports if f"`{r}`" not in text) == []
