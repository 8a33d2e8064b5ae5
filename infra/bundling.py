"""Docker-free bundling of ``functions/`` into the ingest Lambda's deployment package.

The package is the ``s3ingest_fn`` source tree plus the wheels of ``functions/requirements.txt``
resolved for the Lambda platform (Amazon Linux, ``arm64``, CPython 3.13) with ``pip --platform``:
pip then only accepts binary wheels built for that platform, so nothing is compiled on the host
and no container is needed
(https://docs.aws.amazon.com/lambda/latest/dg/python-package.html#python-package-native-libraries).

The resolved dependencies are cached in the git-ignored ``.build/`` directory under a key made of
the requirements file's hash, the platform and the Python version, so repeated synths do not
reinstall them.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

PROJECT_ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_DIR = PROJECT_ROOT / "functions"
BUILD_DIR = PROJECT_ROOT / ".build"
FUNCTION_PACKAGE = "s3ingest_fn"

#: The Lambda runtime the package is built for; keep these three in step.
RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64
PYTHON_VERSION = "3.13"
PIP_PLATFORM = "manylinux2014_aarch64"

_IGNORED = ("__pycache__", "*.pyc", "*.pyo")


class BundlingError(RuntimeError):
    """Raised when the function's dependencies cannot be resolved for the Lambda platform."""


@jsii.implements(ILocalBundling)
class PipLocalBundling:
    """Build the function package on the host with ``pip install --platform`` (no Docker).

    Parameters
    ----------
    functions_dir : Path
        Directory holding ``requirements.txt`` and the function package.
    package : str
        Name of the package directory copied into the bundle.
    cache_dir : Path
        Where resolved dependencies are cached, one directory per requirements hash.
    python_version : str
        Target CPython version, ``"3.13"``.
    platform : str
        Target wheel platform tag, ``"manylinux2014_aarch64"`` for ``arm64`` functions.

    Notes
    -----
    Implements ``aws_cdk.ILocalBundling``: CDK calls :meth:`try_bundle` before trying Docker
    (https://docs.aws.amazon.com/cdk/api/v2/python/aws_cdk/ILocalBundling.html).
    """

    def __init__(
        self,
        *,
        functions_dir: Path,
        package: str,
        cache_dir: Path,
        python_version: str,
        platform: str,
    ) -> None:
        self.functions_dir = functions_dir
        self.package = package
        self.cache_dir = cache_dir
        self.python_version = python_version
        self.platform = platform

    def try_bundle(self, output_dir: str, *, image: DockerImage | None = None, **_: Any) -> bool:
        """Write the package into ``output_dir``; always bundles locally (returns ``True``).

        Raises
        ------
        BundlingError
            When pip cannot resolve the requirements for the target platform.
        """
        out = Path(output_dir)
        shutil.copytree(self.dependencies(), out, dirs_exist_ok=True)
        shutil.copytree(
            self.functions_dir / self.package,
            out / self.package,
            ignore=shutil.ignore_patterns(*_IGNORED),
            dirs_exist_ok=True,
        )
        return True

    def cache_key(self) -> str:
        """Key of the dependency cache: requirements hash, platform and Python version."""
        digest = hashlib.sha256((self.functions_dir / "requirements.txt").read_bytes())
        return f"deps-{self.platform}-cp{self.python_version}-{digest.hexdigest()[:20]}"

    def dependencies(self) -> Path:
        """Directory of the resolved dependencies, installing them once per cache key."""
        target = self.cache_dir / self.cache_key()
        if target.is_dir():
            return target
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=self.cache_dir))
        command = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-compile",
            "-r",
            str(self.functions_dir / "requirements.txt"),
            "--target",
            str(staging),
            "--platform",
            self.platform,
            "--only-binary=:all:",
            "--python-version",
            self.python_version,
            "--implementation",
            "cp",
        ]
        try:
            subprocess.run(command, check=True, capture_output=True, text=True)
        except subprocess.CalledProcessError as err:
            shutil.rmtree(staging, ignore_errors=True)
            raise BundlingError(
                f"pip could not resolve {self.functions_dir / 'requirements.txt'} for "
                f"{self.platform} / CPython {self.python_version}:\n{err.stderr}"
            ) from err
        shutil.rmtree(staging / "bin", ignore_errors=True)  # console scripts: unused on Lambda
        try:
            staging.rename(target)  # atomic publish; a concurrent synth may have won the race
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
        return target


def function_code(
    *,
    functions_dir: Path = FUNCTIONS_DIR,
    package: str = FUNCTION_PACKAGE,
    cache_dir: Path = BUILD_DIR,
) -> lambda_.Code:
    """Asset code of the ingest function, bundled locally by :class:`PipLocalBundling`.

    The asset hash is the source hash of ``functions_dir`` (requirements and code), so CDK
    re-bundles only when either changes.

    Returns
    -------
    aws_cdk.aws_lambda.Code
        ``Code.from_asset`` with local bundling; the Docker image is never pulled.
    """
    return lambda_.Code.from_asset(
        str(functions_dir),
        exclude=[f"**/{pattern}" for pattern in _IGNORED],
        bundling=BundlingOptions(
            image=RUNTIME.bundling_image,
            local=PipLocalBundling(
                functions_dir=functions_dir,
                package=package,
                cache_dir=cache_dir,
                python_version=PYTHON_VERSION,
                platform=PIP_PLATFORM,
            ),
        ),
    )
