"""A local stack's state saved to a folder and loaded back (``s3ingest local up --state DIR``,
``local down``): moto's backends of the services the stack uses, pickled in one piece (shared
references kept), with the settings' context and the provisioned
:class:`~s3ingest.local.stack.provisioning.Resources`.

A pickle runs code when loaded, so nothing is unpickled before it is known to be this user's:

* the folder is created ``0700`` and the file ``0600`` (created with those modes, never
  loosened and then tightened); a folder or file owned by another user, or writable by group or
  others, is refused (:class:`StateError`), on save and on load;
* the file is a header line (JSON: ``format``, ``moto``, ``hmac-sha256``) and the pickle; the
  format and moto version (a state is moto's, of the moto version that wrote it) are checked
  from the header first;
* the HMAC (SHA-256) over the format, the moto version and the pickle is made with a key of the
  user's own (:func:`key_path`: ``$XDG_CONFIG_HOME/s3ingest/state.key``, by default under
  ``~/.config``; created ``0600`` on the first save, refused when another user owns it or
  group or others can read or write it) and verified before the pickle is read.

A state folder is therefore loaded only by the user who saved it, on the host that holds that
key (copy the key to share one). Locks inside moto's objects are saved as new, unlocked ones
(nothing holds them once the event sources stopped).
"""

from __future__ import annotations

import copyreg
import dataclasses
import hashlib
import hmac
import importlib
import io
import json
import os
import pickle
import secrets
import stat
import tempfile
import threading
from pathlib import Path
from typing import Any

#: The file of a state folder.
STATE_FILE = "state.pickle"
#: moto's services a local stack holds state in (the Lambda service's functions are
#: registered again by the runtime, its state machines created again).
SERVICES = (
    "s3",
    "sqs",
    "dynamodb",
    "dynamodbstreams",
    "events",
    "iam",
    "sts",
    "kms",
    "secretsmanager",
    "cloudwatch",
    "logs",
    "s3control",
)
#: The user's key file under the config folder (:func:`key_path`).
KEY_FILE = "state.key"
_FORMAT = 2
#: The longest header line read before the pickle (bytes).
_MAX_HEADER = 4096


class StateError(RuntimeError):
    """A state folder that cannot be loaded or saved: another format or moto version, a folder
    or file another user owns or others may write, a signature that does not verify, an
    unreadable file."""


def _new_lock(_lock: Any) -> tuple[Any, tuple[()]]:
    return threading.Lock, ()


def _new_rlock(_lock: Any) -> tuple[Any, tuple[()]]:
    return threading.RLock, ()


def _locks_as_new() -> None:
    copyreg.pickle(type(threading.Lock()), _new_lock)
    copyreg.pickle(type(threading.RLock()), _new_rlock)


def save(directory: Path, context: dict[str, Any], resources: Any, endpoint: str) -> Path:
    """Write the process's moto state, ``context`` and ``resources`` (provisioned at
    ``endpoint``) to ``directory`` (created ``0700``) as a ``0600`` file, signed with the
    user's key (created on first use); returns the file written.

    Raises
    ------
    StateError
        The folder is another user's or writable by others, or the key is refused.
    """
    from moto import backends as moto_backends

    from s3ingest.local.emulator.moto_patches import moto_version

    _locks_as_new()
    get_backend: Any = moto_backends.get_backend  # typed per literal service name
    backends = {
        service: {account: dict(regions) for account, regions in get_backend(service).items()}
        for service in SERVICES
    }
    _make_folder(directory)
    state = {
        "format": _FORMAT,
        "moto": moto_version(),
        "context": context,
        "resources": resources,
        "endpoint": endpoint,
        "backends": backends,
    }
    payload = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    mac = _mac(_key(create=True), moto_version(), payload)
    header = json.dumps({"format": _FORMAT, "moto": moto_version(), "hmac-sha256": mac})
    path = directory / STATE_FILE
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".state.", suffix=".tmp")  # 0600, O_EXCL
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(header.encode("ascii") + b"\n" + payload)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def prepare(directory: Path) -> None:
    """Before a state is saved to ``directory`` (before the stack starts, so its save at ``local
    down`` is not refused then): the folder created ``0700`` or checked, the user's key created
    ``0600`` or checked.

    Raises
    ------
    StateError
        The folder or the key is another user's, or others may write the folder or read the key.
    """
    _make_folder(directory)
    _key(create=True)


def check(directory: Path) -> bool:
    """Whether ``directory`` holds a state this user may load, checked without unpickling it
    (:func:`load` checks the same first): False when it holds none (or does not exist).

    Raises
    ------
    StateError
        A folder or file another user owns or others may write, another format or moto
        version, a signature that does not verify, a missing or refused key.
    """
    return _verified(directory) is not None


def load(directory: Path) -> dict[str, Any] | None:
    """The state saved in ``directory``, or None when it holds none; unpickled only once the
    folder, the file, the header and the signature are checked (:func:`check`).

    Raises
    ------
    StateError
        As :func:`check`, or a pickle that cannot be read.
    """
    payload = _verified(directory)
    if payload is None:
        return None
    _locks_as_new()
    try:
        state: dict[str, Any] = _Unpickler(io.BytesIO(payload)).load()
    except Exception as exc:
        raise StateError(f"{directory / STATE_FILE}: cannot be read ({exc})") from exc
    return state


#: Where a state saved before the local runtime's split (0.2.0) names its classes: the old
#: ``s3ingest.local.emulator`` module's, now in these two.
_MOVED = {
    "s3ingest.local.emulator": (
        "s3ingest.local.stack.provisioning",
        "s3ingest.local.emulator.server",
    )
}


class _Unpickler(pickle.Unpickler):
    """Finds a class under the module that holds it now (:data:`_MOVED`)."""

    def find_class(self, module: str, name: str) -> Any:
        for now in _MOVED.get(module, ()):
            found = getattr(importlib.import_module(now), name, None)
            if found is not None:
                return found
        return super().find_class(module, name)


def key_path() -> Path:
    """The user's state key: ``$XDG_CONFIG_HOME/s3ingest/state.key`` (``~/.config`` when the
    variable is unset or empty, as the XDG Base Directory specification says:
    https://specifications.freedesktop.org/basedir-spec/latest/)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "s3ingest" / KEY_FILE


def _verified(directory: Path) -> bytes | None:
    """The pickle of ``directory``'s state once its folder, file, header and HMAC are checked;
    None when there is no state file."""
    from s3ingest.local.emulator.moto_patches import moto_version

    path = directory / STATE_FILE
    if not directory.exists():
        return None
    _check_owned(directory, "state folder")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:  # a symbolic link (O_NOFOLLOW), unreadable
        raise StateError(f"{path}: cannot be opened ({exc.strerror})") from exc
    with os.fdopen(fd, "rb") as source:
        _check_owned(path, "state file", os.fstat(source.fileno()))
        first = source.readline(_MAX_HEADER)
        payload = source.read()
    try:
        header = json.loads(first) if first.endswith(b"\n") else None
    except ValueError:
        header = None
    if not isinstance(header, dict):
        raise StateError(
            f"{path}: no signed header (saved by an earlier release, or not a state file); "
            "it is not loaded: start without it, and local down saves a new one"
        )
    if header.get("format") != _FORMAT or header.get("moto") != moto_version():
        raise StateError(
            f"{path}: saved by moto {header.get('moto')} (format {header.get('format')}); "
            f"this is moto {moto_version()}"
        )
    mac = header.get("hmac-sha256")
    expected = _mac(_key(create=False), str(header["moto"]), payload)
    if not isinstance(mac, str) or not hmac.compare_digest(mac, expected):
        raise StateError(
            f"{path}: its signature does not verify with {key_path()} (changed since it was "
            "saved, or saved by another user or host); it is not loaded"
        )
    return payload


def _mac(key: bytes, moto: str, payload: bytes) -> str:
    signed = f"s3ingest-state\n{_FORMAT}\n{moto}\n".encode() + payload
    return hmac.new(key, signed, hashlib.sha256).hexdigest()


def _key(*, create: bool) -> bytes:
    """The user's key (32 random bytes, hex in the file), created ``0600`` in a ``0700`` folder
    when ``create`` and absent (linked into place: two first saves keep one key).

    Raises
    ------
    StateError
        The key is missing (and not ``create``), another user's, or readable or writable by
        group or others.
    """
    path = key_path()
    if not path.exists():
        if not create:
            raise StateError(
                f"{path}: no state key; a state is loaded only by the user who saved it, on a "
                "host with that user's key"
            )
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".state.", suffix=".key")  # 0600
        try:
            with os.fdopen(fd, "w", encoding="ascii") as out:
                out.write(secrets.token_hex(32) + "\n")
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass  # another first save made it: use that one
        finally:
            Path(tmp).unlink(missing_ok=True)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise StateError(f"{path}: cannot be opened ({exc.strerror})") from exc
    with os.fdopen(fd, "r", encoding="ascii") as source:
        _check_owned(path, "state key", os.fstat(source.fileno()), private=True)
        text = source.read().strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) < 32:
        raise StateError(f"{path}: not a state key (64 hex digits)")
    return key


def _make_folder(directory: Path) -> None:
    """``directory``, created ``0700`` when absent (its parents as ``mkdir -p``), and checked."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    try:
        directory.mkdir(mode=0o700)
    except FileExistsError:
        pass
    _check_owned(directory, "state folder")


def _check_owned(
    path: Path, what: str, st: os.stat_result | None = None, *, private: bool = False
) -> None:
    """Refuse ``path`` unless this user owns it and neither group nor others may write it
    (nor read it, when ``private``)."""
    st = st if st is not None else os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise StateError(f"{path}: the {what} is a symbolic link; give the folder itself")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise StateError(f"{path}: the {what} is owned by another user (uid {st.st_uid})")
    loose = stat.S_IRWXG | stat.S_IRWXO if private else stat.S_IWGRP | stat.S_IWOTH
    if st.st_mode & loose:
        who = "read or written" if private else "written"
        raise StateError(
            f"{path}: the {what} may be {who} by group or others "
            f"(mode {stat.S_IMODE(st.st_mode):04o}); chmod go-{'rwx' if private else 'w'} it"
        )


def restore(state: dict[str, Any], endpoint: str) -> Any:
    """Put ``state``'s backends into this process's moto; returns its resources with their
    URLs moved to ``endpoint`` (the emulator's port differs from the saved one)."""
    from moto import backends as moto_backends

    get_backend: Any = moto_backends.get_backend
    for service, accounts in state["backends"].items():
        backend_dict = get_backend(service)
        for account, regions in accounts.items():
            for region, backend in regions.items():
                backend_dict[account][region] = backend
    old = str(state["endpoint"])
    resources = state["resources"]
    moved = {
        f.name: getattr(resources, f.name).replace(old, endpoint)
        for f in dataclasses.fields(resources)
        if isinstance(getattr(resources, f.name), str) and old in getattr(resources, f.name)
    }
    return dataclasses.replace(resources, **moved)
