"""What the CLI tests share: an environment with no AWS credentials, profile or region anywhere
(for ``CliRunner.invoke(env=...)``), and what a Python repr looks like in text output."""

from __future__ import annotations

import re

#: An environment with no AWS credentials, profile or region anywhere.
BARE: dict[str, str | None] = {
    "AWS_ACCESS_KEY_ID": None,
    "AWS_SECRET_ACCESS_KEY": None,
    "AWS_SESSION_TOKEN": None,
    "AWS_PROFILE": None,
    "AWS_DEFAULT_PROFILE": None,
    "AWS_REGION": None,
    "AWS_DEFAULT_REGION": None,
    "AWS_CONFIG_FILE": "/nonexistent/config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI": None,
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": None,
    "AWS_WEB_IDENTITY_TOKEN_FILE": None,
    "S3INGEST_STACK": None,
}
#: What a Python repr looks like in text: a dict, list or tuple of strings, None, an object.
REPR = re.compile(r"\{'[^']*': |\['[^']*'[,\]]|\('[^']*',|\bNone\b| object at 0x")
