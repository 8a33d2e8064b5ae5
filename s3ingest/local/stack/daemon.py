"""``s3ingest local up``: the stack on the emulator in a background process that stays up.

:func:`start` spawns ``python -m s3ingest.local.stack.daemon`` detached (its own session, output to
``local.log`` of the run directory, :func:`run_dir`), which runs :func:`serve`: the emulator on a
free port (or ``local up --port``'s), a
:class:`~s3ingest.local.stack.runtime.LocalRuntime` deployed from the settings (``cdk.json``'s
context plus ``--context`` pairs, :func:`read_context`), and, until SIGTERM, the pipeline's
event sources in a loop: the S3 events of writes by any client of the endpoint
(:mod:`s3ingest.local.emulator.outside_writes`) published to the bus, the ingest queue drained
through the ingest handler, the change stream pumped. Once deployed it writes the run file
(:data:`RUN_FILE` in the run directory):
``{"pid", "endpoint", "region", "credentials", "stack", "buckets", "outputs", "started_at"}``,
``outputs`` named as the deployed stack's CloudFormation outputs, which ``--local`` on the
operator commands reads (:func:`s3ingest.commands.context.connect_local`). :func:`stop` ends
that process (by its pid, after checking its command line), :func:`probe` says whether it
runs. What each function and processor prints goes to its file in :data:`LOGS_DIR` of the run
directory (:mod:`s3ingest.local.emulator.function_logs`; ``s3ingest local logs`` reads them),
emptied by the next ``local up``.

The emulator's state lives in the process's memory: ``local down`` discards it, unless a
state folder is given (:mod:`s3ingest.local.stack.saved_state`: saved on down, loaded on up).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from s3ingest import outputs as output

# the run directory's names, here too for the callers of this module
from s3ingest.local.stack.run_directory import RUN_DIR, RUN_DIR_ENV, run_dir  # noqa: F401

#: The run file in the run directory, and the daemon's log.
RUN_FILE = "local.json"
LOG_FILE = "local.log"
#: The functions' and processors' logs in the run directory, one ``<name>.log`` each.
LOGS_DIR = "logs"
#: The settings ``local up --state DIR --context`` deploys over a saved stack (another
#: processor configuration, as a ``cdk deploy`` of it): the rest is the saved state's.
REDEPLOYABLE = ("processors", "hold")
#: Where ``local down --state DIR`` asks the daemon to save its state: ``{"state": DIR}``.
SAVE_FILE = "save.json"
#: The local stack's name (its metrics' stack dimension).
STACK = "S3Ingest-local"
#: Seconds between two rounds of the event sources when nothing arrived.
IDLE_SECONDS = 0.2
#: What the daemon's command line holds (checked before a signal is sent to a pid).
_MODULE = "s3ingest.local.stack.daemon"

_LOG = logging.getLogger(__name__)


class LocalStackError(RuntimeError):
    """No local stack runs (no run file, or its process is gone), or it did not start
    (``usage``: for its settings, or processors that cannot be imported or installed)."""

    def __init__(self, message: str, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


#: The daemon's exit code when its settings or processors are refused (the CLI's usage error).
EXIT_REFUSED = 2


def read_context(pairs: Sequence[str], cdk_json: Path | None = None) -> dict[str, Any]:
    """The settings' context: ``cdk.json``'s ``context`` (of the current directory by default;
    none when absent), then each ``key=value`` of ``pairs`` over it (strings, as ``cdk -c``
    gives them).

    Raises
    ------
    ValueError
        For a pair without ``=``, or a ``cdk.json`` that is not JSON.
    """
    path = cdk_json or Path.cwd() / "cdk.json"
    context: dict[str, Any] = {}
    if path.is_file():
        try:
            context = dict(json.loads(path.read_text()).get("context") or {})
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not JSON ({exc})") from exc
    return {**context, **context_pairs(pairs)}


def context_pairs(pairs: Sequence[str]) -> dict[str, str]:
    """Each ``key=value`` of ``pairs`` (``--context``), as strings.

    Raises
    ------
    ValueError
        For a pair without ``=``.
    """
    context: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--context {pair!r}: give key=value")
        context[key.strip()] = value
    return context


def outputs(rt: Any) -> dict[str, str]:
    """The deployment's values under the deployed stack's output names
    (:meth:`s3ingest_cdk.pipeline.Pipeline.outputs`), for those the emulator has."""
    from s3ingest.local.machines import (
        BACKFILL_BATCH_OPERATIONS,
        BACKFILL_DISTRIBUTED_MAP,
        BACKFILL_LISTING,
        RECONCILE_FANOUT,
        REPROCESS,
    )
    from s3ingest_fn.effect_targets import hold_names, targets_json

    r = rt.resources
    events = rt.events
    out = {
        output.BUCKET_NAME: r.bucket,
        output.BUCKET_NAMES: ",".join(r.bucket_names),
        output.BUCKET_SCOPE: rt.scope.to_json(),
        output.QUEUE_URL: r.queue_url,
        output.DEAD_LETTER_QUEUE_URL: r.dlq_url,
        output.LEDGER_TABLE_NAME: r.table,
        output.ARCHIVE_NAME: r.archive,
        output.ARCHIVE_ARN: events.describe_archive(ArchiveName=r.archive)["ArchiveArn"],
        output.RULE_NAME: r.rule,
        output.RULE_ARN: events.describe_rule(Name=r.rule)["Arn"],
        output.INVENTORY_BUCKET_NAME: r.inventory_bucket,
        output.REPORT_BUCKET_NAME: r.inventory_bucket,
        **({output.ATTESTATION_BUCKET_NAME: r.attestation_bucket} if r.attestation_bucket else {}),
        output.LISTING_BACKFILL_STATE_MACHINE_ARN: rt.machines.machine(BACKFILL_LISTING),
        output.REPROCESS_STATE_MACHINE_ARN: rt.machines.machine(REPROCESS),
    }
    engine = rt.settings.backfill_engine
    out[output.BACKFILL_STATE_MACHINE_ARN] = rt.machines.machine(
        BACKFILL_DISTRIBUTED_MAP if engine == "distributed-map" else BACKFILL_BATCH_OPERATIONS
    )
    if rt.settings.reconcile_fan_out:
        out[output.RECONCILE_STATE_MACHINE_ARN] = rt.machines.machine(RECONCILE_FANOUT)
    if r.output_bucket:
        out[output.PROCESSOR_OUTPUT_BUCKET] = r.output_bucket
    if rt.service.effects is not None:
        out[output.PROCESSOR_NAMES] = ",".join(rt.service.effects.names)
        out[output.PROCESSOR_TARGETS] = targets_json(rt.settings.processor_entries())
    out[output.HOLD_PROCESSORS] = json.dumps(
        hold_names(rt.settings.processor_entries(), rt.settings.hold)
    )
    out[output.BUCKET_OWNERS] = json.dumps(r.owners)
    if r.read_roles:
        out[output.REMOTE_READ_ROLE_ARNS] = json.dumps(r.read_roles)
    out[output.LOG_KEYS] = rt.settings.log_keys
    if r.log_key_secret_arn:
        out[output.LOG_KEY_SECRET_ARN] = r.log_key_secret_arn
    if r.change_bus:
        out[output.CHANGE_BUS_NAME] = r.change_bus
        out[output.CHANGE_BUS_ARN] = events.describe_event_bus(Name=r.change_bus)["Arn"]
    if r.change_dlq_url:
        out[output.CHANGE_DEAD_LETTER_QUEUE_URL] = r.change_dlq_url
    return out


def processor_dependencies(package_dir: str, directory: str | Path | None = None) -> Path | None:
    """The processors' declared dependencies (``requirements.txt`` or ``requirements.lock`` in
    ``package_dir``, relative to the current directory), installed as the stack's bundle has
    them (:func:`s3ingest.packaging.install_processor_requirements`: the Lambda platform's
    wheels, constrained to the function lock) under the run directory's ``build/``, cached by
    the file's hash; None without such a file.

    The local runtime appends this directory to ``sys.path``, after the environment's own
    packages: a declared pure-Python package imports locally as deployed; one installed in the
    environment wins (a compiled wheel built for Lambda's arm64 CPython 3.13 does not import on
    another host: install it in the environment to run it locally).

    Raises
    ------
    s3ingest.packaging.BundlingError
        When pip cannot install them.
    """
    from s3ingest.packaging import install_processor_requirements, processor_requirements

    requirements = processor_requirements(package_dir, Path.cwd())
    if requirements is None:
        return None
    import s3ingest_fn

    # the function lock of a checkout (functions/), else none (an installed package's lock is
    # s3ingest_cdk's package data, of the [cdk] extra)
    lock = Path(s3ingest_fn.__file__).resolve().parents[1] / "requirements.lock"
    # imported by this interpreter, not the runtime's: no bytecode for the runtime's Python
    return install_processor_requirements(
        requirements,
        run_dir(directory) / "build",
        lock=lock if lock.is_file() else None,
        bytecode=False,
    )


def deploy(
    emu: Any,
    context: Mapping[str, Any],
    resources: Any = None,
    directory: str | Path | None = None,
    log_dir: Path | None = None,
) -> Any:
    """A :class:`~s3ingest.local.stack.runtime.LocalRuntime` on ``emu`` from ``context``'s settings
    (``buckets``, else ``bucketName`` and ``versioned``; ``processorPackageDir``, relative to
    the current directory, importable, with the dependencies declared there:
    :func:`processor_dependencies`, cached in ``directory``, the run directory), each landing
    bucket's writes by any client recorded (:func:`s3ingest.local.emulator.outside_writes.watch`);
    on ``resources`` already provisioned (a restored state) when given; its functions' logs in
    ``log_dir`` when given, else in memory.

    Raises
    ------
    s3ingest.settings.SettingsError
    s3ingest.packaging.BundlingError
        When the declared dependencies cannot be installed.
    """
    from s3ingest.local.emulator import outside_writes
    from s3ingest.local.stack.runtime import LocalRuntime
    from s3ingest.settings import Settings

    settings = Settings.from_context(context)
    if settings.processor_package_dir:  # the team's packages, as the stack bundles them
        sys.path.insert(0, str(Path(settings.processor_package_dir).resolve()))
        deps = processor_dependencies(settings.processor_package_dir, directory)
        if deps is not None and str(deps) not in sys.path:
            sys.path.append(str(deps))
    rt = LocalRuntime(
        emu,
        settings,
        bucket=settings.bucket_name,
        versioning="Enabled" if settings.versioned else None,
        buckets=list(settings.buckets) or None,
        resources=resources,
        log_dir=log_dir,
    )
    for faithful in rt.buckets.values():
        outside_writes.watch(faithful)
    return rt


def describe(rt: Any, pid: int) -> dict[str, Any]:
    """The run file's content for deployment ``rt`` served by process ``pid``."""
    from s3ingest.local.emulator.server import REGION

    return {
        "pid": pid,
        "endpoint": rt.emu.endpoint_url,
        "region": REGION,
        "credentials": {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"},
        "stack": STACK,
        "buckets": list(rt.resources.bucket_names),
        "outputs": outputs(rt),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def pump(rt: Any) -> int:
    """One round of the event sources: publish the recorded S3 events, drain the ingest
    queue through the ingest handler, pump the change stream; returns the events published.
    Then each bucket's EventBridge delivery is read again (a client may have changed it)."""
    sent = int(rt.flush())
    rt.drain(timeout_seconds=120.0)
    rt.delivered.clear()  # reports' memory: nothing reads it here
    for faithful in rt.buckets.values():
        faithful.log.clear()
        faithful.refresh_notification()
        _ = faithful.event_bridge  # read here, not inside a client's write
    return sent


def serve(
    context: Mapping[str, Any],
    directory: Path,
    stop: threading.Event,
    state: Path | None = None,
    redeploy: Mapping[str, Any] | None = None,
    port: int | None = None,
) -> None:
    """The background process's work: on the emulator at ``port`` (else a free one), its
    functions' logs emptied and then written to :data:`LOGS_DIR`, deploy (from the state saved
    in ``state``, when it
    holds one: :mod:`s3ingest.local.stack.saved_state`; then ``redeploy``'s processor settings,
    :data:`REDEPLOYABLE`, over it, as a ``cdk deploy`` of them), write the run file, run
    :func:`pump` until ``stop`` is set, save the state (to ``state``, or the folder ``local
    down --state`` asked for), then remove the run file and stop the emulator.

    Raises
    ------
    ValueError
        ``redeploy`` names another setting, or its processors do not validate or import;
        ``port`` is taken (:class:`~s3ingest.local.emulator.server.PortInUseError`).
    """
    from s3ingest.local.emulator.server import Emulator
    from s3ingest.local.stack import saved_state

    saved = saved_state.load(state) if state is not None else None
    context = dict(saved["context"]) if saved else dict(context)
    logs = directory / LOGS_DIR
    for old in logs.glob("*.log"):  # a new stack's logs start empty
        old.unlink()
    with Emulator(port) as emu:
        resources = saved_state.restore(saved, emu.endpoint_url) if saved else None
        rt = deploy(emu, context, resources, directory, log_dir=logs)
        if saved and redeploy:
            context = redeployed(rt, context, redeploy)
        info = {**describe(rt, os.getpid()), "state": str(state) if state else None}
        info["restored"] = saved is not None
        path = directory / RUN_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(info, indent=2))
        tmp.replace(path)
        _LOG.info("local stack up: %s", info["endpoint"])
        try:
            while not stop.is_set():
                try:
                    if pump(rt) == 0:
                        stop.wait(IDLE_SECONDS)
                except Exception:  # one bad round must not end the stack: log it, go on
                    _LOG.error("event sources: %s", traceback.format_exc())
                    stop.wait(1.0)
        finally:
            target = _read(directory / SAVE_FILE).get("state") or state
            (directory / SAVE_FILE).unlink(missing_ok=True)
            if target is not None:
                saved_to = saved_state.save(Path(target), context, rt.resources, emu.endpoint_url)
                _LOG.info("state saved to %s", saved_to)
            if _read(path).get("pid") == os.getpid():
                path.unlink(missing_ok=True)
            rt.close()


def redeployed(rt: Any, context: Mapping[str, Any], redeploy: Mapping[str, Any]) -> dict[str, Any]:
    """Deploy ``redeploy``'s ``processors`` and ``hold`` (``--context`` strings or values) over
    the running stack ``rt`` deployed from ``context``
    (:meth:`~s3ingest.local.stack.runtime.LocalRuntime.configure`); returns the context saved from
    now on.

    Raises
    ------
    ValueError
        Another setting, or settings that do not validate, or a processor that cannot be
        imported.
    """
    from s3ingest.settings import Settings

    other = sorted(set(redeploy) - set(REDEPLOYABLE))
    if other:
        raise ValueError(
            f"{', '.join(other)}: only {' and '.join(REDEPLOYABLE)} change over a saved state"
        )
    merged = {**context, **redeploy}
    if "processors" in redeploy:  # the single processor gives way to the list
        merged.pop("processor", None)
        merged.pop("processorVersion", None)
    settings = Settings.from_context(merged)
    rt.configure([dict(p) for p in settings.processors], settings.hold)
    _LOG.info("deployed over the saved state: %s", ", ".join(sorted(redeploy)))
    return merged


def _read(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running local stack daemon (its command line names this module)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True  # no /proc (macOS): a live pid is taken as ours
    return _MODULE.encode() in cmdline


def running(directory: Path) -> dict[str, Any]:
    """The run file of the local stack running from ``directory``.

    Raises
    ------
    LocalStackError
        No run file, or its process is not running.
    """
    info = _read(directory / RUN_FILE)
    if not info or not alive(int(info.get("pid", 0))):
        raise LocalStackError("no local stack: run s3ingest local up")
    return info


def endpoint_answers(endpoint: str, timeout: float = 2.0) -> bool:
    """Whether the emulator at ``endpoint`` answers an HTTP request (moto's own API)."""
    from urllib.error import HTTPError
    from urllib.request import urlopen

    try:
        with urlopen(f"{endpoint}/moto-api/", timeout=timeout):
            return True
    except HTTPError:
        return True  # an HTTP answer, whatever its status
    except OSError:
        return False


def probe(directory: Path) -> dict[str, Any]:
    """``{"running": bool, "pid", "endpoint", "answers": bool, ...the run file}``; not
    running: ``{"running": False, "reason"}``."""
    try:
        info = running(directory)
    except LocalStackError as exc:
        return {"running": False, "reason": str(exc)}
    return {"running": True, "answers": endpoint_answers(info["endpoint"]), **info}


def start(
    context: Mapping[str, Any],
    directory: Path,
    timeout_seconds: float = 180.0,
    state: Path | None = None,
    redeploy: Mapping[str, Any] | None = None,
    port: int | None = None,
) -> dict[str, Any]:
    """Start the daemon for ``context`` in ``directory`` (created), loading and saving its
    state in ``state`` when given (``redeploy``: processor settings deployed over a saved
    state, :func:`redeployed`), its emulator on ``port`` when given, and wait until its run
    file names it; returns the run file.

    Raises
    ------
    LocalStackError
        A local stack already runs there, or the daemon ended or did not deploy within
        ``timeout_seconds`` (its log's tail in the message).
    """
    directory.mkdir(parents=True, exist_ok=True)
    try:
        info = running(directory)
    except LocalStackError:
        pass
    else:
        raise LocalStackError(
            f"a local stack already runs (pid {info['pid']}, {info['endpoint']}): "
            "s3ingest local down first"
        )
    (directory / RUN_FILE).unlink(missing_ok=True)
    log_path = directory / LOG_FILE
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", _MODULE, "--dir", str(directory), "--context", "-"]
            + (["--state", str(state.resolve())] if state is not None else [])
            + (["--redeploy", json.dumps(dict(redeploy))] if redeploy else [])
            + (["--port", str(port)] if port is not None else []),
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # survives the CLI's terminal
        )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(dict(context)).encode())
    proc.stdin.close()
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        info = _read(directory / RUN_FILE)
        if info.get("pid") == proc.pid:
            return info
        if proc.poll() is not None:
            if proc.returncode == EXIT_REFUSED:  # its last line says why
                raise LocalStackError(_tail(log_path, 1).removeprefix("error: "), usage=True)
            raise LocalStackError(f"the local stack did not start:\n{_tail(log_path)}")
        time.sleep(0.1)
    _signal(proc.pid)
    raise LocalStackError(f"the local stack did not start in {timeout_seconds:.0f} s")


def stop(
    directory: Path, timeout_seconds: float = 60.0, state: Path | None = None
) -> dict[str, Any]:
    """Stop the local stack running from ``directory`` (SIGTERM to its pid, then SIGKILL after
    ``timeout_seconds``), saving its state to ``state`` when given (else to its ``local up
    --state``, if any); returns ``{"stopped": pid, "state": folder or None}``.

    Raises
    ------
    LocalStackError
        When none runs there.
    """
    info = running(directory)
    pid = int(info["pid"])
    if state is not None:
        (directory / SAVE_FILE).write_text(json.dumps({"state": str(state.resolve())}))
    _signal(pid)
    deadline = time.monotonic() + timeout_seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(pid):
        _signal(pid, signal.SIGKILL)
    (directory / RUN_FILE).unlink(missing_ok=True)
    saved = str(state.resolve()) if state is not None else info.get("state")
    return {"stopped": pid, "state": saved}


def _signal(pid: int, sig: int = signal.SIGTERM) -> None:
    if alive(pid):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def main(argv: Sequence[str] | None = None) -> None:
    """The daemon's entry point: ``--dir DIR --context -`` (the context as JSON on stdin),
    ``--state DIR``, ``--redeploy JSON``, ``--port N`` (:func:`serve`)."""
    parser = argparse.ArgumentParser(prog=f"python -m {_MODULE}")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--context", default="-")
    parser.add_argument("--state")
    parser.add_argument("--redeploy")
    parser.add_argument("--port", type=int)
    args = parser.parse_args(argv)
    context = json.loads(sys.stdin.read() if args.context == "-" else args.context)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    stop_event = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop_event.set())
    signal.signal(signal.SIGINT, lambda *_: stop_event.set())
    from s3ingest.local.stack.saved_state import StateError
    from s3ingest.packaging import BundlingError
    from s3ingest.settings import SettingsError

    try:
        serve(
            context,
            Path(args.dir),
            stop_event,
            Path(args.state) if args.state else None,
            json.loads(args.redeploy) if args.redeploy else None,
            args.port,
        )
    except (ValueError, SettingsError, BundlingError, StateError) as exc:
        message = " ".join(str(exc).split())
        if "No module named" in message:
            message += (
                "; if it is a third-party package, declare it in a requirements.txt in "
                "processorPackageDir (docs/processors.md)"
            )
        print(f"error: {message}", file=sys.stderr, flush=True)
        sys.exit(EXIT_REFUSED)


if __name__ == "__main__":
    main()
