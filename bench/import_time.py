"""The ingest handler module's import time against ``import boto3`` alone (fresh interpreters).

Target: at most 1.3 times. Median of 9 runs each, measured inside the child interpreter with
``time.perf_counter`` around the import (interpreter start-up excluded). The cold-start build
(settings, the clients, the X-Ray tracer when ``tracing`` is on) is measured both ways against
``import boto3`` plus the same three clients: target at most 1.2 with the default (tracing off).
"""

from __future__ import annotations

import statistics
import subprocess
import sys

CHILD = "import time; t=time.perf_counter(); import {mod}; print(time.perf_counter()-t)"
#: The ingest function's cold start: import, settings, clients, and (``tracing`` on) the
#: X-Ray tracer; POWERTOOLS_TRACE_DISABLED is what the stack sets for ``tracing=false``.
BUILD = (
    "import os, time; os.environ.update(LEDGER_TABLE_NAME='t', DEAD_LETTER_QUEUE_URL='u', "
    "AWS_DEFAULT_REGION='us-east-1', POWERTOOLS_TRACE_DISABLED='{disabled}'); "
    "t=time.perf_counter(); "
    "import s3ingest_fn.handlers.ingest as h; h._build_from_env(); "
    "print(time.perf_counter()-t)"
)


def _median(code: str, runs: int = 9) -> float:
    samples = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True
        ).stdout
        samples.append(float(out.strip().splitlines()[-1]))
    return statistics.median(samples)


def run() -> None:
    boto3_s = _median(CHILD.format(mod="boto3"))
    handler_s = _median(CHILD.format(mod="s3ingest_fn.handlers.ingest"))
    traced_s = _median(BUILD.format(disabled="false"), runs=7)
    untraced_s = _median(BUILD.format(disabled="true"), runs=7)
    boto3_clients = _median(
        "import time; t=time.perf_counter(); import boto3; "
        "[boto3.client(s, region_name='us-east-1') for s in ('dynamodb','s3','sqs')]; "
        "print(time.perf_counter()-t)",
        runs=7,
    )
    print(f"   import boto3                         {boto3_s * 1000:8.1f} ms")
    print(f"   import s3ingest_fn.handlers.ingest   {handler_s * 1000:8.1f} ms")
    print(f"   ratio                                {handler_s / boto3_s:8.2f}  (target <= 1.30)")
    print(f"   boto3 import + the same three clients             {boto3_clients * 1000:8.1f} ms")
    print(
        f"   cold start, tracing off (the default)             {untraced_s * 1000:8.1f} ms"
        f"   ratio {untraced_s / boto3_clients:5.2f}  (target <= 1.20)"
    )
    print(
        f"   cold start, tracing on (X-Ray SDK, patched boto3) {traced_s * 1000:8.1f} ms"
        f"   ratio {traced_s / boto3_clients:5.2f}"
    )
