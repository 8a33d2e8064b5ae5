"""The unit tests run with sockets disabled (pytest-socket): none reaches a network, the
session's emulator included. A test that needs one names the hosts it may connect to
(``@pytest.mark.allow_hosts([...])``) or is marked ``enable_socket``."""

from __future__ import annotations

from pathlib import Path

import pytest

#: pytest-socket's markers that let a test use sockets its own way.
_OWN_SOCKET_MARKERS = ("enable_socket", "allow_hosts", "disable_socket")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of this directory ``disable_socket`` unless it says otherwise (the
    hook sees the whole session's items: the other directories' are left as they are)."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents and not any(
            item.get_closest_marker(name) for name in _OWN_SOCKET_MARKERS
        ):
            item.add_marker(pytest.mark.disable_socket)
