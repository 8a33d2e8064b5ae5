"""The processors' third-party dependencies, installed for the Lambda platform without Docker
(no AWS CDK needed: the CDK bundling, :mod:`s3ingest_cdk.bundling`, and the local runtime,
:func:`s3ingest.local.stack.daemon.deploy`, both install them with these functions).

``pip install --target --platform manylinux2014_aarch64 --only-binary=:all: --python-version
3.13 --implementation cp``: pip accepts only binary wheels for that platform, nothing is compiled
on the host (https://docs.aws.amazon.com/lambda/latest/dg/python-package.html). Each install is
staged beside its target and renamed into place, once per cache key.

The installed modules are compiled to bytecode for :data:`PYTHON_VERSION`
(:func:`compile_bytecode`): ``/var/task`` is read-only in Lambda, so a package without
``__pycache__`` is compiled again, module by module, in every new execution environment.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

#: The Lambda platform the wheels are installed for (the functions' runtime and architecture).
PIP_PLATFORM = "manylinux2014_aarch64"
PYTHON_VERSION = "3.13"
#: The glibc the roles' own packages (:func:`install_role_packages`) may also be built for,
#: beside :data:`PIP_PLATFORM`'s 2.17: the ``python3.13`` runtime runs on Amazon Linux 2023
#: (glibc 2.34, https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtimes.html), and
#: pyarrow ships its ``aarch64`` wheels for glibc 2.28 only.
ROLE_GLIBC = "2_28"


def role_platforms(platform: str) -> tuple[str, ...]:
    """The platforms besides ``platform`` (``manylinux2014_<arch>``) a role's own packages may
    be built for: ``manylinux_2_28_<arch>`` (:data:`ROLE_GLIBC`)."""
    arch = platform.removeprefix("manylinux2014_")
    return (f"manylinux_{ROLE_GLIBC}_{arch}",) if arch != platform else ()


#: The processors' dependency files in ``processorPackageDir``; the first found is used.
PROCESSOR_REQUIREMENTS = ("requirements.lock", "requirements.txt")


#: The bytecode magic number of each CPython minor version the runtime may be (the first two
#: bytes, little-endian, of ``importlib.util.MAGIC_NUMBER``; constant within a minor version).
MAGIC_NUMBERS = {"3.11": 3495, "3.12": 3531, "3.13": 3571}
#: The npm package whose CPython (compiled to WebAssembly, run by Node.js) compiles bytecode for
#: :data:`PYTHON_VERSION` on a host without that interpreter (``package.json`` pins it).
PYODIDE_PACKAGE = "pyodide"


class BundlingError(RuntimeError):
    """Raised when dependencies cannot be resolved for the Lambda platform."""


def cache_tag(python_version: str = PYTHON_VERSION) -> str:
    """The ``__pycache__`` tag of CPython ``python_version``: ``"cpython-313"``."""
    return "cpython-" + python_version.replace(".", "")


def magic_number(python_version: str = PYTHON_VERSION) -> bytes:
    """The 4-byte header a ``.pyc`` of CPython ``python_version`` starts with."""
    return MAGIC_NUMBERS[python_version].to_bytes(2, "little") + b"\r\n"


_PYODIDE_SCRIPT = """
import { pathToFileURL } from "node:url";
const [pyodide, top, ...paths] = process.argv.slice(1);
const { loadPyodide } = await import(pathToFileURL(pyodide).href);
const py = await loadPyodide();
const mounts = [];
paths.forEach((path, index) => {
  const dir = "/m" + index;
  py.FS.mkdirTree(dir);
  py.FS.mount(py.FS.filesystems.NODEFS, { root: path }, dir);
  mounts.push(dir);
});
py.globals.set("mounts", py.toPy(mounts));
py.globals.set("top", Number(top));
const failed = py.runPython(`
import compileall, py_compile
mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
not all([
    compileall.compile_dir(d, quiet=1, invalidation_mode=mode, maxlevels=0 if i >= top else None)
    for i, d in enumerate(mounts)
])
`);
process.exit(failed ? 1 : 0);
"""

_COMPILE_SCRIPT = (
    "import compileall, py_compile, sys\n"
    "mode = py_compile.PycInvalidationMode.UNCHECKED_HASH\n"
    "top = int(sys.argv[1])\n"
    "sys.exit(not all([compileall.compile_dir(d, quiet=1, invalidation_mode=mode,"
    " maxlevels=0 if i >= top else None) for i, d in enumerate(sys.argv[2:])]))\n"
)


def find_pyodide(starts: Iterable[Path] = ()) -> Path | None:
    """The ``pyodide.mjs`` of the :data:`PYODIDE_PACKAGE` npm package in a ``node_modules`` of
    ``starts``, this package's directory or the working directory, or of one above them."""
    for start in (*starts, Path(__file__).resolve().parent, Path.cwd().resolve()):
        for candidate in (start, *start.parents):
            found = candidate / "node_modules" / PYODIDE_PACKAGE / "pyodide.mjs"
            if found.is_file():
                return found
    return None


def _runs(interpreter: str, python_version: str) -> bool:
    """Whether ``interpreter`` runs and is CPython ``python_version`` (a version manager's shim
    may name a version it cannot run)."""
    probe = "import sys; print('%d.%d' % sys.version_info[:2], sys.implementation.name)"
    try:
        found = subprocess.run(
            [interpreter, "-I", "-c", probe], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return found.returncode == 0 and found.stdout.split() == [python_version, "cpython"]


def bytecode_compiler(python_version: str = PYTHON_VERSION) -> list[str] | None:
    """The command that compiles directories (its last arguments) to bytecode of CPython
    ``python_version``: this interpreter when it is that version, else a ``python3.13`` on
    ``PATH`` that runs, else :data:`PYODIDE_PACKAGE` (CPython 3.13 compiled to WebAssembly: the
    same compiler, the same bytecode) under Node.js; None when there is none."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == python_version:
        return [sys.executable, "-I", "-c", _COMPILE_SCRIPT]
    interpreter = shutil.which(f"python{python_version}")
    if interpreter is not None and _runs(interpreter, python_version):
        return [interpreter, "-I", "-c", _COMPILE_SCRIPT]
    pyodide = find_pyodide()
    node = shutil.which("node") or (
        str(pyodide.parents[1] / ".bin" / "node") if pyodide is not None else None
    )
    if pyodide is None or node is None or not os.access(node, os.X_OK):
        return None
    return [node, "--input-type=module", "-e", _PYODIDE_SCRIPT, str(pyodide)]


def compile_bytecode(
    directories: Sequence[Path],
    python_version: str = PYTHON_VERSION,
    *,
    top_only: Sequence[Path] = (),
) -> bool:
    """Compile every module under ``directories``, and the modules at the top of ``top_only``,
    to ``__pycache__/*.cpython-313.pyc`` (:func:`cache_tag`) with an interpreter of
    ``python_version`` (:func:`bytecode_compiler`).

    The ``.pyc`` files are unchecked-hash ones (PEP 552): the runtime loads them without
    comparing the source's modification time, which the bundling's copies and the asset's
    zip do not keep. Returns False, with a warning, when no interpreter of ``python_version``
    is found (the package then works, compiling its modules at each cold start).

    Raises
    ------
    BundlingError
        When the compiler fails (a module that does not compile for ``python_version``).
    """
    command = bytecode_compiler(python_version)
    if command is None:
        warnings.warn(
            f"no CPython {python_version} (nor Node.js with the {PYODIDE_PACKAGE!r} npm "
            "package) to compile the function package's bytecode: Lambda compiles it at "
            "every cold start",
            stacklevel=2,
        )
        return False
    if not directories and not top_only:
        return True
    existing = [str(directory.resolve()) for directory in (*directories, *top_only)]
    try:
        subprocess.run(
            [*command, str(len(directories)), *existing],
            check=True,
            capture_output=True,
            text=True,
        )
    except subprocess.CalledProcessError as err:
        raise BundlingError(
            f"could not compile {', '.join(existing)} for CPython {python_version}:\n"
            f"{err.stdout}{err.stderr}"
        ) from err
    return True


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
    bytecode: bool = True,
    also: Sequence[str] = (),
) -> Path:
    """Install ``requirements`` (pip arguments: ``-r FILE``, ``-c FILE``, ``--require-hashes``)
    for ``platform`` (and the platforms ``also`` names) / CPython ``python_version`` into
    ``target``, unless it exists, compiled to bytecode of ``python_version``
    (:func:`compile_bytecode`) unless ``bytecode`` is False.

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
        *(arg for extra in also for arg in ("--platform", extra)),
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
        if bytecode:
            compile_bytecode([staging], python_version)
    except BundlingError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
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
    bytecode: bool = True,
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
    return pip_install(
        target, args, platform=platform, python_version=python_version, bytecode=bytecode
    )


def _lock_entries(lock: Path) -> dict[str, tuple[str, set[str]]]:
    """Each entry of a ``uv pip compile`` lock by normalised name: its text (pin and hashes)
    and the names its ``# via`` comment gives (what needs it; ``-r ...`` kept as is)."""
    entries: dict[str, tuple[str, set[str]]] = {}
    name, in_via = "", False
    lines: list[str] = []
    via: set[str] = set()

    def close() -> None:
        if name:
            entries[name] = ("\n".join(lines) + "\n", via)

    for line in lock.read_text().splitlines():
        pin = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==", line)
        if pin:
            close()
            name, lines, via, in_via = _normalise(pin.group(1)), [line], set(), False
        elif name and line.startswith("    --hash"):
            lines.append(line)
        elif name and line.strip().startswith("# via"):
            rest = line.strip()[len("# via") :].strip()
            in_via = not rest
            if rest:
                via.add(_normalise(rest))
        elif name and in_via and line.strip().startswith("#   "):
            via.add(_normalise(line.strip()[1:].strip()))
    close()
    return entries


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_requirements(lock: Path, names: Sequence[str]) -> str:
    """The entries of ``lock`` (pins with their hashes) for ``names`` and every entry they need
    (an entry whose ``# via`` names one of them), as a requirements file.

    Raises
    ------
    BundlingError
        When a name is not in ``lock``.
    """
    entries = _lock_entries(lock)
    wanted = {_normalise(n) for n in names}
    missing = sorted(wanted - entries.keys())
    if missing:
        raise BundlingError(f"{lock.name} pins no {', '.join(missing)} (make lock)")
    grew = True
    while grew:
        needed = {n for n, (_, via) in entries.items() if via & wanted}
        grew = not needed <= wanted
        wanted |= needed
    return "".join(entries[n][0] for n in sorted(wanted))


def install_role_packages(
    names: Sequence[str],
    lock: Path,
    cache_dir: Path,
    *,
    platform: str = PIP_PLATFORM,
    python_version: str = PYTHON_VERSION,
) -> Path:
    """The directory of a role's own ``names`` installed from ``lock``
    (:func:`locked_requirements`, ``--require-hashes``) for ``platform`` and
    :func:`role_platforms` (:func:`pip_install`), once per content of those entries and
    platform: ``cache_dir/role-<platform>-cp<version>-<hash>``.

    Raises
    ------
    BundlingError
        When a name is not in ``lock`` or pip cannot install them.
    """
    text = locked_requirements(lock, names)
    digest = hashlib.sha256(text.encode()).hexdigest()[:20]
    key = f"role-{platform}-cp{python_version}-{digest}"
    target = cache_dir / key
    if target.is_dir():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    requirements = cache_dir / f"{key}.requirements.txt"
    requirements.write_text(text)
    return pip_install(
        target,
        ["--require-hashes", "-r", str(requirements)],
        platform=platform,
        python_version=python_version,
        also=role_platforms(platform),
    )
