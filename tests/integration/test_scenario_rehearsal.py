"""The example rehearsal (``examples/scenarios/rehearsal.jsonl``, ``docs/scenarios.md``): an
onboarding that fails and is re-run while uploads go on, lifecycle expirations past a hold,
time passing, and the operator's repair, review and deploy check, ending converged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from s3ingest.local.rehearsal.scenario import run_scenario

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "rehearsal.jsonl"


def test_the_rehearsal_recovers_and_converges(emulator: Any) -> None:
    result = run_scenario(EXAMPLE, emulator=emulator)
    assert result["error"] is None
    assert result["converged"] is True, result["differences"]
    assert result["effects_problems"] == []
    # the first onboarding failed as injected; the second, with uploads during it, is done
    (failure,) = result["expected_failures"]
    assert (failure["op"], failure["failed"]) == ("onboard", True)
    failed, done = result["onboardings"]
    assert (failed["status"], done["status"]) == ("FAILED", "done")
    assert done["during"]["ops"] == 2
    # the third expiration within the window was held; after the clock moved, the fourth ran
    (page,) = result["held_pages"]
    assert [(h["key"], h["kind"]) for h in page["held"]] == [("2024/q3.csv", "removed")]
    effects = {m["key"]: m["effect"] for m in result["messages"] if m["step"] in (18, 23)}
    assert effects == {"2024/q3.csv": "held", "2024/q4.csv": "done"}
    assert result["held"] == []  # approved
    # the lifecycle's deletes are S3's, with its reason
    expired = {m["event"] for m in result["messages"] if m["step"] in (14, 16, 18, 23)}
    assert expired == {"Object Deleted/Lifecycle Expiration/Delete Marker Created"}
    multipart = [m for m in result["messages"] if m["key"] == "2025/big.bin"]
    assert [m["event"] for m in multipart] == ["Object Created/CompleteMultipartUpload"]
    # the lost upload was repaired, and the canary went through
    (repaired,) = result["repairs"]
    assert repaired["due"] == ["absent-from-ledger"] and repaired["agrees"] is True
    (verified,) = result["verifications"]
    assert verified["ok"] is True
    assert {r["key"]: r["state"] for r in result["ledger"] if not r["key"].startswith("_")} == {
        "2024/q1.csv": "deleted",
        "2024/q2.csv": "deleted",
        "2024/q3.csv": "deleted",
        "2024/q4.csv": "deleted",
        "2025/big.bin": "present",
        "2025/new.csv": "present",
        "2025/lost.csv": "present",
    }
