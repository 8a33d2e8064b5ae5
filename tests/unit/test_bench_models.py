"""The onboarding and reprocess models print the 40,000 table-quota case and S3's per-prefix
GET floor (issue 37), with the CLI's own figures (s3ingest.floor)."""

from __future__ import annotations

from bench import onboard_model, reprocess_model


def test_the_onboarding_model_prints_the_table_quota_and_the_s3_floor() -> None:
    per = onboard_model.PerObject(
        list_requests=0.001, ledger_writes=1.0, ledger_reads=0.0, heads=0.05, lambda_invocations=0
    )
    lines = onboard_model.report(per)
    quota = next(line for line in lines if "ledgerWarmWriteUnits=40000" in line)
    assert quota.startswith("listing backfill, ledgerWarmWriteUnits=40000 (the table quota")
    assert ": 21 min (" in quota and "ledger 21 min" in quota  # 5e7 / 40,000 = 20.8 min
    assert any(line.startswith("S3's per-prefix floor: 7.6 min for the HEADs") for line in lines)
    assert onboard_model.ddb_seconds(50_000_000, None) == 5_375  # 89.6 min, the ramp


def test_the_reprocess_model_prints_the_cli_s_segments_and_the_s3_floor() -> None:
    per = reprocess_model.PerKey(ledger_writes=2.0, scan_pages=0.001, processor_runs=1, s3_gets=1)
    lines = reprocess_model.report(per)
    chosen = next(line for line in lines if line.startswith("the CLI's choice"))
    assert "(83 segments): 0.7 h" in chosen and "binds: DynamoDB write throughput" in chosen
    assert lines[-1].startswith("S3's per-prefix floor: 151.5 min for the processor's reads")
