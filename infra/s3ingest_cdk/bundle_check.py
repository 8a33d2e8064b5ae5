"""Synth-time check that each ``module`` / ``handler`` processor imports from its bundle.

The check runs ``python -I -S -B`` in a subprocess whose ``sys.path`` is the bundle (the
deployment package) and the standard library only: no site-packages, user site, working
directory or ``PYTHON*`` variable of the developer, an empty environment, no bytecode written.
A processor that imports a package it did not declare (``requirements.txt`` beside it,
``docs/processors.md``) fails synth here instead of on its first invocation in Lambda.

The host's Python (the synth's, e.g. 3.11 on ``x86_64``) is not the Lambda runtime's (CPython
3.13 on ``arm64``): pure-Python and ``abi3`` wheels import on both, a compiled wheel built for
3.13 / ``aarch64`` does not import here. A missing module whose top-level package is in the
bundle with compiled extensions is therefore not a failure: it is reported as a note (an info
annotation, "not checked on this host"). Module-level code of the processor runs in the
subprocess (no AWS credentials in its environment); an exception other than ``ImportError`` is
a note too, as the deployed environment differs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from s3ingest.settings import SettingsError

_SCRIPT = r"""
import importlib, json, sys
bundle, specs = sys.argv[1], json.loads(sys.argv[2])
sys.path[:0] = [bundle]
out = {}
for setting, spec in specs.items():
    module, _, attr = spec.partition(":")
    try:
        found = hasattr(importlib.import_module(module), attr)
        out[setting] = None if found else {"kind": "attr", "name": None, "error": attr}
    except ImportError as exc:
        missing = isinstance(exc, ModuleNotFoundError)
        out[setting] = {"kind": "import", "missing": missing, "name": exc.name, "error": repr(exc)}
    except Exception as exc:  # noqa: BLE001 - reported, never raised
        out[setting] = {"kind": "other", "name": None, "error": repr(exc)}
print(json.dumps(out))
"""

#: How long the import check may take, seconds.
CHECK_TIMEOUT_SECONDS = 120


class ProcessorImportError(SettingsError):
    """Raised at synth when a ``module`` or ``handler`` processor cannot be imported from its
    bundle: ``problems`` name the setting, the processor, the missing module and how to declare
    it."""


def _compiled(bundle: Path, top: str) -> bool:
    """Whether ``top`` (a top-level import name) is in ``bundle`` with a compiled extension."""
    package = bundle / top
    if package.is_dir():
        return any(package.rglob("*.so")) or any(package.rglob("*.pyd"))
    return any(bundle.glob(f"{top}.*.so")) or any(bundle.glob(f"{top}.*.pyd"))


def check_imports(
    bundle: Path, specs: Mapping[str, str], *, requirements: Path | None = None
) -> list[str]:
    """Import every processor of ``specs`` from ``bundle`` in an isolated subprocess.

    Parameters
    ----------
    specs : mapping of str to str
        ``"package.module:function"`` by the setting that names it (``"processors[0].module"``).
    requirements : pathlib.Path, optional
        The processors' requirements file (named in the problems), when there is one.

    Returns
    -------
    list[str]
        Notes of what could not be checked on this host (compiled wheels, other exceptions).

    Raises
    ------
    ProcessorImportError
        When a processor's module (or a module it imports) is not in the bundle, or importing
        them takes longer than :data:`CHECK_TIMEOUT_SECONDS`.
    """
    if not specs:
        return []
    with tempfile.TemporaryDirectory(prefix="s3ingest-import-check-") as cwd:
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    "-I",
                    "-S",
                    "-B",
                    "-c",
                    _SCRIPT,
                    str(bundle),
                    json.dumps(dict(specs)),
                ],
                capture_output=True,
                text=True,
                env={},
                cwd=cwd,
                timeout=CHECK_TIMEOUT_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise ProcessorImportError(
                [
                    f"the processors' import check took longer than {CHECK_TIMEOUT_SECONDS} s: "
                    f"does importing {', '.join(sorted(set(specs.values())))} do work at module "
                    "level?"
                ]
            ) from exc
    if done.returncode != 0:
        raise ProcessorImportError([f"the processors' import check failed: {done.stderr.strip()}"])
    results = json.loads(done.stdout.strip().splitlines()[-1])
    declare = (
        f"add it to {requirements}"
        if requirements is not None
        else "declare it in a requirements.txt in processorPackageDir (docs/processors.md)"
    )
    problems: list[str] = []
    notes: list[str] = []
    for setting, result in results.items():
        if result is None:
            continue
        spec = specs[setting]
        name = result["name"]
        top = (name or "").split(".")[0]
        if result["kind"] == "import" and name and not (top and _compiled(bundle, top)):
            what = f"no module {name!r}" if result["missing"] else f"from {name!r}"
            problems.append(
                f"{setting}: {spec!r} cannot be imported from its bundle: {what} "
                f"({result['error']}); if it is a third-party package, {declare}"
            )
        elif result["kind"] == "attr":
            problems.append(f"{setting}: {spec!r}: the imported module has no {result['error']!r}")
        elif result["kind"] == "import" and name:
            notes.append(
                f"{setting}: {spec!r} imports {top!r}, a compiled wheel for the Lambda runtime "
                f"(CPython 3.13, arm64): not checked on this host ({result['error']})"
            )
        else:
            notes.append(
                f"{setting}: {spec!r} raised on import outside Lambda, not checked: "
                f"{result['error']}"
            )
    if problems:
        raise ProcessorImportError(problems)
    return notes
