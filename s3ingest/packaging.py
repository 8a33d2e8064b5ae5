"""The processors' third-party dependencies, installed for the Lambda platform without Docker
(no AWS CDK needed: the CDK bundling, :mod:`s3ingest_cdk.bundling`, and the local runtime,
:func:`s3ingest.local.daemon.deploy`, both install them with these functions).

``pip install --target --platform manylinux2014_aarch64 --only-binary=:all: --python-version
3.13 --implementation cp``: pip accepts only binary wheels for that platform, nothing is compiled
on the host (https://docs.aws.amazon.com/lambda/latest/dg/python-package.html). Each install is
staged beside its target and renamed into place, once per cache key.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

#: The Lambda platform the wheels are installed for (the functions' runtime and architecture).
PIP_PLATFORM = "manylinux2014_aarch64"
PYTHON_VERSION = "3.13"
#: The processors' dependency files in ``processorPackageDir``; the first found is used.
PROCESSOR_REQUIREMENTS = ("requirements.lock", "requirements.txt")


class BundlingError(RuntimeError):
    """Raised when dependencies cannot be resolved for the Lambda platform."""


def processor_requirements(package_dir: str | None, root: Path) -> Path | None:
    """The processors' dependency file: the first of :data:`PROCESSOR_REQUIREMENTS` in
    ``package_dir`` (relative to ``root``, or absolute); None without ``package_dir`` or
    without either file."""
    if package_dir is None:
        return None
    for name in PROCESSOR_REQUIREMENTS:
        candidate = root / package_dir / name
        if candidate.is_file():
            return candidate
    return None


def lock_pins(lock: Path) -> list[str]:
    """The ``name==version`` pins of a lock (extras, hashes and comments dropped): pip
    constraints."""
    found = re.findall(
        r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", lock.read_text(), re.M
    )
    return sorted({f"{name}=={version}" for name, version in found})


def pip_install(
    target: Path,
    requirements: Sequence[str],
    *,
    platform: str = PIP_PLATFORM,
    python_version: str = PYTHON_VERSION,
) -> Path:
    """Install ``requirements`` (pip arguments: ``-r FILE``, ``-c FILE``, ``--require-hashes``)
    for ``platform`` / CPython ``python_version`` into ``target``, unless it exists.

    Raises
    ------
    BundlingError
        When pip cannot install them (a conflict, a missing wheel, a hash that differs).
    """
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        *requirements,
        "--target",
        str(staging),
        "--platform",
        platform,
        "--only-binary=:all:",
        "--python-version",
        python_version,
        "--implementation",
        "cp",
    ]
    try:
        subprocess.run(command, check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as err:
        shutil.rmtree(staging, ignore_errors=True)
        raise BundlingError(
            f"pip could not install {' '.join(requirements)} for "
            f"{platform} / CPython {python_version}:\n{err.stderr}"
        ) from err
    shutil.rmtree(staging / "bin", ignore_errors=True)  # console scripts: unused on Lambda
    try:
        staging.rename(target)  # atomic publish; a concurrent synth may have won the race
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def install_processor_requirements(
    requirements: Path,
    cache_dir: Path,
    *,
    lock: Path | None = None,
    platform: str = PIP_PLATFORM,
    python_version: str = PYTHON_VERSION,
) -> Path:
    """The directory of ``requirements`` installed (:func:`pip_install`), once per content hash
    of it, of ``lock`` and of the platform: ``cache_dir/proc-<platform>-cp<version>-<hash>``.
    ``lock``'s pins are its constraints (``-c``): a processor cannot replace a version the
    pipeline's code was locked with.

    Raises
    ------
    BundlingError
        When pip cannot install them (a conflict with the lock included).
    """
    digest = hashlib.sha256(requirements.read_bytes())
    if lock is not None:
        digest.update(lock.read_bytes())
    key = f"proc-{platform}-cp{python_version}-{digest.hexdigest()[:20]}"
    target = cache_dir / key
    if target.is_dir():
        return target
    args = ["-r", str(requirements)]
    if lock is not None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        constraints = cache_dir / f"{key}.constraints.txt"
        constraints.write_text("".join(f"{pin}\n" for pin in lock_pins(lock)))
        args += ["-c", str(constraints)]
    return pip_install(target, args, platform=platform, python_version=python_version)
