"""``python -m bench --only attest`` (issue 38): the trees' figures beside the diff's, on few
keys."""

from __future__ import annotations

from bench.attestation_tree import measure


def test_the_attestation_bench_builds_equal_partitioned_roots_in_bounded_memory() -> None:
    figures = measure(5000)
    assert figures["partitioned_equal"] == 1.0
    assert figures["differing"] == 50 and figures["drift"] == 0
    assert figures["held_hashes"] <= 2 * 15 * figures["depth"]


def test_the_fan_out_bench_merges_every_partitions_run() -> None:
    from bench.attestation_fanout import run

    figures = run(3000)
    # every key merged from the 64 runs, the 1% differing named, the runs gzip
    assert figures["keys"] == 3000 and figures["differing"] == 30
    assert 0 < figures["bytes_per_key"] < 100
