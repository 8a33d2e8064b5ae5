"""``examples/attestation/recompute_root.py``, the reader's own 30 lines of docs/attestation.md,
gives the module's roots on the same leaves (issue 38)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from s3ingest_fn.core.attestation import ABSENT, PRESENT, PairBuilder, key_order
from s3ingest_fn.services.attestation import leaf_from_json

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "attestation" / "recompute_root.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("recompute_root", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


side_st = st.fixed_dictionaries(
    {
        "version_id": st.text(max_size=8),
        "etag": st.text(max_size=8),
        "state": st.sampled_from([PRESENT, ABSENT]),
        "processors": st.dictionaries(
            st.sampled_from(["default", "extract", "x-2"]),
            st.sampled_from(["1", "3", "none", "-"]),
        ),
    }
)


def _entries(keys: list[str], sides: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"key": k, "bucket": sides[2 * i], "ledger": sides[2 * i + 1]} for i, k in enumerate(keys)
    ]


def _module_roots(bucket: str, entries: list[dict[str, Any]]) -> dict[str, str]:
    builder = PairBuilder()
    for e in sorted(entries, key=lambda e: key_order(e["key"])):
        builder.add(
            e["key"],
            leaf_from_json(bucket, e["key"], e["bucket"]),
            leaf_from_json(bucket, e["key"], e["ledger"]),
        )
    left, right = builder.roots()
    return {"bucket": left.hex(), "ledger": right.hex()}


@settings(max_examples=50)
@given(st.lists(st.text(min_size=1, max_size=10), unique=True, max_size=300), st.data())
def test_the_example_recomputes_the_modules_roots(keys: list[str], data: st.DataObject) -> None:
    sides = data.draw(st.lists(side_st, min_size=2 * len(keys), max_size=2 * len(keys)))
    entries = _entries(keys, sides)
    lines = [json.dumps(e) for e in entries] + [json.dumps({"key": "gone", "skipped": True})]
    assert _example().roots("bkt", lines) == _module_roots("bkt", entries)


def test_the_example_runs_as_a_script(tmp_path: Path) -> None:
    side = {"version_id": "v1", "etag": "e", "state": PRESENT, "processors": {"default": "1"}}
    entries = _entries([f"k{i}" for i in range(40)], [side] * 80)
    document = {"document": {"bucket": "b", "roots": _module_roots("b", entries)}}
    (tmp_path / "doc.json").write_text(json.dumps(document))
    (tmp_path / "leaves.jsonl").write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "doc.json", "leaves.jsonl"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["match"] is True


def test_the_example_is_about_thirty_lines() -> None:
    code = [
        line
        for line in EXAMPLE.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith(("#", '"""', "import"))
    ]
    body = code[: next(i for i, line in enumerate(code) if line.startswith("if __name__"))]
    assert len(body) <= 32


def test_docs_show_the_examples_lines() -> None:
    """docs/attestation.md's recomputation is the tested example's, line for line."""
    doc = (EXAMPLE.parents[2] / "docs" / "attestation.md").read_text()
    source = EXAMPLE.read_text()
    body = source[source.index("def leaf") : source.index("\n\n\nif __name__")]
    shown = doc[doc.index("def leaf") :]
    shown = shown[: shown.index("```")].rstrip()
    assert shown.replace("\n\n", "\n") == body.replace("\n\n\n", "\n\n").replace("\n\n", "\n")
