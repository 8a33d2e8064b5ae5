"""The ingest function's cold start from the bundle as shipped, against ``boto3`` plus clients.

The bundle is built (outside the timed window) by the function the CDK asset is built with,
:meth:`s3ingest_cdk.bundling.PipLocalBundling.try_bundle`, once with ``tracing`` off and once
on, for the Python that runs it here and this host's platform (so that ``wrapt``'s native
module imports): the runtime's Python (3.13) when the host has one, else the host's own, whose
bytecode the bundle then holds. Each child interpreter imports as Lambda does: ``python -I -S
-B`` (no site-packages, no working directory, no ``.pyc`` written), the bundle directory
first on ``sys.path``, the standard library after it.

Timed in the child with ``time.perf_counter`` (wall) and ``time.process_time`` (CPU: steadier
on a shared machine), interpreter start-up excluded, the variants interleaved run by run:

- the ingest cold start: import of the handler module, settings, clients (the DynamoDB one,
  botocore's: boto3 is imported with the first S3 client; S3 and SQS are made on first use),
  and with ``tracing`` on the X-Ray tracer;
- the same cold start with the garbage collector running throughout (outside Lambda's
  ``AWS_EXECUTION_ENV``, :mod:`s3ingest_fn.handlers` does not pause it);
- the same cold start from the package without its ``__pycache__`` (as shipped before);
- ``import boto3`` plus a DynamoDB client, and ``boto3`` plus the DynamoDB, S3 and SQS clients
  (the issue's baseline), from the same bundle's ``boto3`` and ``botocore``; botocore plus a
  DynamoDB client (the SDK's own share of the cold start);
- the reconcile function's cold start (handler, reconciler) key by key from the shared
  bundle, and in columns from its own (the bundle and pyarrow, ``FunctionRole.packages``), with
  the pyarrow modules its first run imports;
- the handler module's import alone against ``import boto3`` alone (what ``bench/import_time.py``
  timed on the development tree; now on the bundle).

Each ratio is printed as the ratio of the medians and, run by run (each run's variants ran
back to back), its min, median and max. Target: the cold start, tracing off, at most 1.0
times ``boto3`` plus the three clients. Also
printed: the bundle's size, unzipped and zipped (deflate, as the CDK asset's zip).
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

#: The child's code: ``{body}`` timed after the bundle is put first on ``sys.path``, run in a
#: function as Lambda's runtime imports the handler module and invokes the handler (from its
#: own functions, never from the ``__main__`` module's top level).
CHILD = (
    "import sys, time; sys.path.insert(0, {bundle!r})\n"
    "def cold_start():\n"
    "    {body}\n"
    "t = time.perf_counter(); c = time.process_time()\n"
    "cold_start()\n"
    "print(time.perf_counter() - t, time.process_time() - c)\n"
)
#: :data:`CHILD` as the bench ran it until stop 44: ``{body}`` at the ``-c`` module's top level.
#: On CPython 3.13, ``_build_from_env()`` called from there costs about 35 ms more CPU than the
#: same call from any function (the same modules load; the extra time is in ``re``'s parser;
#: the cause is not known), while boto3's cold start costs the same either way.
TOP_LEVEL_CHILD = (
    "import sys, time; sys.path.insert(0, {bundle!r}); t = time.perf_counter()\n"
    "c = time.process_time()\n"
    "{body}\n"
    "print(time.perf_counter() - t, time.process_time() - c)\n"
)
COLD_START = "import s3ingest_fn.handlers.ingest as h; h.built()"
#: The cold start as the bench timed it until stop 44 (in :data:`TOP_LEVEL_CHILD`).
TOP_LEVEL_COLD_START = "import s3ingest_fn.handlers.ingest as h; h._build_from_env()"
BOTO3 = "import boto3; [boto3.client(s) for s in {services!r}]"
BOTOCORE = "import botocore.session; botocore.session.Session().create_client('dynamodb')"
IMPORT_HANDLER = "import s3ingest_fn.handlers.ingest"
#: The reconcile function's cold start: its handler, its reconciler (clients, the scanner);
#: in columns (its own asset, with pyarrow) also the pyarrow modules its first run imports.
RECONCILE = (
    "import s3ingest_fn.handlers.reconcile; from s3ingest_fn import wiring; "
    "wiring.function_reconciler()"
)
RECONCILE_COLUMNS = (
    RECONCILE + "; from s3ingest_fn.arrow_memory import prepare; prepare(); "
    "import pyarrow.compute, pyarrow.csv, pyarrow.json"
)
RECONCILE_KEYS_LABEL = "reconcile cold start, key by key (shared asset)"
RECONCILE_COLUMNS_LABEL = "reconcile cold start, in columns (its asset, pyarrow)"
IMPORT_BOTO3 = "import boto3"
#: What the function's environment holds at a cold start (credentials: Lambda's, in the
#: environment, so that no client looks for others).
ENV = {
    "LEDGER_TABLE_NAME": "ledger",
    "DEAD_LETTER_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/dlq",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "secret",
    "AWS_SESSION_TOKEN": "token",
    "POWERTOOLS_METRICS_DISABLED": "true",
    "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13",
    "AWS_LAMBDA_FUNCTION_NAME": "s3ingest-ingest",
    "INGEST_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/ingest",
    "BUCKET_NAME": "landing",
}
RUNS = 15
OFF = "cold start, tracing off"
BEFORE = "cold start, tracing off, without bytecode"
ON = "cold start, tracing on (X-Ray SDK)"
#: The cold start with the garbage collector running throughout (``AWS_EXECUTION_ENV`` unset:
#: :mod:`s3ingest_fn.handlers` pauses it in Lambda only), as it ran before the pause.
COLLECTING = "cold start, tracing off, collector running"
#: The cold start and the baseline timed at the child's top level (:data:`TOP_LEVEL_CHILD`).
TOP_LEVEL = "cold start, tracing off, at top level"
BASELINE = "boto3 + dynamodb, s3, sqs"
BASELINE_TOP_LEVEL = "boto3 + dynamodb, s3, sqs, at top level"
#: An interpreter to import the bundle with (its version is the bundle's), instead of
#: :func:`interpreter`'s choice.
PYTHON_ENV = "S3INGEST_BENCH_PYTHON"


def interpreter() -> tuple[str, str]:
    """The interpreter the bundle is imported with and its ``X.Y``: :data:`PYTHON_ENV`'s, else
    one of the runtime's version that runs (:data:`s3ingest.packaging.PYTHON_VERSION`), else
    this one."""
    from s3ingest.packaging import PYTHON_VERSION, _runs

    given = os.environ.get(PYTHON_ENV)
    if given:
        version = subprocess.run(
            [given, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return given, version
    found = shutil.which(f"python{PYTHON_VERSION}")
    if found is not None and _runs(found, PYTHON_VERSION):
        return found, PYTHON_VERSION
    return sys.executable, f"{sys.version_info.major}.{sys.version_info.minor}"


def build(
    target: Path,
    cache: Path,
    python_version: str,
    *,
    tracing: bool,
    packages: tuple[str, ...] = (),
) -> Path:
    """The function bundle, as the CDK asset is built, for ``python_version`` and this host;
    with a role's own ``packages`` (the reconcile function's: ``("pyarrow",)``)."""
    from s3ingest_cdk.bundling import (
        FUNCTION_PACKAGE,
        FUNCTIONS_DIR,
        PipLocalBundling,
        lock_path,
        role_lock_path,
    )

    host = {"x86_64": "manylinux2014_x86_64", "aarch64": "manylinux2014_aarch64"}
    target.mkdir(parents=True)
    PipLocalBundling(
        functions_dir=FUNCTIONS_DIR,
        package=FUNCTION_PACKAGE,
        cache_dir=cache,
        python_version=python_version,
        platform=host.get(platform.machine(), "manylinux2014_aarch64"),
        lock=lock_path(),
        tracing=tracing,
        packages=packages,
        packages_lock=role_lock_path() if packages else None,
    ).try_bundle(str(target))
    return target


def sizes(bundle: Path, scratch: Path) -> tuple[float, float]:
    """The bundle's size unzipped and zipped (deflate), MB."""
    files = [p for p in bundle.rglob("*") if p.is_file()]
    archive = scratch / f"{bundle.name}.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for path in files:
            out.write(path, path.relative_to(bundle).as_posix())
    return sum(p.stat().st_size for p in files) / 1e6, archive.stat().st_size / 1e6


class Variant(NamedTuple):
    """One child's bundle, timed code, environment changes (a None value unsets) and template."""

    bundle: Path
    body: str
    env: Mapping[str, str | None]
    child: str = CHILD


def _sample(python: str, variant: Variant, env: dict[str, str]) -> tuple[float, float]:
    """One child's (wall, CPU) seconds of ``variant``'s body."""
    bundle = variant.bundle
    code = variant.child.format(bundle=str(bundle), body=variant.body)
    for name, value in variant.env.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    done = subprocess.run(
        [python, "-I", "-S", "-B", "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=bundle,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the child failed ({bundle.name}):\n{done.stderr}")
    wall, cpu = done.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def _line(label: str, samples: list[float], base: list[float] | None = None) -> str:
    """``label``'s min, median and max in ms; against ``base`` (the same runs, interleaved),
    the ratio of the medians and the min, median and max of the run-by-run ratios."""
    ms = [s * 1000 for s in samples]
    text = (
        f"   {label:<52} min {min(ms):7.1f}  median {statistics.median(ms):7.1f}"
        f"  max {max(ms):7.1f} ms"
    )
    if base is not None:
        text += f"   ratio {statistics.median(samples) / statistics.median(base):5.2f}"
        per_run = [s / b for s, b in zip(samples, base, strict=True)]
        text += (
            f" (run by run: min {min(per_run):.2f}  median {statistics.median(per_run):.2f}"
            f"  max {max(per_run):.2f})"
        )
    return text


def run(runs: int = RUNS) -> None:
    python, version = interpreter()
    with tempfile.TemporaryDirectory(prefix="s3ingest-bundle-bench-") as tmp:
        scratch = Path(tmp)
        cache = scratch / "cache"
        bundles = {
            tracing: build(scratch / f"tracing-{tracing}", cache, version, tracing=tracing)
            for tracing in (False, True)
        }
        from s3ingest.function_roles import RECONCILE as RECONCILE_ROLE

        reconcile = build(
            scratch / "reconcile",
            cache,
            version,
            tracing=False,
            packages=RECONCILE_ROLE.packages,
        )
        # the same package as it shipped before issue 37 compiled it (botocore/data and the
        # X-Ray SDK aside): every module compiled at every cold start
        uncompiled = scratch / "uncompiled"
        shutil.copytree(bundles[False], uncompiled, ignore=shutil.ignore_patterns("__pycache__"))
        env = {"PATH": os.environ.get("PATH", ""), **ENV}
        off = {"POWERTOOLS_TRACE_DISABLED": "true"}
        three_clients = BOTO3.format(services=("dynamodb", "s3", "sqs"))
        variants = {
            OFF: Variant(bundles[False], COLD_START, off),
            COLLECTING: Variant(bundles[False], COLD_START, {**off, "AWS_EXECUTION_ENV": None}),
            TOP_LEVEL: Variant(bundles[False], TOP_LEVEL_COLD_START, off, TOP_LEVEL_CHILD),
            ON: Variant(bundles[True], COLD_START, {"POWERTOOLS_TRACE_DISABLED": "false"}),
            BEFORE: Variant(uncompiled, COLD_START, off),
            "boto3 + dynamodb": Variant(bundles[False], BOTO3.format(services=("dynamodb",)), off),
            BASELINE: Variant(bundles[False], three_clients, off),
            BASELINE_TOP_LEVEL: Variant(bundles[False], three_clients, off, TOP_LEVEL_CHILD),
            "botocore + dynamodb": Variant(bundles[False], BOTOCORE, off),
            "import boto3": Variant(bundles[False], IMPORT_BOTO3, off),
            IMPORT_HANDLER: Variant(bundles[False], IMPORT_HANDLER, off),
            RECONCILE_KEYS_LABEL: Variant(bundles[False], RECONCILE, off),
            RECONCILE_COLUMNS_LABEL: Variant(reconcile, RECONCILE_COLUMNS, off),
        }
        samples: dict[str, list[float]] = {name: [] for name in variants}
        cpu: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(runs):  # interleaved: the machine's load falls on every variant alike
            for name, variant in variants.items():
                wall_s, cpu_s = _sample(python, variant, dict(env))
                samples[name].append(wall_s)
                cpu[name].append(cpu_s)
        print(f"   python {version} ({python}), -I -S -B, {runs} runs interleaved; wall time:")
        three = samples[BASELINE]
        print(_line(f"{BASELINE} (baseline)", three))
        print(_line("boto3 + dynamodb", samples["boto3 + dynamodb"], three))
        print(_line(f"{OFF} (target <= 1.00)", samples[OFF], three))
        print(_line(COLLECTING, samples[COLLECTING], three))
        print(_line(TOP_LEVEL, samples[TOP_LEVEL], samples[BASELINE_TOP_LEVEL]))
        print(_line(ON, samples[ON], three))
        print(_line(BEFORE, samples[BEFORE], three))
        print(_line("botocore + dynamodb", samples["botocore + dynamodb"], three))
        boto3 = samples["import boto3"]
        print(_line("import boto3", boto3))
        print(
            _line(
                "import s3ingest_fn.handlers.ingest (vs import boto3)",
                samples[IMPORT_HANDLER],
                boto3,
            )
        )
        print("   process CPU time (steadier than wall time on a shared machine):")
        base_cpu = cpu[BASELINE]
        print(_line(f"{BASELINE} (baseline) (CPU)", base_cpu))
        for name in (OFF, COLLECTING, ON, BEFORE, "botocore + dynamodb"):
            print(_line(f"{name} (CPU)", cpu[name], base_cpu))
        print(_line(f"{BASELINE_TOP_LEVEL} (CPU)", cpu[BASELINE_TOP_LEVEL], base_cpu))
        print(
            _line(
                f"{TOP_LEVEL} (CPU, vs the baseline at top level)",
                cpu[TOP_LEVEL],
                cpu[BASELINE_TOP_LEVEL],
            )
        )
        print(
            _line(
                "import s3ingest_fn.handlers.ingest (CPU)", cpu[IMPORT_HANDLER], cpu["import boto3"]
            )
        )
        keys = samples[RECONCILE_KEYS_LABEL]
        print(_line(RECONCILE_KEYS_LABEL, keys))
        print(
            _line(
                f"{RECONCILE_COLUMNS_LABEL} (vs key by key)", samples[RECONCILE_COLUMNS_LABEL], keys
            )
        )
        print(_line(f"{RECONCILE_KEYS_LABEL} (CPU)", cpu[RECONCILE_KEYS_LABEL]))
        print(
            _line(
                f"{RECONCILE_COLUMNS_LABEL} (CPU)",
                cpu[RECONCILE_COLUMNS_LABEL],
                cpu[RECONCILE_KEYS_LABEL],
            )
        )
        unzipped, zipped = sizes(reconcile, scratch)
        print(
            f"   reconcile asset (tracing off, pyarrow): {unzipped:5.1f} MB unzipped, "
            f"{zipped:5.1f} MB zipped (Lambda's limit: 250 MB unzipped)"
        )
        for tracing, bundle in bundles.items():
            unzipped, zipped = sizes(bundle, scratch)
            print(
                f"   bundle, tracing {'on ' if tracing else 'off'}: {unzipped:5.1f} MB unzipped, "
                f"{zipped:5.1f} MB zipped"
            )
