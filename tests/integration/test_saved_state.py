"""A saved local state (``s3ingest local up --state DIR``; issue 34): a ``0600`` file in a
``0700`` folder, signed with the user's key (HMAC-SHA256), and nothing unpickled before the
folder, the file, the header (format, moto version) and the signature are checked. Every test
points the user's config folder (the key) at its own ``tmp_path``."""

from __future__ import annotations

import json
import os
import pickle
import stat
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from s3ingest.cli import app
from s3ingest.local.emulator.moto_patches import moto_version
from s3ingest.local.stack import daemon, saved_state


class Trap:
    """Unpickled, it creates ``marker``: shows whether a refused file was unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (_touch, (str(self.marker),))


def _touch(path: str) -> None:
    Path(path).touch()


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's config folder (the state key's) under ``tmp_path``, never the real home."""
    folder = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder))
    return folder


@pytest.fixture(autouse=True)
def no_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    """A state of no moto backends: ``save`` pickles the process's own, which hold whatever the
    worker's earlier tests left there (an RSA key object cannot be pickled); these tests are
    about the file, its modes and its signature, not the backends' content."""
    monkeypatch.setattr(saved_state, "SERVICES", ())


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _saved(tmp_path: Path) -> Path:
    directory = tmp_path / "state"
    saved_state.save(directory, {"stage": "dev"}, {"table": "t"}, "http://127.0.0.1:1")
    return directory


def _forge(directory: Path, payload: bytes, moto: str | None = None, sign: bool = True) -> None:
    """Write a state file of ``payload``, signed with the user's key (``sign``) or not."""
    moto = moto or moto_version()
    key = saved_state._key(create=True)
    mac = saved_state._mac(key, moto, payload) if sign else "0" * 64
    header = json.dumps({"format": 2, "moto": moto, "hmac-sha256": mac}).encode()
    path = directory / saved_state.STATE_FILE
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(header + b"\n" + payload)


def test_a_state_is_a_0600_file_in_a_0700_folder_signed_with_a_0600_key(
    tmp_path: Path, config: Path
) -> None:
    # GIVEN no state folder and no key yet
    # WHEN a state is saved
    directory = _saved(tmp_path)
    # THEN the folder is 0700, the file 0600, the key 0600 in a 0700 folder of the config dir
    assert _mode(directory) == 0o700
    assert _mode(directory / saved_state.STATE_FILE) == 0o600
    assert saved_state.key_path() == config / "s3ingest" / "state.key"
    assert _mode(config / "s3ingest") == 0o700
    assert _mode(saved_state.key_path()) == 0o600
    assert [p.name for p in directory.iterdir()] == [saved_state.STATE_FILE]
    # AND it loads back
    assert saved_state.check(directory) is True
    loaded = saved_state.load(directory)
    assert loaded is not None and loaded["context"] == {"stage": "dev"}
    # AND a folder without a state holds none
    assert saved_state.load(tmp_path / "empty") is None


@pytest.mark.parametrize(
    ("target", "mode", "message"),
    [
        ("folder", 0o777, "state folder may be written by group or others"),
        ("folder", 0o720, "state folder may be written by group or others"),
        ("file", 0o602, "state file may be written by group or others"),
        ("file", 0o660, "state file may be written by group or others"),
        ("key", 0o644, "state key may be read or written by group or others"),
    ],
)
def test_a_state_others_may_write_is_refused_before_unpickling(
    tmp_path: Path, config: Path, target: str, mode: int, message: str
) -> None:
    # GIVEN a signed state whose pickle would leave a mark when unpickled
    directory = _saved(tmp_path)
    marker = tmp_path / "unpickled"
    _forge(directory, pickle.dumps(Trap(marker)))
    path = {
        "folder": directory,
        "file": directory / saved_state.STATE_FILE,
        "key": saved_state.key_path(),
    }[target]
    # WHEN the folder, the file or the key becomes writable (readable: the key) by others
    path.chmod(mode)
    # THEN loading it is refused, and nothing was unpickled
    with pytest.raises(saved_state.StateError, match=message):
        saved_state.load(directory)
    assert not marker.exists()


def test_a_state_another_user_owns_is_refused(
    tmp_path: Path, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a state saved by this user
    directory = _saved(tmp_path)
    # WHEN another user (another uid) loads it
    other = os.getuid() + 1
    monkeypatch.setattr(saved_state.os, "getuid", lambda: other)
    # THEN the folder is refused as another user's
    with pytest.raises(saved_state.StateError, match="state folder is owned by another user"):
        saved_state.load(directory)


def test_a_state_file_that_is_a_symbolic_link_is_refused(tmp_path: Path, config: Path) -> None:
    directory = _saved(tmp_path)
    elsewhere = tmp_path / "elsewhere.pickle"
    (directory / saved_state.STATE_FILE).rename(elsewhere)
    (directory / saved_state.STATE_FILE).symlink_to(elsewhere)
    with pytest.raises(saved_state.StateError, match="cannot be opened"):
        saved_state.load(directory)


def test_a_swapped_or_foreign_state_is_refused_before_unpickling(
    tmp_path: Path, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = _saved(tmp_path)
    marker = tmp_path / "unpickled"
    trap = pickle.dumps(Trap(marker))
    # another moto version, read from the header (signed: the header alone refuses it)
    _forge(directory, trap, moto="0.1")
    with pytest.raises(saved_state.StateError, match=r"moto 0\.1"):
        saved_state.load(directory)
    # a pickle swapped in under a header it was not signed with
    _forge(directory, trap, sign=False)
    with pytest.raises(saved_state.StateError, match="signature does not verify"):
        saved_state.load(directory)
    # a file of the earlier, unsigned format (a bare pickle)
    (directory / saved_state.STATE_FILE).write_bytes(trap)
    with pytest.raises(saved_state.StateError, match="no signed header"):
        saved_state.check(directory)
    # a state signed with another user's key
    _forge(directory, trap)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "another-user"))
    with pytest.raises(saved_state.StateError, match="no state key"):
        saved_state.load(directory)
    saved_state._key(create=True)
    with pytest.raises(saved_state.StateError, match="signature does not verify"):
        saved_state.load(directory)
    assert not marker.exists()


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.output


def test_local_up_and_down_refuse_a_state_folder_others_may_write(
    tmp_path: Path, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a state folder others may write
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"stage": "dev"}}))
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    # WHEN local up or local down is given it
    up_code, up_output = _cli("local", "up", "--state", str(shared))
    down_code, down_output = _cli("local", "down", "--state", str(shared), "--json")
    # THEN each is a usage error naming why, and no stack started
    assert up_code == 2, up_output
    assert "may be written by group or others" in up_output
    assert down_code == 2, down_output
    assert "may be written by group or others" in json.loads(down_output)["reason"]
    with pytest.raises(daemon.LocalStackError):
        daemon.running(tmp_path / daemon.RUN_DIR)
