"""The processors: ``processors`` entries (normalised and checked, :func:`processor_entry`),
``processorPolicyStatements`` entries, ``hold`` documents, the size of the variables that carry
them to the functions, and the processor rules of a whole :class:`~s3ingest.settings.Settings`
(:func:`processor_settings_problems`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from s3ingest.settings.buckets import BucketSpec
from s3ingest.settings.context import to_int
from s3ingest_fn.core.hold import hold_errors

#: ``"package.module:function"``: dotted Python identifiers, a colon, an identifier.
PROCESSOR_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
#: A processor's delivery modes and the change kinds it may filter on (the same values as
#: :mod:`s3ingest_fn.core.effects`' ``MODES`` and ``KINDS``; a test keeps them equal).
PROCESSOR_MODES = ("latest", "every-change")
PROCESSOR_KINDS = ("created", "removed")
#: The name the single ``processor`` setting runs under (``DEFAULT_PROCESSOR``).
DEFAULT_PROCESSOR_NAME = "default"
#: The most the ``PROCESSORS`` variable may take, bytes: Lambda allows 4 KB for all of a
#: function's environment variables
#: (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html), and the others
#: (``SCOPE``, ``INVENTORIES``, names and URLs) need the rest.
MAX_PROCESSORS_ENV_BYTES = 2560
#: What a deployed ``handler`` entry's ``functionArn`` takes in ``PROCESSORS`` at most, bytes
#: (an ARN with a 64-character function name): the estimate of :func:`processors_env_size`.
_DEPLOYED_ARN_BYTES = 140


def processors_env_size(
    entries: Sequence[Mapping[str, Any]], hold: Mapping[str, Any] | None = None
) -> int:
    """Bytes of the ``PROCESSORS`` variable of ``entries`` (compact JSON; each ``handler``
    counted as a deployed function's ARN, each entry's ``hold`` included) and of the ``HOLD``
    variable of the stack-wide ``hold`` (:meth:`Settings.hold_env`), when given."""
    size = 0
    if hold is not None:
        size += len(compact_json(hold).encode())
    for entry in entries:
        sized = {k: v for k, v in entry.items() if k != "handler"}
        size += len(json.dumps(sized, separators=(",", ":")).encode()) + 1
        if "handler" in entry:
            size += _DEPLOYED_ARN_BYTES
    return size + 1


def compact_json(value: Any) -> str:
    """``value`` as JSON without spaces (what the functions' variables hold)."""
    return json.dumps(value, separators=(",", ":"))


def parse_hold(raw: Any, key: str = "hold") -> tuple[Any, list[str]]:
    """A ``hold`` setting from its context value: an object, or a JSON object as
    ``-c 'hold={...}'`` gives it; ``None``/empty: none. Anything else is returned as it is, for
    :func:`~s3ingest_fn.core.hold.hold_errors` to judge."""
    if raw in (None, "", "null"):
        return None, []
    if isinstance(raw, str):
        try:
            return json.loads(raw), []
        except json.JSONDecodeError as exc:
            return None, [f"{key}: not JSON ({exc.msg})"]
    return raw, []


def hold_problems(doc: Any, where: str = "") -> list[str]:
    """The problems of a ``hold`` document (:func:`~s3ingest_fn.core.hold.hold_errors`), each
    named by ``where`` (``"processors[0]."``: ``processors[0].hold.deletes ...``)."""
    return [f"{where}{error}" for error in hold_errors(doc)]


#: A processor function's timeout when its entry gives none, seconds.
DEFAULT_PROCESSOR_TIMEOUT_SECONDS = 30
#: Lambda's longest function timeout, seconds
#: (https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html).
MAX_LAMBDA_TIMEOUT_SECONDS = 900
#: What a function that invokes processor functions needs beyond the longest of their timeouts,
#: seconds: the applying write (the claim), the commit, and the 3 s an effect needs left before it
#: starts (``MIN_EFFECT_MS``), with room for the other records of the batch.
PROCESSOR_TIMEOUT_MARGIN_SECONDS = 15
#: Fields of one ``processors`` entry (context form), with exactly one of
#: :data:`PROCESSOR_TARGET_FIELDS`.
PROCESSOR_FIELDS = (
    "name",
    "mode",
    "prefixes",
    "suffixes",
    "kinds",
    "timeoutSeconds",
    "functionArn",
    "handler",
    "module",
    "hold",
    "version",
)
#: A processor's version when its entry (or ``processorVersion``) gives none.
DEFAULT_PROCESSOR_VERSION = 1
#: How a processor runs: a Lambda function of the team (``functionArn``), a handler of this
#: repository's bundle the stack deploys as its own function (``handler``), or a module run
#: in-process by the ingest-side functions (``module``).
PROCESSOR_TARGET_FIELDS = ("functionArn", "handler", "module")
_PROCESSOR_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
# arn:<partition>:lambda:<region>:<account>:function:<name>[:<version or alias>]
# (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html#API_Invoke_RequestSyntax).
_FUNCTION_ARN_RE = re.compile(
    r"^arn:aws[a-z-]*:lambda:[a-z]{2}(-[a-z]+)+-\d+:\d{12}:function:[A-Za-z0-9_-]{1,64}"
    r"(:(\$LATEST|[A-Za-z0-9_-]{1,128}))?$"
)
#: Fields of one ``processorPolicyStatements`` entry (an IAM identity-policy statement).
STATEMENT_FIELDS = ("Sid", "Effect", "Action", "Resource", "Condition")
# service:Action, with IAM's * and ? wildcards, or * alone.
_ACTION_RE = re.compile(r"^(\*|[A-Za-z0-9-]+:[A-Za-z0-9*?]+)$")


def is_service_wildcard(action: str) -> bool:
    """Whether ``action`` grants every action of a service (``s3:*``, ``s3:**``) or of all
    (``*``): its part after the colon is wildcards only."""
    name = action.split(":", 1)[-1]
    return bool(name) and set(name) <= {"*", "?"} and (":" in action or name == "*")


def wildcard_grant_problem(
    effect: Any, actions: Sequence[Any], resources: Sequence[Any], where: str
) -> str | None:
    """The problem of an Allow that grants whole services on every resource, or None.

    ``*`` or ``service:*`` actions with resource ``*`` are refused: ``dynamodb:*`` on ``*``
    writes the ledger around its rules (the very thing the stack's queue policy keeps out),
    ``iam:*`` on ``*`` is the account, ``s3:*`` on ``*`` deletes the landing bucket. Partial
    wildcards (``s3:Get*``) or one of the two alone pass here; cdk-nag AwsSolutions-IAM5 then
    reports the wildcard, acknowledged by s3ingest only for a resource wildcard with explicit
    actions.
    """
    if effect != "Allow" or "*" not in resources:
        return None
    broad = [a for a in actions if isinstance(a, str) and is_service_wildcard(a)]
    if not broad:
        return None
    return (
        f"{where}: Action {', '.join(map(repr, broad))} with Resource '*' grants whole services "
        "on every resource to the roles that run the processors (the ingest, backfill and "
        "listing shard roles): name the actions the processor calls, and the ARNs it calls "
        "them on"
    )


def version_problem(raw: Any, where: str) -> tuple[int, str | None]:
    """A processor's ``version`` (``raw``; None: the default) as an int >= 1, and the problem
    of a value that is not one (a bool, a float, 0, a negative, a non-integer string), named by
    ``where`` (``"processors[0].version"``, ``"processorVersion"``); the default then."""
    if raw is None:
        return DEFAULT_PROCESSOR_VERSION, None
    version = None if isinstance(raw, float) else to_int(raw)
    if version is None or version < 1:
        return DEFAULT_PROCESSOR_VERSION, f"{where}: {raw!r} is not a whole number of at least 1"
    return version, None


def is_function_processor(entry: Mapping[str, Any]) -> bool:
    """Whether a ``processors`` entry is a processor function (``functionArn`` or ``handler``),
    invoked with a timeout, rather than an in-process ``module``."""
    return "functionArn" in entry or "handler" in entry


def _entry_filters(raw: Mapping[str, Any], where: str, problems: list[str]) -> dict[str, list[str]]:
    """An entry's ``prefixes`` and ``suffixes`` (empty when invalid), its problems appended."""
    filters: dict[str, list[str]] = {}
    for key in ("prefixes", "suffixes"):
        values = raw.get(key) or []
        if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
            problems.append(f"{where}.{key}: expected a list of non-empty strings")
            values = []
        elif len(set(values)) != len(values):
            problems.append(f"{where}.{key}: listed twice")
        elif any(len(v.encode()) > 1024 for v in values):
            problems.append(f"{where}.{key}: longer than a key can be (1024 bytes)")
        filters[key] = list(values)
    return filters


def _entry_kinds(raw: Mapping[str, Any], where: str, problems: list[str]) -> list[str]:
    """An entry's ``kinds`` (both when invalid), its problem appended."""
    kinds = raw.get("kinds", list(PROCESSOR_KINDS))
    if (
        not isinstance(kinds, list)
        or not kinds
        or not all(k in PROCESSOR_KINDS for k in kinds)
        or len(set(kinds)) != len(kinds)
    ):
        problems.append(
            f"{where}.kinds: {kinds!r} is not a non-empty list of {', '.join(PROCESSOR_KINDS)} "
            "(each once)"
        )
        kinds = list(PROCESSOR_KINDS)
    return list(kinds)


def _target_problems(key: str, value: Any, where: str) -> list[str]:
    """The form of an entry's ``functionArn``, ``handler`` or ``module``."""
    if key == "functionArn":
        if not isinstance(value, str) or not _FUNCTION_ARN_RE.match(value):
            return [
                f"{where}.functionArn: {value!r} is not a Lambda function ARN "
                "(arn:<partition>:lambda:<region>:<account>:function:<name>[:<qualifier>])"
            ]
    elif not isinstance(value, str) or not PROCESSOR_RE.match(value):
        return [f"{where}.{key}: {value!r} is not 'package.module:function'"]
    return []


def processor_entry(raw: Any, where: str) -> tuple[dict[str, Any] | None, list[str]]:
    """One ``processors`` entry, normalised, and every rule it breaks.

    Normalised: ``{"name", "mode", "prefixes", "suffixes", "kinds"}``, then ``"timeoutSeconds"``
    for a processor function, then the one of ``functionArn``, ``handler`` or ``module`` it has,
    then its ``"hold"`` policy when it has one (:mod:`s3ingest_fn.core.hold`; without one the
    stack-wide ``hold`` setting applies to it), then its ``"version"`` (an int) when above 1;
    defaults filled in (``mode`` ``latest``, no key filters, both kinds, a 30 s timeout; the
    default version 1 is left out, so an entry without one keeps its ``PROCESSORS`` bytes). A
    normalised entry normalises to itself.

    Parameters
    ----------
    raw : Any
        The entry as given (context JSON, or a dict).
    where : str
        Names it in the problems (``"processors[0]"``).

    Returns
    -------
    tuple
        ``(entry, problems)``; ``entry`` is None when ``raw`` is not an object.
    """
    if not isinstance(raw, Mapping):
        return None, [f"{where}: expected an object, got {raw!r}"]
    problems = [
        f"{where}.{k}: unknown field (known: {', '.join(PROCESSOR_FIELDS)})"
        for k in raw
        if k not in PROCESSOR_FIELDS
    ]
    name = raw.get("name")
    if not isinstance(name, str) or not _PROCESSOR_NAME_RE.match(name):
        problems.append(
            f"{where}.name: {name!r} must be lower-case letters, digits and '-', starting with "
            "a letter, at most 32 (^[a-z][a-z0-9-]{0,31}$)"
        )
    mode = raw.get("mode", PROCESSOR_MODES[0])
    if mode not in PROCESSOR_MODES:
        problems.append(f"{where}.mode: {mode!r} is not one of {', '.join(PROCESSOR_MODES)}")
    filters = _entry_filters(raw, where, problems)
    kinds = _entry_kinds(raw, where, problems)
    given = [k for k in PROCESSOR_TARGET_FIELDS if raw.get(k) not in (None, "")]
    if len(given) != 1:
        problems.append(
            f"{where}: give exactly one of {', '.join(PROCESSOR_TARGET_FIELDS)}"
            + (f" (got {', '.join(given)})" if given else "")
        )
    entry: dict[str, Any] = {
        "name": name,
        "mode": mode,
        "prefixes": filters["prefixes"],
        "suffixes": filters["suffixes"],
        "kinds": kinds,
    }
    function = any(k in given for k in ("functionArn", "handler"))
    timeout = raw.get("timeoutSeconds")
    if timeout is not None and not function:
        problems.append(
            f"{where}.timeoutSeconds: only a processor function (functionArn or handler) has a "
            "timeout; a module runs within the ingest-side functions' own"
        )
    if function:
        seconds = DEFAULT_PROCESSOR_TIMEOUT_SECONDS if timeout is None else to_int(timeout)
        if seconds is None or not 1 <= seconds <= MAX_LAMBDA_TIMEOUT_SECONDS:
            problems.append(
                f"{where}.timeoutSeconds: {timeout!r} is not a whole number in "
                f"1..{MAX_LAMBDA_TIMEOUT_SECONDS} (Lambda's timeout range)"
            )
        entry["timeoutSeconds"] = seconds if seconds is not None else timeout
    for key in given:
        entry[key] = raw[key]
        problems.extend(_target_problems(key, raw[key], where))
    hold, found = parse_hold(raw.get("hold"), f"{where}.hold")
    problems.extend(found)
    if hold is not None:
        entry["hold"] = hold
        problems.extend(hold_problems(hold, f"{where}."))
    version, problem = version_problem(raw.get("version"), f"{where}.version")
    if problem is not None:
        problems.append(problem)
    elif version != DEFAULT_PROCESSOR_VERSION:
        entry["version"] = version
    return entry, problems


def statement_problems(raw: Any, where: str) -> list[str]:
    """Every rule one ``processorPolicyStatements`` entry breaks: an IAM identity-policy
    statement ``{"Effect": "Allow" | "Deny", "Action": ..., "Resource": ...}`` with an optional
    ``Sid`` and ``Condition`` (https://docs.aws.amazon.com/IAM/latest/UserGuide/
    reference_policies_elements.html); ``Action`` and ``Resource`` a string or a non-empty list."""
    if not isinstance(raw, Mapping):
        return [f"{where}: expected an object, got {raw!r}"]
    problems = [
        f"{where}.{k}: unknown field (known: {', '.join(STATEMENT_FIELDS)})"
        for k in raw
        if k not in STATEMENT_FIELDS
    ]
    if raw.get("Effect") not in ("Allow", "Deny"):
        problems.append(f"{where}.Effect: {raw.get('Effect')!r} is not Allow or Deny")
    for key, valid, what in (
        ("Action", _ACTION_RE.match, "'service:Action' (wildcards * and ? allowed) or '*'"),
        ("Resource", lambda v: v == "*" or v.startswith("arn:"), "an ARN ('arn:...') or '*'"),
    ):
        value = raw.get(key)
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not values:
            problems.append(f"{where}.{key}: expected a string or a non-empty list of strings")
            continue
        bad = [v for v in values if not isinstance(v, str) or not valid(v)]
        if bad:
            problems.append(f"{where}.{key}: {', '.join(map(repr, bad))}: each must be {what}")
    actions, resources = (
        [raw.get(key)] if isinstance(raw.get(key), str) else raw.get(key)
        for key in ("Action", "Resource")
    )
    if isinstance(actions, list) and isinstance(resources, list):
        wildcard = wildcard_grant_problem(raw.get("Effect"), actions, resources, where)
        if wildcard is not None:
            problems.append(wildcard)
    condition = raw.get("Condition")
    if condition is not None and not (
        isinstance(condition, Mapping) and all(isinstance(v, Mapping) for v in condition.values())
    ):
        problems.append(
            f"{where}.Condition: expected {{operator: {{key: value}}}} (an IAM condition block)"
        )
    return problems


def normalised_entry(raw: Any) -> Any:
    """``raw`` normalised (:func:`processor_entry`) when it is a valid entry, else as given."""
    entry, problems = processor_entry(raw, "")
    return entry if entry is not None and not problems else raw


class ProcessorSettings(Protocol):
    """What :func:`processor_settings_problems` reads of a :class:`~s3ingest.settings.Settings`
    (so this module needs not import the model)."""

    @property
    def processor(self) -> str | None: ...
    @property
    def processors(self) -> tuple[dict[str, Any], ...]: ...
    @property
    def hold(self) -> dict[str, Any] | None: ...
    @property
    def function_timeout_seconds(self) -> int: ...
    @property
    def backfill_function_timeout_seconds(self) -> int: ...
    @property
    def processor_package_dir(self) -> str | None: ...
    @property
    def processor_policy_statements(self) -> tuple[dict[str, Any], ...]: ...
    @property
    def allow_module_processors_with_remote_buckets(self) -> bool: ...
    @property
    def processors_variable(self) -> bool: ...
    @property
    def bucket_specs(self) -> tuple[BucketSpec, ...]: ...
    def processor_entries(self) -> list[dict[str, Any]]: ...
    def ingest_side_timeout(self, seconds: int) -> int: ...


def _entries_problems(processors: Sequence[Any]) -> list[str]:
    """Every ``processors`` entry's problems, the timeouts too long to invoke and the names
    given twice."""
    p: list[str] = []
    names: list[str] = []
    for index, raw in enumerate(processors):
        where = f"processors[{index}]"
        entry, found = processor_entry(raw, where)
        p.extend(found)
        if entry is None:
            continue
        if isinstance(entry["name"], str):
            names.append(entry["name"])
        timeout = entry.get("timeoutSeconds")
        if (
            is_function_processor(entry)
            and isinstance(timeout, int)
            and 1 <= timeout <= MAX_LAMBDA_TIMEOUT_SECONDS
            and timeout + PROCESSOR_TIMEOUT_MARGIN_SECONDS > MAX_LAMBDA_TIMEOUT_SECONDS
        ):
            p.append(
                f"{where}.timeoutSeconds: {timeout} + {PROCESSOR_TIMEOUT_MARGIN_SECONDS} s "
                "for the functions that invoke it passes Lambda's "
                f"{MAX_LAMBDA_TIMEOUT_SECONDS} s limit (at most "
                f"{MAX_LAMBDA_TIMEOUT_SECONDS - PROCESSOR_TIMEOUT_MARGIN_SECONDS})"
            )
    for name in sorted({n for n in names if names.count(n) > 1}):
        p.append(f"processors: {name!r} is named twice")
    return p


def _remote_module_problems(settings: ProcessorSettings) -> list[str]:
    """An in-process processor beside buckets of other accounts, unless accepted."""
    p: list[str] = []
    remote = [i for i, spec in enumerate(settings.bucket_specs) if spec.remote]
    if remote and not settings.allow_module_processors_with_remote_buckets:
        runners = ["processor"] if settings.processor is not None else []
        runners += [
            f"processors[{i}].module"
            for i, raw in enumerate(settings.processors)
            if isinstance(raw, Mapping) and "module" in raw
        ]
        for where in runners:
            p.append(
                f"{where}: an in-process processor runs inside the pipeline's functions with "
                "their privileges, the read roles of the buckets of other accounts ("
                + ", ".join(f"buckets[{i}]" for i in remote)
                + ") included: deploy it as a handler or functionArn processor (a role of its "
                "own), or set allowModuleProcessorsWithRemoteBuckets to true to accept that "
                "(docs/processors.md)"
            )
    return p


def processor_settings_problems(settings: ProcessorSettings) -> list[str]:
    """The rules of ``processor``, ``processors``, ``processorPackageDir`` and
    ``processorPolicyStatements``, and the timeouts they need."""
    p: list[str] = []
    if settings.processor is not None and settings.processors:
        p.append(
            "processor and processors are both set: list the processor in processors as "
            f'{{"name": "{DEFAULT_PROCESSOR_NAME}", "module": "{settings.processor}"}}'
        )
    p.extend(_entries_problems(settings.processors))
    entries = settings.processor_entries()
    hold = settings.hold if isinstance(settings.hold, Mapping) else None
    # PROCESSORS carries the processors setting, or the single processor at a version above 1
    carried = settings.processors_variable
    size = processors_env_size(entries if carried else [], hold)
    if (carried or hold is not None) and size > MAX_PROCESSORS_ENV_BYTES:
        what = " and ".join(
            name for name, used in (("PROCESSORS", carried), ("HOLD", hold is not None)) if used
        )
        what += " environment variables" if " and " in what else " environment variable"
        p.append(
            f"{'processors' if settings.processors else 'hold'}: the {what} would take about "
            f"{size} bytes, more than {MAX_PROCESSORS_ENV_BYTES} (Lambda allows 4 KB for "
            "all of a function's variables): fewer entries or shorter key filters"
        )
    in_process = [e for e in entries if "module" in e]
    if settings.processor is not None or in_process:
        for name, timeout in (
            ("functionTimeoutSeconds", settings.function_timeout_seconds),
            ("backfillFunctionTimeoutSeconds", settings.backfill_function_timeout_seconds),
        ):
            if settings.ingest_side_timeout(timeout) < 10:
                p.append(
                    f"{name}: at least 10 with a processor (an effect is started only "
                    "with 3 s or more left in the invocation)"
                )
    bundled = [e for e in entries if "module" in e or "handler" in e]
    if settings.processor_package_dir is not None and not bundled:
        p.append(
            "processorPackageDir is set but processor is not"
            + (" (nor a module or handler in processors)" if settings.processors else "")
        )
    for index, statement in enumerate(settings.processor_policy_statements):
        p.extend(statement_problems(statement, f"processorPolicyStatements[{index}]"))
    p.extend(_remote_module_problems(settings))
    if settings.processor_policy_statements and not in_process:
        p.append(
            "processorPolicyStatements is set but no in-process processor runs (processor, "
            "or a module in processors): a processor function has its own role"
        )
    return p
