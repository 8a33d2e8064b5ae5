"""Docker-free bundling of ``functions/`` into the ingest Lambda's deployment package.

The package is the ``s3ingest_fn`` source tree plus the wheels of ``functions/requirements.lock``
installed for the Lambda platform (Amazon Linux, ``arm64``, CPython 3.13) with ``pip --platform``:
pip then only accepts binary wheels built for that platform, so nothing is compiled on the host
and no container is needed
(https://docs.aws.amazon.com/lambda/latest/dg/python-package.html#python-package-native-libraries).
The lock is generated from ``functions/requirements.txt`` (the human-edited direct dependencies)
by ``make lock`` (``uv pip compile`` for ``aarch64-manylinux2014`` and Python 3.13); pip installs
it with ``--require-hashes``, so every wheel in the package is the one the lock names.

The installed dependencies are cached under a key made of the lock file's hash, the platform
and the Python version, so repeated synths do not reinstall them: in ``<outdir>/.s3ingest-build/``
(:data:`BUILD_SUBDIR`, the app's ``cdk.out``) or in the directory the pipeline's
``bundle_cache_dir`` names; never in the app's source folder.

The sources are found through the imported ``s3ingest_fn`` package, so the same code bundles
from a checkout (``functions/``) and from an installed ``s3ingest[cdk]`` (``site-packages``, with
the lock shipped as ``s3ingest_cdk`` package data: :func:`lock_path`).

With a ``processor`` (CONTRACT C11) the package also holds the processor's top-level package, found
by :func:`processor_sources`: under ``functions/`` (``s3ingest_examples``), or in the directory
``processorPackageDir`` names. That directory may declare the processors' third-party
dependencies beside their code (:data:`PROCESSOR_REQUIREMENTS`: a hashed ``requirements.lock``,
else a ``requirements.txt``): they are installed for the Lambda platform the same way, constrained
to the lock's versions, cached by the file's content hash. A package with processors is built at
synth (:func:`function_code`) and every ``module`` / ``handler`` is imported from it
(:func:`s3ingest_cdk.bundle_check.check_imports`): an undeclared package fails synth.
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import importlib.resources
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling, Stage
from aws_cdk import aws_lambda as lambda_

import s3ingest_fn
import s3ingest_processor
from s3ingest.function_roles import ROLE_PACKAGES_LOCK
from s3ingest.packaging import (
    PIP_PLATFORM,
    PYTHON_VERSION,
    BundlingError,
    compile_bytecode,
    install_processor_requirements,
    install_role_packages,
    locked_requirements,
    pip_install,
)
from s3ingest.packaging import processor_requirements as _requirements_in
from s3ingest.settings import SettingsError
from s3ingest_cdk.bundle_check import check_imports


def project_root() -> Path:
    """The directory of the CDK app (its ``cdk.json``): the nearest one holding ``cdk.json``
    above this file (a source checkout or an editable install: the package lives in
    ``infra/s3ingest_cdk/``), else above the working directory (an installed package, ``cdk`` run
    from the team's app), else the working directory itself.

    What it is used for: a relative ``processorPackageDir``.
    """
    for start in (Path(__file__).resolve().parent, Path.cwd().resolve()):
        for candidate in (start, *start.parents):
            if (candidate / "cdk.json").is_file():
                return candidate
    return Path.cwd().resolve()


PROJECT_ROOT = project_root()
#: The build cache's directory under the app's ``outdir`` (``cdk.out``) by default.
BUILD_SUBDIR = ".s3ingest-build"
#: The context key naming a build cache that outlives ``cdk.out`` (a path; relative: to the
#: working directory), for every pipeline of the app without its own ``bundle_cache_dir``.
BUNDLE_CACHE_CONTEXT = "s3ingest:bundleCacheDir"
FUNCTION_PACKAGE = "s3ingest_fn"
#: The function package's sources, found through the imported package: ``functions/s3ingest_fn``
#: in a checkout or an editable install, ``site-packages/s3ingest_fn`` when installed.
PACKAGE_DIR = Path(s3ingest_fn.__file__).resolve().parent
#: The processor-function helper (standard library only), copied into the package of the
#: stack's processor functions: ``docs/processor-api.md``.
HELPER_DIR = Path(s3ingest_processor.__file__).resolve().parent
#: The directory holding :data:`PACKAGE_DIR` (``functions/`` in a checkout).
FUNCTIONS_DIR = PACKAGE_DIR.parent
#: The function's hashed lock file, in ``functions/`` (generated from ``requirements.txt``).
LOCK_FILE = "requirements.lock"
#: The same lock as package data of ``s3ingest_cdk`` (in the repository, a symbolic link to
#: ``functions/requirements.lock``; ``pyproject.toml``'s ``[tool.setuptools.package-data]`` puts
#: its content in the wheel), for an installed package, where ``functions/`` does not exist.
PACKAGED_LOCK_FILE = "function-requirements.lock"
#: The roles' own packages' lock (:data:`s3ingest.function_roles.ROLE_PACKAGES_LOCK`) as
#: package data of ``s3ingest_cdk`` (a symbolic link in the repository, like
#: :data:`PACKAGED_LOCK_FILE`).
PACKAGED_ROLE_LOCK_FILE = "function-packages.lock"


def lock_path(functions_dir: Path = FUNCTIONS_DIR) -> Path:
    """The function bundle's lock: ``functions_dir``'s (a checkout), else the copy shipped in
    this package (an installed wheel).

    Raises
    ------
    FileNotFoundError
        When neither exists.
    """
    return _checkout_or_packaged(functions_dir / LOCK_FILE, PACKAGED_LOCK_FILE)


def role_lock_path(functions_dir: Path = FUNCTIONS_DIR) -> Path:
    """The roles' packages' lock, as :func:`lock_path` finds the bundle's."""
    return _checkout_or_packaged(functions_dir / ROLE_PACKAGES_LOCK, PACKAGED_ROLE_LOCK_FILE)


def _checkout_or_packaged(checkout: Path, packaged_name: str) -> Path:
    if checkout.is_file():
        return checkout
    packaged = Path(str(importlib.resources.files("s3ingest_cdk").joinpath(packaged_name)))
    if packaged.is_file():
        return packaged
    raise FileNotFoundError(f"no {checkout.name} in {checkout.parent} and no packaged {packaged}")


#: The Lambda runtime the package is built for; keep it in step with
#: :data:`s3ingest.packaging.PYTHON_VERSION` and :data:`~s3ingest.packaging.PIP_PLATFORM`.
RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64

_IGNORED = ("__pycache__", "*.pyc", "*.pyo")

#: The service models of ``botocore/data`` the package keeps (the clients ``s3ingest_fn``
#: creates: ``wiring.client``); the other ~440 are left out of a package without processors.
#: Every file at the top of ``botocore/data`` (``endpoints.json``, ``partitions.json``,
#: ``sdk-default-configuration.json``, ``_retry.json``) is kept.
BOTOCORE_SERVICES = frozenset(
    {"dynamodb", "events", "lambda", "s3", "secretsmanager", "sqs", "sts"}
)
#: The service models X-Ray tracing adds (the X-Ray SDK's sampling client).
TRACING_SERVICES = frozenset({"xray"})
#: Top-level entries of the dependencies that only X-Ray tracing imports (the Powertools
#: ``Tracer``, created only with ``tracing`` on): left out of a package with tracing off.
TRACING_ONLY = (
    "aws_xray_sdk",
    "aws_xray_sdk-*.dist-info",
    "wrapt",
    "wrapt-stubs",
    "wrapt-*.dist-info",
)
#: What a role's own packages (:attr:`s3ingest.function_roles.FunctionRole.packages`) ship
#: without, by path under the package root (``fnmatch``): sources, headers and tests, and
#: pyarrow's Flight RPC libraries and C++ test module (no other of its libraries needs them:
#: their ``DT_NEEDED`` entries, checked by ``tests/infra/test_infra_role_packages.py``).
ROLE_LEFT_OUT = (
    "*/tests",
    "*/include",
    "*.pxd",
    "*.pyx",
    "*.pxi",
    "pyarrow/src",
    "pyarrow/*flight*",
    "pyarrow/_pyarrow_cpp_tests*",
)
#: Salts the asset hash and the dependency cache key with what the bundling does to the
#: installed packages (bytecode, trimmed service models): a change re-bundles.
BUNDLE_FORMAT = "pyc-unchecked-hash;botocore-data-trimmed;tracing-optional;xray-model"


class ProcessorPackageError(SettingsError):
    """Raised at synth when the ``processor``'s top-level package cannot be found (a settings
    problem: ``app.py`` reports it like any invalid setting)."""


def _ignored(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in _IGNORED)


def _top_level_sources(directory: Path) -> list[Path]:
    """The regular packages (directories holding ``__init__.py``) and modules (``*.py``) at the
    top of ``directory``, by name."""
    found = [
        entry
        for entry in directory.iterdir()
        if not _ignored(entry.name)
        and (
            (entry.is_dir() and entry.name.isidentifier() and (entry / "__init__.py").is_file())
            or (entry.is_file() and entry.suffix == ".py" and entry.stem.isidentifier())
        )
    ]
    return sorted(found, key=lambda entry: entry.name)


def _import_name(source: Path) -> str:
    return source.stem if source.is_file() else source.name


def processor_sources(
    processor: str | None,
    package_dir: str | None = None,
    *,
    functions_dir: Path = FUNCTIONS_DIR,
    project_root: Path = PROJECT_ROOT,
    package: str = FUNCTION_PACKAGE,
    setting: str = "processor",
) -> list[Path]:
    """What the function package needs besides ``package`` to import ``processor``.

    Parameters
    ----------
    processor : str or None
        ``"package.module:function"`` (the ``processor`` setting); ``None``: nothing.
    package_dir : str, optional
        The ``processorPackageDir`` setting, relative to ``project_root`` (or absolute): every
        top-level package and module in it is copied, and the processor's top-level package must
        be one of them.
    project_root : pathlib.Path
        What a relative ``package_dir`` is relative to (the directory of ``cdk.json``).
    setting : str
        Names ``processor`` in the problems (``"processors[1].handler"``).

    Returns
    -------
    list[pathlib.Path]
        Package directories and module files, each copied to the root of the function package.

    Raises
    ------
    ProcessorPackageError
        When the processor's top-level package is not found, ``package_dir`` is not a directory,
        or it holds a package named like the function package (which it would replace).
    """
    if processor is None:
        return []
    top = processor.partition(":")[0].split(".")[0]
    if package_dir is not None:
        directory = project_root / package_dir
        if not directory.is_dir():
            raise ProcessorPackageError(
                [f"processorPackageDir: {package_dir!r} is not a directory ({directory})"]
            )
        sources = _top_level_sources(directory)
        names = [_import_name(source) for source in sources]
        problems = []
        if top not in names:
            problems.append(
                f"{setting}: {processor!r} needs the top-level package {top!r}, which "
                f"processorPackageDir {package_dir!r} does not hold (a directory with "
                f"__init__.py or a {top}.py module at its top; found: {', '.join(names) or 'none'})"
            )
        if package in names:
            problems.append(
                f"processorPackageDir: {package_dir!r} holds a {package!r} package, which would "
                "replace the function's own"
            )
        if problems:
            raise ProcessorPackageError(problems)
        _check_defined(processor, directory, setting)
        return sources
    if top == package:
        _check_defined(processor, functions_dir, setting)
        return []
    for candidate in (functions_dir / top, functions_dir / f"{top}.py"):
        if candidate in _top_level_sources(functions_dir):
            _check_defined(processor, functions_dir, setting)
            return [candidate]
    raise ProcessorPackageError(
        [
            f"{setting}: {processor!r} needs the top-level package {top!r}, which is not under "
            f"{functions_dir} (a directory with __init__.py or a {top}.py module); put it "
            "there or name its directory with processorPackageDir"
        ]
    )


def processor_requirements(
    package_dir: str | None, *, project_root: Path = PROJECT_ROOT
) -> Path | None:
    """The processors' dependency file in ``package_dir`` (relative to ``project_root``):
    :func:`s3ingest.packaging.processor_requirements`."""
    return _requirements_in(package_dir, project_root)


def processors_sources(
    entries: Sequence[Mapping[str, Any]],
    package_dir: str | None = None,
    *,
    functions_dir: Path = FUNCTIONS_DIR,
    project_root: Path = PROJECT_ROOT,
    package: str = FUNCTION_PACKAGE,
) -> list[Path]:
    """What the function package needs for every ``module`` and ``handler`` of the
    ``processors`` setting's ``entries`` (:func:`processor_sources` of each, once each), and
    with a ``handler`` the :mod:`s3ingest_processor` helper its processor functions are built
    with (:data:`HELPER_DIR`).

    Raises
    ------
    ProcessorPackageError
        With the problems of every entry whose package or function is missing.
    """
    sources: list[Path] = []
    problems: list[str] = []
    for index, entry in enumerate(entries):
        for key in ("module", "handler"):
            if key not in entry:
                continue
            try:
                found = processor_sources(
                    entry[key],
                    package_dir,
                    functions_dir=functions_dir,
                    project_root=project_root,
                    package=package,
                    setting=f"processors[{index}].{key}",
                )
            except ProcessorPackageError as exc:
                problems.extend(p for p in exc.problems if p not in problems)
                continue
            sources.extend(source for source in found if source not in sources)
    if problems:
        raise ProcessorPackageError(problems)
    if any("handler" in entry for entry in entries) and HELPER_DIR not in sources:
        sources.append(HELPER_DIR)
    return sources


def _check_defined(processor: str, root: Path, setting: str = "processor") -> None:
    """Fail synth when the processor's module file or its function is missing, read with
    :mod:`ast` (team code is never imported into the synth's process: it may need dependencies
    the synth environment lacks, or do work when imported; the bundle's import check,
    :func:`s3ingest_cdk.bundle_check.check_imports`, imports it in a subprocess of its own).

    Raises
    ------
    ProcessorPackageError
        Naming the missing module file or function.
    """
    module, _, attr = processor.partition(":")
    base = root.joinpath(*module.split("."))
    path = next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)
    if path is None:
        raise ProcessorPackageError(
            [
                f"{setting}: {processor!r}: no module file {module!r} "
                f"under {root} ({base}.py or {base}/__init__.py)"
            ]
        )
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError) as exc:
        raise ProcessorPackageError(
            [f"{setting}: {processor!r}: {path} does not parse: {exc}"]
        ) from exc
    defined: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    if attr not in defined:
        raise ProcessorPackageError(
            [f"{setting}: {processor!r}: {path} defines no {attr!r} at its top level"]
        )


def _files(source: Path) -> Iterator[Path]:
    if source.is_file():
        yield source
        return
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if path.is_file() and not any(_ignored(part) for part in relative.parts):
            yield path


#: The roles' packages' files in ``functions/``, left out of the shared asset's hash (a role's
#: asset hashes the lock entries it installs: :func:`function_code`).
ROLE_PACKAGE_FILES = frozenset({ROLE_PACKAGES_LOCK, "packages.txt"})


def _fingerprint(digest: Any, root: Path, label: str, skip: frozenset[str] = frozenset()) -> None:
    """Add every file of ``root`` (path relative to it, and content) to ``digest``, but the
    names ``skip`` gives at its top."""
    base = root if root.is_dir() else root.parent
    for path in _files(root):
        if path.parent == root and path.name in skip:
            continue
        digest.update(f"{label}\0{path.relative_to(base).as_posix()}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())


@jsii.implements(ILocalBundling)
class PipLocalBundling:
    """Build the function package on the host with ``pip install --platform`` (no Docker).

    Parameters
    ----------
    functions_dir : Path
        Directory holding ``requirements.lock`` (:data:`LOCK_FILE`) and the function package.
    python_version : str
        Target CPython version, ``"3.13"``.
    platform : str
        Target wheel platform tag, ``"manylinux2014_aarch64"`` for ``arm64`` functions.
    extra_sources : Sequence[pathlib.Path]
        Package directories and module files copied to the package root beside ``package``
        (a processor's, :func:`processor_sources`).
    requirements : pathlib.Path, optional
        The processors' dependencies (:func:`processor_requirements`), installed after the lock
        into their own cache directory, constrained to the lock's versions.
    tracing : bool
        The ``tracing`` setting: off, the X-Ray SDK and ``wrapt`` (:data:`TRACING_ONLY`) are
        left out.
    packages : Sequence[str]
        A role's own packages (:attr:`~s3ingest.function_roles.FunctionRole.packages`),
        installed from ``packages_lock`` (:func:`s3ingest.packaging.install_role_packages`)
        without :data:`ROLE_LEFT_OUT`.

    The modules are compiled to bytecode of ``python_version`` (unchecked-hash ``.pyc``:
    :func:`s3ingest.packaging.compile_bytecode`); without ``extra_sources`` (no team code that
    may create any client), ``botocore/data`` keeps only :data:`BOTOCORE_SERVICES`.

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
        extra_sources: Sequence[Path] = (),
        lock: Path | None = None,
        requirements: Path | None = None,
        tracing: bool = True,
        packages: Sequence[str] = (),
        packages_lock: Path | None = None,
    ) -> None:
        self.tracing = tracing
        self.packages = tuple(packages)
        self.packages_lock = packages_lock
        self.functions_dir = functions_dir
        self.requirements = requirements
        self._lock = lock
        self.package = package
        self.cache_dir = cache_dir
        self.python_version = python_version
        self.platform = platform
        self.extra_sources = tuple(extra_sources)

    def try_bundle(self, output_dir: str, *, image: DockerImage | None = None, **_: Any) -> bool:
        """Write the package into ``output_dir``; always bundles locally (returns ``True``).

        Raises
        ------
        BundlingError
            When pip cannot install the lock for the target platform (or a hash differs).
        """
        out = Path(output_dir)
        dependencies = self.dependencies()
        shutil.copytree(dependencies, out, ignore=self._left_out(dependencies), dirs_exist_ok=True)
        if self.requirements is not None:
            shutil.copytree(self.processor_dependencies(), out, dirs_exist_ok=True)
        if self.packages:
            own = self.role_packages()
            shutil.copytree(own, out, ignore=_role_left_out(own), dirs_exist_ok=True)
        copied: list[Path] = []
        for source in (self.functions_dir / self.package, *self.extra_sources):
            if source.is_file():
                shutil.copy2(source, out / source.name)
                continue
            shutil.copytree(
                source,
                out / source.name,
                ignore=shutil.ignore_patterns(*_IGNORED),
                dirs_exist_ok=True,
            )
            copied.append(out / source.name)
        # the dependencies were compiled once, in their cache (pip_install); these are new (a
        # processor's module at the package's root: the root's top-level modules, not below)
        loose = [out] if any(source.is_file() for source in self.extra_sources) else []
        compile_bytecode(copied, self.python_version, top_only=loose)
        return True

    def _left_out(self, root: Path) -> Any:
        """The ``copytree`` ``ignore`` of the dependencies: :data:`TRACING_ONLY` without
        ``tracing``, the service models not in :data:`BOTOCORE_SERVICES` (and, with
        ``tracing``, :data:`TRACING_SERVICES`) without ``extra_sources``."""
        data = root / "botocore" / "data"
        kept = BOTOCORE_SERVICES | (TRACING_SERVICES if self.tracing else frozenset())

        def ignore(directory: str, names: list[str]) -> set[str]:
            here = Path(directory)
            if here == root and not self.tracing:
                return {n for n in names if any(fnmatch.fnmatch(n, p) for p in TRACING_ONLY)}
            if here == data and not self.extra_sources:
                return {n for n in names if (here / n).is_dir() and n not in kept}
            return set()

        return ignore

    @property
    def lock_file(self) -> Path:
        """The hashed lock the dependencies are installed from."""
        return self._lock if self._lock is not None else self.functions_dir / LOCK_FILE

    def cache_key(self) -> str:
        """Key of the dependency cache: lock file hash, platform and Python version."""
        digest = hashlib.sha256(self.lock_file.read_bytes())
        digest.update(f"\0{BUNDLE_FORMAT}".encode())
        return f"deps-{self.platform}-cp{self.python_version}-{digest.hexdigest()[:20]}"

    def dependencies(self) -> Path:
        """Directory of the resolved dependencies, installing them once per cache key."""
        return pip_install(
            self.cache_dir / self.cache_key(),
            ["--require-hashes", "-r", str(self.lock_file)],
            platform=self.platform,
            python_version=self.python_version,
        )

    def role_packages(self) -> Path:
        """Directory of :attr:`packages` installed for the platform, once per content of their
        lock entries (:func:`s3ingest.packaging.install_role_packages`).

        Raises
        ------
        BundlingError
            When a package is not in the lock, or pip cannot install it.
        """
        lock = self.packages_lock if self.packages_lock is not None else role_lock_path()
        return install_role_packages(
            self.packages,
            lock,
            self.cache_dir,
            platform=self.platform,
            python_version=self.python_version,
        )

    def processor_dependencies(self) -> Path:
        """Directory of the processors' dependencies (``requirements``), installed once per
        content hash of it and of the lock, constrained to the lock's pins
        (:func:`s3ingest.packaging.install_processor_requirements`).

        Raises
        ------
        BundlingError
            Without ``requirements``, or when pip cannot install them.
        """
        if self.requirements is None:
            raise BundlingError("no processor requirements to install")
        return install_processor_requirements(
            self.requirements,
            self.cache_dir,
            lock=self.lock_file,
            platform=self.platform,
            python_version=self.python_version,
        )


def _role_left_out(root: Path) -> Any:
    """The ``copytree`` ``ignore`` leaving :data:`ROLE_LEFT_OUT` out of ``root``."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        here = Path(directory).relative_to(root)
        return {
            n
            for n in names
            if any(fnmatch.fnmatch((here / n).as_posix(), p) for p in ROLE_LEFT_OUT)
        }

    return ignore


def build_cache(scope: Any, given: str | PathLike[str] | None = None) -> Path:
    """The build cache of ``scope``'s app: ``given`` (``bundle_cache_dir``), else the context
    value :data:`BUNDLE_CACHE_CONTEXT` (``cdk.json`` or ``-c``), else
    ``<outdir>/.s3ingest-build`` (:data:`BUILD_SUBDIR`; ``cdk.out`` under ``cdk synth``)."""
    if given is None:
        given = scope.node.try_get_context(BUNDLE_CACHE_CONTEXT)
    if given is not None:
        return Path(given).resolve()
    stage = Stage.of(scope)
    if stage is None:
        raise ValueError(f"{scope} is not in an app: no outdir for the build cache")
    return Path(stage.outdir).resolve() / BUILD_SUBDIR


def function_code(
    *,
    cache_dir: Path,
    functions_dir: Path = FUNCTIONS_DIR,
    package: str = FUNCTION_PACKAGE,
    extra_sources: Sequence[Path] = (),
    requirements: Path | None = None,
    imports: Mapping[str, str] | None = None,
    notes: list[str] | None = None,
    tracing: bool = True,
    packages: Sequence[str] = (),
) -> lambda_.Code:
    """Asset code of the functions, bundled locally by :class:`PipLocalBundling`.

    The asset hash is a hash of :data:`BUNDLE_FORMAT`, ``tracing``, and the files (names and
    contents) of ``functions_dir`` in a checkout (lock and code), else (an installed package:
    ``functions_dir`` is ``site-packages``, the asset the package directory alone, the lock the
    packaged one, :func:`lock_path`) of the package and the lock; and of ``extra_sources`` and
    ``requirements``: CDK re-bundles when any changes, a package with a processor differs from
    the one without, and a change to a processor outside ``functions_dir`` re-bundles too.

    With ``extra_sources`` the package is built here, at synth, into
    ``cache_dir/bundle-<hash>`` (once per hash), and each of ``imports`` is imported from it
    (:func:`s3ingest_cdk.bundle_check.check_imports`) before the asset is made of it.

    Parameters
    ----------
    cache_dir : pathlib.Path
        The build cache (``<outdir>/.s3ingest-build`` or the pipeline's ``bundle_cache_dir``).
    imports : mapping of str to str, optional
        ``"package.module:function"`` by setting, checked in the built package.
    notes : list of str, optional
        Receives what the import check could not check on this host.
    tracing : bool
        The functions' ``tracing`` setting (off: no X-Ray SDK in the package, a package of its
        own: :class:`PipLocalBundling`).
    packages : Sequence[str]
        A role's own packages (:attr:`~s3ingest.function_roles.FunctionRole.packages`): an
        asset of its own, its hash salted with their lock entries
        (:func:`s3ingest.packaging.locked_requirements`); ``()``: the shared asset, its hash
        as without this parameter.

    Returns
    -------
    aws_cdk.aws_lambda.Code
        ``Code.from_asset`` with local bundling (or of the package built here); the Docker
        image is never pulled.

    Raises
    ------
    FileNotFoundError
        When no lock is found (:func:`lock_path`).
    s3ingest_cdk.bundle_check.ProcessorImportError
        When a processor of ``imports`` cannot be imported from the package.
    """
    lock = lock_path(functions_dir)
    checkout = lock.parent == functions_dir
    source = functions_dir if checkout else functions_dir / package
    bundler = PipLocalBundling(
        functions_dir=functions_dir,
        package=package,
        cache_dir=cache_dir,
        python_version=PYTHON_VERSION,
        platform=PIP_PLATFORM,
        extra_sources=extra_sources,
        lock=lock,
        requirements=requirements,
        tracing=tracing,
        packages=packages,
        packages_lock=role_lock_path(functions_dir) if packages else None,
    )
    # always a custom hash: what the bundling makes of the sources (BUNDLE_FORMAT, tracing) is
    # part of the package, and CDK reuses a bundled asset directory of the same hash
    digest = hashlib.sha256(b"s3ingest-function-package\0")
    digest.update(f"{BUNDLE_FORMAT}\0tracing={tracing}\0".encode())
    if checkout:
        _fingerprint(digest, functions_dir, "functions", ROLE_PACKAGE_FILES)
    else:
        _fingerprint(digest, source, f"package:{package}")
        _fingerprint(digest, lock, "lock")
    for extra in extra_sources:
        _fingerprint(digest, extra, f"extra:{extra.name}")
    if requirements is not None:
        _fingerprint(digest, requirements, "requirements")
    if packages:
        assert bundler.packages_lock is not None
        digest.update(b"packages\0" + locked_requirements(bundler.packages_lock, packages).encode())
    custom_hash: dict[str, Any] = {
        "asset_hash_type": AssetHashType.CUSTOM,
        "asset_hash": digest.hexdigest(),
    }
    if extra_sources:
        built = _built(bundler, cache_dir / f"bundle-{custom_hash['asset_hash'][:20]}")
        found = check_imports(built, imports or {}, requirements=requirements)
        if notes is not None:
            notes.extend(found)
        return lambda_.Code.from_asset(str(built), **custom_hash)
    return lambda_.Code.from_asset(
        str(source),
        exclude=[f"**/{pattern}" for pattern in _IGNORED],
        **custom_hash,
        bundling=BundlingOptions(image=RUNTIME.bundling_image, local=bundler),
    )


def _built(bundler: PipLocalBundling, target: Path) -> Path:
    """``target`` holding the package :class:`PipLocalBundling` writes, built once (staged
    beside it, then renamed)."""
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        bundler.try_bundle(str(staging))
        staging.rename(target)
    except OSError:
        if not target.is_dir():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
