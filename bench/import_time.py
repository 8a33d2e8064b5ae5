"""The ingest handler module's import time against ``import boto3`` alone (fresh interpreters).

Target: at most 1.3 times. Median of 9 runs each, measured inside the child interpreter with
``time.perf_counter`` around the import (interpreter start-up excluded). The cold-start build
(settings, three clients, the X-Ray tracer) is printed apart for information.
"""

from __future__ import annotations

import statistics
import subprocess
import sys

CHILD = ("import time; t=time.perf_counter(); import {mod}; "
         "print(time.perf_counter()-t)")
BUILD = ("import os, time; os.environ.update(LEDGER_TABLE_NAME='t', DEAD_LETTER_QUEUE_URL='u', "
         "AWS_DEFAULT_REGION='us-east-1'); t=time.perf_counter(); "
         "import s3ingest_fn.handlers.ingest as h; h._build_from_env(); "
         "print(time.perf_counter()-t)")


def _median(code: str, runs: int = 9) -> float:
    samples = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                             text=True).stdout
        samples.append(float(out.strip().splitlines()[-1]))
    return statistics.median(samples)


def run() -> None:
    boto3_s = _median(CHILD.format(mod="boto3"))
    handler_s = _median(CHILD.format(mod="s3ingest_fn.handlers.ingest"))
    build_s = _median(BUILD, runs=5)
    boto3_clients = _median(
        "import time; t=time.perf_counter(); import boto3; "
        "[boto3.client(s, region_name='us-east-1') for s in ('dynamodb','s3','sqs')]; "
        "print(time.perf_counter()-t)", runs=5)
    print(f"   import boto3                         {boto3_s * 1000:8.1f} ms")
    print(f"   import s3ingest_fn.handlers.ingest   {handler_s * 1000:8.1f} ms")
    print(f"   ratio                                {handler_s / boto3_s:8.2f}  (target <= 1.30)")
    print(f"   cold start: import + build (tracer on)        {build_s * 1000:8.1f} ms")
    print(f"   boto3 import + the same three clients         {boto3_clients * 1000:8.1f} ms")
    print(f"   cold-start ratio                              {build_s / boto3_clients:8.2f}")
