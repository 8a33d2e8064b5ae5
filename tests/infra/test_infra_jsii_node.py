"""jsii runs on the repository's pinned Node in the tests (``tests/conftest.py`` sets
``JSII_NODE``), whatever ``node`` is first on PATH: no support banner, no bytes reprs on stderr."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import PINNED_NODE


@pytest.mark.skipif(not PINNED_NODE.exists(), reason="make node_modules/.stamp installs the pin")
def test_jsii_starts_on_the_pinned_node_without_a_banner() -> None:
    # GIVEN the tests' environment, with the pinned Node taken off PATH (the machine's first)
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if "node_modules" not in p
    )
    done = subprocess.run(
        [sys.executable, "-c", "import aws_cdk; aws_cdk.App()"],
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # THEN jsii starts, on the pinned Node, silently
    assert done.returncode == 0, done.stderr
    assert os.environ["JSII_NODE"] == str(PINNED_NODE)
    assert "b'" not in done.stderr, done.stderr
    assert "end-of-life" not in done.stderr
