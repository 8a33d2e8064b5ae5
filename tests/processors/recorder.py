"""A processor that records how it was called and writes through boto3's default chain.

``tests.processors.recorder:process``: each call appends to :data:`calls` the types of its
positional arguments, the keyword arguments it was given (it accepts ``s3`` and
``output_bucket``, as a processor written against an older local runtime did), ``OUTPUT_BUCKET``
and the bytes read, and puts ``seen/<key>`` into the output bucket with a client it creates.
"""

from __future__ import annotations

import os
from typing import Any

import boto3

calls: list[dict[str, Any]] = []


def process(*args: Any, s3: Any = None, output_bucket: str | None = None, **kwargs: Any) -> None:
    change, content = args[0], args[1]
    body = content.read() if content is not None else None
    given = [
        name for name, value in (("s3", s3), ("output_bucket", output_bucket)) if value is not None
    ]
    calls.append(
        {
            "args": [type(a).__name__ for a in args],
            "kwargs": given + sorted(kwargs),
            "output_bucket": os.environ.get("OUTPUT_BUCKET"),
            "key": change.key,
            "body": body,
        }
    )
    boto3.client("s3").put_object(
        Bucket=os.environ["OUTPUT_BUCKET"], Key=f"seen/{change.key}", Body=body or b""
    )
