"""A local stack's state saved to a folder and loaded back (``s3ingest local up --state DIR``,
``local down``): moto's backends of the services the stack uses, pickled in one piece (shared
references kept), with the settings' context and the provisioned
:class:`~s3ingest.local.emulator.Resources`.

A pickle runs code when loaded: load only a folder you or your team wrote. The state is
moto's, of the moto version that wrote it (:func:`load` refuses another). Locks inside moto's
objects are saved as new, unlocked ones (nothing holds them once the event sources stopped).
"""

from __future__ import annotations

import copyreg
import dataclasses
import pickle
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
_FORMAT = 1


class StateError(RuntimeError):
    """A state folder that cannot be loaded (another format or moto version, unreadable)."""


def _new_lock(_lock: Any) -> tuple[Any, tuple[()]]:
    return threading.Lock, ()


def _new_rlock(_lock: Any) -> tuple[Any, tuple[()]]:
    return threading.RLock, ()


def _locks_as_new() -> None:
    copyreg.pickle(type(threading.Lock()), _new_lock)
    copyreg.pickle(type(threading.RLock()), _new_rlock)


def save(directory: Path, context: dict[str, Any], resources: Any, endpoint: str) -> Path:
    """Write the process's moto state, ``context`` and ``resources`` (provisioned at
    ``endpoint``) to ``directory`` (created); returns the file written."""
    from moto import backends as moto_backends

    from s3ingest.local.moto_patches import moto_version

    _locks_as_new()
    get_backend: Any = moto_backends.get_backend  # typed per literal service name
    backends = {
        service: {account: dict(regions) for account, regions in get_backend(service).items()}
        for service in SERVICES
    }
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / STATE_FILE
    tmp = path.with_suffix(".tmp")
    state = {
        "format": _FORMAT,
        "moto": moto_version(),
        "context": context,
        "resources": resources,
        "endpoint": endpoint,
        "backends": backends,
    }
    tmp.write_bytes(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
    tmp.replace(path)
    return path


def load(directory: Path) -> dict[str, Any] | None:
    """The state saved in ``directory``, or None when it holds none.

    Raises
    ------
    StateError
        For a file of another format or moto version, or one that cannot be read.
    """
    from s3ingest.local.moto_patches import moto_version

    path = directory / STATE_FILE
    if not path.is_file():
        return None
    _locks_as_new()
    try:
        state: dict[str, Any] = pickle.loads(path.read_bytes())
    except Exception as exc:
        raise StateError(f"{path}: cannot be read ({exc})") from exc
    if state.get("format") != _FORMAT or state.get("moto") != moto_version():
        raise StateError(
            f"{path}: saved by moto {state.get('moto')} (format {state.get('format')}); "
            f"this is moto {moto_version()}"
        )
    return state


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
