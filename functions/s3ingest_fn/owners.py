"""``BUCKET_OWNERS``: the account that owns each landing bucket, as the stack passes it to the
functions (bucket name -> 12-digit account id). Read by :mod:`s3ingest_fn.config` and by the
adapter that sends it as ``ExpectedBucketOwner`` (:mod:`s3ingest_fn.adapters.bucket_owners`);
kept apart from the adapters so that the configuration (and the core, which imports it) loads no
adapter.
"""

from __future__ import annotations

import json


def parse_owners(raw: str | None) -> dict[str, str]:
    """``BUCKET_OWNERS`` (:data:`s3ingest_fn.config.BUCKET_OWNERS`): bucket name -> the account
    that owns it; empty when ``raw`` is None or empty.

    Raises
    ------
    ValueError
        When ``raw`` is not a JSON object of account ids (12 digits) by bucket.
    """
    try:
        owners = json.loads(raw or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not JSON: {exc.msg}") from exc
    if not isinstance(owners, dict) or not all(
        isinstance(v, str) and len(v) == 12 and v.isdigit() for v in owners.values()
    ):
        raise ValueError("must be a JSON object of account ids by bucket")
    return owners
