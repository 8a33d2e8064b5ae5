"""Every patch the local runtime applies to moto, in one list, installed from one place.

The emulator (:class:`s3ingest.local.emulator.server.Emulator`) calls :func:`install` when it is
created; nothing else patches moto, and importing this module imports no moto. Each
:class:`Patch` names the attributes it replaces or relies on (:class:`Target`), why it exists,
and the moto versions it was written against (:data:`TESTED`: read against moto 5.2.5's source,
the locked version). Outside those versions:

* a **correctness** patch (without it the emulator answers differently from AWS, or the local
  runtime cannot run) refuses: :func:`install` raises :class:`MotoPatchError` naming the patch,
  its versions and the installed one, before applying anything;
* a **speed** patch (moto answers the same without it, only slower) is skipped, with a warning
  on this module's logger.

A target that is missing or has another shape (a method with other parameters, a property that
became a method) counts as outside the versions. The patch bodies live with the code they serve
(:mod:`~s3ingest.local.emulator.fast_moto`, :mod:`~s3ingest.local.emulator.server`,
:mod:`~s3ingest.local.emulator.lambda_service`, ...) and are named here as ``module:function``; each
is idempotent, so :func:`install` may run for every emulator. ``tests/unit/test_moto_patches.py``
checks every target against the installed moto. Upgrading moto: read each target's new source,
then widen :data:`TESTED` (and the ``local`` extra's pin in ``pyproject.toml``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

_LOG = logging.getLogger(__name__)

#: The moto versions every patch was written against: at least the first, below the second.
#: Keep in step with the ``local`` extra in ``pyproject.toml``.
TESTED = ("5.2.5", "5.3")

Kind = Literal["correctness", "speed"]
#: What a target must be: ``callable`` (a function, method or class), ``property`` (read on
#: the class), ``mapping`` (a dict the patch adds to), ``object`` (anything with ``members``).
Shape = Literal["callable", "property", "mapping", "object"]


class MotoPatchError(RuntimeError):
    """The installed moto is outside a correctness patch's versions (or lacks its targets)."""


@dataclass(frozen=True)
class Target:
    """An attribute of moto (or of a library moto calls) that a patch replaces or relies on.

    ``attribute`` is dotted inside ``module`` (``"S3Backend.list_object_versions"``);
    ``params``, when given, are the parameter names the replacement takes, in order (``self``
    included for a method read on its class); ``members`` are attributes the value must have.
    """

    module: str
    attribute: str
    shape: Shape = "callable"
    params: tuple[str, ...] | None = None
    members: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.module}:{self.attribute}"

    def problem(self) -> str | None:
        """Why the installed modules do not have this target as the patch expects, or ``None``."""
        try:
            value: Any = importlib.import_module(self.module)
        except ImportError as error:
            return f"{self}: module not importable ({error})"
        for part in self.attribute.split("."):
            if not hasattr(value, part):
                return f"{self}: missing"
            value = getattr(value, part)  # a property read on its class is the property
        if self.shape == "callable" and not callable(value):
            return f"{self}: not callable"
        if self.shape == "property" and not isinstance(value, property):
            return f"{self}: not a property"
        if self.shape == "mapping" and not isinstance(value, Mapping):
            return f"{self}: not a mapping"
        missing = [m for m in self.members if not hasattr(value, m)]
        if missing:
            return f"{self}: lacks {', '.join(missing)}"
        if self.params is not None:
            try:
                params = tuple(inspect.signature(value).parameters)
            except (TypeError, ValueError) as error:
                return f"{self}: no signature ({error})"
            if params != self.params:
                return f"{self}: takes {params}, the patch expects {self.params}"
        return None


@dataclass(frozen=True)
class Patch:
    """One patch: ``apply`` (``"module:function"``, idempotent) changes ``targets``."""

    name: str
    kind: Kind
    why: str
    apply: str
    targets: tuple[Target, ...]
    moto: tuple[str, str] = TESTED

    @property
    def versions(self) -> str:
        """The versions it was written against, as a pip specifier (``>=5.2.5,<5.3``)."""
        return f">={self.moto[0]},<{self.moto[1]}"

    def admits(self, version: str) -> bool:
        """Whether moto ``version`` is within :attr:`moto`."""
        return _release(self.moto[0]) <= _release(version) < _release(self.moto[1])

    def function(self) -> Callable[[], None]:
        """The function ``apply`` names."""
        module, _, name = self.apply.partition(":")
        fn: Callable[[], None] = getattr(importlib.import_module(module), name)
        return fn

    def problems(self) -> list[str]:
        """Targets missing or shaped otherwise in the installed modules, and an ``apply`` that
        names no function."""
        found = [p for p in (t.problem() for t in self.targets) if p]
        try:
            if not callable(self.function()):
                found.append(f"{self.apply}: not callable")
        except (ImportError, AttributeError) as error:
            found.append(f"{self.apply}: {error}")
        return found


def _release(version: str) -> tuple[int, ...]:
    """The release numbers of a version string (``"5.2.5.dev3"`` -> ``(5, 2, 5)``)."""
    match = re.match(r"\d+(?:\.\d+)*", version)
    if match is None:
        raise ValueError(f"not a version: {version!r}")
    return tuple(int(part) for part in match.group().split("."))


_DDB = "moto.dynamodb"
_S3 = "moto.s3"
_SFN = "moto.stepfunctions.parser.asl"
_SFN_SDK = f"{_SFN}.component.state.exec.state_task.service.state_task_service_aws_sdk"
_LOCAL = "s3ingest.local.emulator"

#: Every patch, in the order :func:`install` applies them.
PATCHES: tuple[Patch, ...] = (
    Patch(
        name="cloudwatch-end-time-keeps-its-second",
        kind="correctness",
        why="GetMetricData includes a datapoint of the EndTime's own second that is before it, "
        "as CloudWatch does (moto drops EndTime's fraction, so a metric put in the same second "
        "as the query was left out: s3ingest status right after a reconciliation)",
        apply=f"{_LOCAL}.metrics:keep_end_time_second",
        targets=(
            Target(
                "moto.cloudwatch.models",
                "CloudWatchBackend.get_metric_data",
                params=("self", "queries", "start_time", "end_time", "scan_by"),
            ),
        ),
    ),
    Patch(
        name="dynamodb-item-atomicity",
        kind="correctness",
        why="one lock around moto's item operations: a condition and its write are atomic per "
        "item, as in DynamoDB (CONTRACT C10); moto's threaded server has no lock",
        apply=f"{_LOCAL}.server:serialize_item_writes",
        targets=(
            *(
                Target(f"{_DDB}.models", f"DynamoDBBackend.{name}")
                for name in ("put_item", "update_item", "delete_item", "get_item")
            ),
            Target(f"{_DDB}.models", "DynamoDBBackend.transact_write_items"),
            *(
                Target(f"{_DDB}.responses", f"DynamoHandler.{name}", params=("self",))
                for name in ("put_item", "update_item", "delete_item", "get_item")
            ),
        ),
    ),
    Patch(
        name="s3-no-moto-eventbridge-events",
        kind="correctness",
        why="moto's own S3 EventBridge events are not S3's; FaithfulS3 sends those",
        apply=f"{_LOCAL}.server:silence_moto_event_bridge",
        targets=(Target(f"{_S3}.notifications", "_send_event_bridge_message"),),
    ),
    Patch(
        name="server-routes-keys-with-newlines",
        kind="correctness",
        why="a request for an object key holding a newline is routed (moto's URL rules match "
        "keys with '.', which stops at a newline: a bare 404 where S3 answers)",
        apply=f"{_LOCAL}.server:route_keys_with_newlines",
        targets=(
            Target(
                "moto.moto_server.utilities",
                "RegexConverter.__init__",
                params=("self", "url_map", "items"),
            ),
        ),
    ),
    Patch(
        name="s3-notification-reports-eventbridge",
        kind="correctness",
        why="GetBucketNotificationConfiguration answers EventBridgeConfiguration when it is on, "
        "as S3 does (moto leaves it out)",
        apply=f"{_LOCAL}.server:report_event_bridge_configuration",
        targets=(
            Target(f"{_S3}.responses", "S3Response.get_bucket_notification", params=("self",)),
            Target(f"{_S3}.responses", "S3Response.serialized"),
            Target(f"{_S3}.models", "S3Backend.get_bucket_notification_configuration"),
            Target("moto.core.responses", "ActionResult"),
        ),
    ),
    Patch(
        name="s3-delete-one-inventory-configuration",
        kind="correctness",
        why="DeleteBucketInventoryConfiguration deletes that configuration (moto deletes the "
        "bucket)",
        apply=f"{_LOCAL}.server:delete_one_inventory_configuration",
        targets=(
            Target(
                f"{_S3}.responses",
                "S3Response._bucket_response_delete",
                params=("self", "bucket_name", "querystring"),
            ),
        ),
    ),
    Patch(
        name="s3-list-object-versions-markers",
        kind="correctness",
        why="ListObjectVersions starts after a KeyMarker given alone, as S3 does, and copies "
        "only the page's versions",
        apply=f"{_LOCAL}.moto_s3_markers:install",
        targets=(
            Target(
                f"{_S3}.models",
                "S3Backend.list_object_versions",
                params=(
                    "self",
                    "bucket_name",
                    "delimiter",
                    "key_marker",
                    "max_keys",
                    "prefix",
                    "version_id_marker",
                ),
            ),
            Target(f"{_S3}.models", "S3Backend.get_bucket"),
            Target("moto.core.utils", "unix_time_millis"),
        ),
    ),
    Patch(
        name="s3-events-of-any-client",
        kind="correctness",
        why="a write to a watched landing bucket by any client of the emulator (the AWS CLI, "
        "boto3 against s3ingest local up) records the event S3 would send (FaithfulS3's); "
        "unwatched buckets are untouched",
        apply=f"{_LOCAL}.outside_writes:install",
        targets=(
            Target(f"{_S3}.models", "S3Backend.put_object"),
            Target(
                f"{_S3}.models",
                "S3Backend.delete_object",
                params=("self", "bucket_name", "key_name", "version_id", "bypass"),
            ),
            Target(f"{_S3}.models", "FakeKey", members=("size", "etag", "version_id")),
        ),
    ),
    Patch(
        name="request-counts",
        kind="correctness",
        why="counts every request per emulator (the requests onboarding and the bench report)",
        apply=f"{_LOCAL}.requests:install",
        targets=(
            Target(
                "moto.moto_server.werkzeug_app",
                "DomainDispatcherApplication.__call__",
                params=("self", "environ", "start_response"),
            ),
        ),
    ),
    Patch(
        name="s3control-batch-jobs",
        kind="correctness",
        why="S3 Batch Operations' CreateJob, DescribeJob, ListJobs and UpdateJobStatus on "
        "moto's S3 Control (moto has none)",
        apply=f"{_LOCAL}.s3control_jobs:install",
        targets=(
            Target("moto.s3control.urls", "url_paths", shape="mapping"),
            Target("moto.s3control.responses", "S3ControlResponse", members=("dispatch",)),
            Target("moto.s3control.responses", "S3ControlResponse._get_param"),
            Target("moto.core.responses", "ActionResult"),
            Target("moto.core.exceptions", "ServiceException"),
        ),
    ),
    Patch(
        name="lambda-invoke-local-functions",
        kind="correctness",
        why="Invoke of a function the local Lambda service registered runs its handler in "
        "this process; other functions keep moto's behaviour",
        apply=f"{_LOCAL}.lambda_service:route_moto_invoke",
        targets=(
            Target(
                "moto.awslambda.models",
                "LambdaBackend.invoke",
                params=(
                    "self",
                    "function_name",
                    "qualifier",
                    "body",
                    "headers",
                    "response_headers",
                ),
            ),
            Target("moto.core.exceptions", "JsonRESTError"),
        ),
    ),
    Patch(
        name="stepfunctions-sdk-endpoint",
        kind="correctness",
        why="the state machine interpreter's SDK clients reach a running emulator of this "
        "process (moto's go to localhost:5000)",
        apply=f"{_LOCAL}.stepfunctions:route_sdk_clients",
        targets=(
            Target(
                f"{_SFN}.utils.boto_client",
                "boto_client_for",
                params=("region", "service", "state_credentials"),
            ),
            Target(f"{_SFN}.utils.boto_client", "moto_server_port"),
            Target(f"{_SFN}.component.common.timeouts.timeout", "TimeoutSeconds"),
            Target("moto.core.models", "botocore_stubber", shape="object", members=("enabled",)),
        ),
    ),
    Patch(
        name="stepfunctions-s3control-error-names",
        kind="correctness",
        why="aws-sdk:s3control errors are named S3Control.<Exception>, as Step Functions "
        "names them (the backfill machine's retriers match them)",
        apply=f"{_LOCAL}.stepfunctions:name_s3control_errors",
        targets=(Target(_SFN_SDK, "_SERVICE_ERROR_NAMES", shape="mapping"),),
    ),
    Patch(
        name="stepfunctions-map-run-tolerated-failures",
        kind="correctness",
        why="a Distributed Map whose failed child executions exceed its tolerated failures "
        "fails (States.ExceedToleratedFailureThreshold), as in Step Functions; moto's succeeds",
        apply=f"{_LOCAL}.stepfunctions:fail_map_runs_over_tolerance",
        targets=(
            Target(
                f"{_SFN}.component.state.exec.state_map.iteration.distributed_iteration_component",
                "DistributedIterationComponent._map_run",
                params=("self", "env", "eval_input"),
            ),
            Target(
                f"{_SFN}.component.state.exec.state_map.iteration.itemprocessor.map_run_record",
                "MapRunRecord",
            ),
            Target(f"{_SFN}.component.common.error_name.failure_event", "FailureEventException"),
            Target(
                f"{_SFN}.component.common.error_name.states_error_name_type",
                "StatesErrorNameType",
                shape="object",
                members=("StatesExceedToleratedFailureThreshold",),
            ),
        ),
    ),
    Patch(
        name="stepfunctions-time-scale",
        kind="speed",
        why="Wait states and retry intervals last TIME_SCALE of their time (moto sleeps them)",
        apply=f"{_LOCAL}.stepfunctions:scale_time",
        targets=(
            Target(
                f"{_SFN}.component.common.retry.retrier_decl",
                "time",
                shape="object",
                members=("sleep",),
            ),
            Target(
                f"{_SFN}.component.state.wait.wait_function.wait_function",
                "WaitFunction._wait_interval",
                params=("self", "env", "wait_seconds"),
            ),
        ),
    ),
    Patch(
        name="dynamodb-update-expression-memo",
        kind="speed",
        why="an update expression is parsed once per string",
        apply=f"{_LOCAL}.fast_moto:memoise_update_expressions",
        targets=(
            Target(
                f"{_DDB}.parsing.expressions",
                "UpdateExpressionParser.make",
                params=("expression_str",),
            ),
        ),
    ),
    Patch(
        name="dynamodb-validator-copy",
        kind="speed",
        why="the validator's deep copy of a memoised tree comes from its pickle",
        apply=f"{_LOCAL}.fast_moto:copy_trees_from_pickles",
        targets=(Target(f"{_DDB}.parsing.validators", "deepcopy"),),
    ),
    Patch(
        name="dynamodb-check-only-passes",
        kind="speed",
        why="a check-only validation pass runs once per accepted expression and inputs",
        apply=f"{_LOCAL}.fast_moto:remember_accepting_passes",
        targets=tuple(
            Target(f"{_DDB}.parsing.validators", f"{cls}.traverse", params=("self", "node"))
            for cls in (
                "ActionCountValidator",
                "OverlappingPathsValidator",
                "UpdateHashRangeKeyValidator",
            )
        ),
    ),
    Patch(
        name="dynamodb-condition-tokens-memo",
        kind="speed",
        why="a condition or filter expression is tokenised once per string",
        apply=f"{_LOCAL}.fast_moto:memoise_condition_tokens",
        targets=(
            Target(
                f"{_DDB}.comparisons",
                "ConditionExpressionParser._lex_condition_expression",
                params=("self",),
            ),
        ),
    ),
    Patch(
        name="sqs-queue-attributes-once",
        kind="speed",
        why="GetQueueAttributes and SendMessage walk the queue's messages once, not three "
        "times per requested name",
        apply=f"{_LOCAL}.fast_moto:count_queue_attributes_once",
        targets=(
            Target(
                "moto.sqs.models",
                "SQSBackend.get_queue_attributes",
                params=("self", "queue_name", "attribute_names"),
            ),
            Target("moto.sqs.models", "SQSBackend.get_queue"),
            Target("moto.sqs.models", "Queue.attributes", shape="property"),
            Target(
                "moto.sqs.models",
                "Queue",
                members=("BASE_ATTRIBUTES", "FIFO_ATTRIBUTES", "KMS_ATTRIBUTES"),
            ),
            Target("moto.sqs.models", "camelcase_to_underscores"),
            Target("moto.sqs.models", "unix_time_millis"),
            Target("moto.sqs.exceptions", "InvalidAttributeName"),
        ),
    ),
    Patch(
        name="s3-refuses-other-accounts-buckets",
        kind="correctness",
        why="a bucket of another account answers 403 unless read through that account's role, "
        "as S3 does for a caller its bucket policy does not admit (moto lets every account in)",
        apply=f"{_LOCAL}.moto_accounts:refuse_other_accounts_buckets",
        targets=(Target(f"{_S3}.models", "s3_allow_crossdomain_access", params=()),),
    ),
    Patch(
        name="sigv4-presigned-url-account",
        kind="correctness",
        why="a Signature Version 4 presigned URL acts as its X-Amz-Credential's account (moto "
        "reads only the Authorization header and SigV2's AWSAccessKeyId)",
        apply=f"{_LOCAL}.moto_accounts:presigned_urls_name_their_account",
        targets=(Target("moto.core.responses", "BaseResponse.get_access_key", params=("self",)),),
    ),
    Patch(
        name="events-disabled-rule-delivers-nothing",
        kind="correctness",
        why="a DISABLED rule matches no event, as in AWS (moto delivers to its targets); the "
        "archive's own rule stays enabled, so the events are archived, not delivered",
        apply=f"{_LOCAL}.moto_delivery:disabled_rules_deliver_nothing",
        targets=(
            Target(
                "moto.events.models",
                "Rule.send_to_targets",
                params=("self", "original_event", "transform_input"),
            ),
        ),
    ),
    Patch(
        name="events-delivered-with-account",
        kind="correctness",
        why="an event a rule delivers to a target holds its account, as in AWS (moto's default "
        "input template leaves it out): the ingest function checks it against the bucket's "
        "owner",
        apply=f"{_LOCAL}.moto_accounts:delivered_events_hold_their_account",
        targets=(
            Target(
                "moto.events.utils", "EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE", "object"
            ),
        ),
    ),
    Patch(
        # after events-disabled-rule-delivers-nothing: it wraps that patch's send_to_targets
        name="events-forwarded-keep-their-account",
        kind="correctness",
        why="an event a rule forwards to another bus keeps its account, resources and time, "
        "as in AWS (moto re-puts it as the target bus's account): the ingest rule matches a "
        "remote bucket's events by their owner's account",
        apply=f"{_LOCAL}.moto_accounts:forwarded_events_keep_their_account",
        targets=(
            Target(
                "moto.events.models",
                "Rule.send_to_targets",
                params=("self", "original_event", "transform_input"),
            ),
            Target("moto.events.models", "EventsBackend.put_events", params=("self", "events")),
        ),
    ),
    Patch(
        name="sqs-policy-deny-stops-eventbridge",
        kind="correctness",
        why="a queue policy denying events.amazonaws.com sqs:SendMessage stops the rule's "
        "delivery to it, as in AWS (moto evaluates no queue policy)",
        apply=f"{_LOCAL}.moto_delivery:queue_policy_denies_eventbridge",
        targets=(
            Target(
                "moto.events.models",
                "Rule._send_to_sqs_queue",
                params=("self", "resource_id", "event", "group_id"),
            ),
            Target("moto.sqs.models", "SQSBackend.send_message"),
        ),
    ),
    Patch(
        name="sqs-message-move-tasks",
        kind="correctness",
        why="s3ingest redrive starts an SQS message-move task (StartMessageMoveTask, "
        "ListMessageMoveTasks), which moto lacks",
        apply=f"{_LOCAL}.moto_delivery:message_move_tasks",
        targets=(
            Target("moto.sqs.responses", "SQSResponse", members=("sqs_backend", "_get_param")),
            Target("moto.sqs.models", "SQSBackend.get_queue", params=("self", "queue_name")),
            Target("moto.core.responses", "ActionResult"),
        ),
    ),
    Patch(
        name="events-input-path-memo",
        kind="speed",
        why="an EventBridge input path (jsonpath_ng, which moto calls per delivery) is parsed "
        "once per string",
        apply=f"{_LOCAL}.fast_moto:memoise_event_input_paths",
        targets=(Target("jsonpath_ng.ext", "parse", params=("path", "debug")),),
    ),
    Patch(
        name="moto-module-listing-once",
        kind="speed",
        why="the server lists moto's package directory once, not per request",
        apply=f"{_LOCAL}.fast_moto:list_moto_modules_once",
        targets=(Target("moto.backends", "list_of_moto_modules", params=()),),
    ),
    Patch(
        name="dynamodb-scan-string-key-sort",
        kind="speed",
        why="a Scan sorts a hash-only table of string keys by the strings, not by DynamoType "
        "comparisons (1.5 s a page of 100,000 items)",
        apply=f"{_LOCAL}.fast_moto:sort_string_hash_keys_natively",
        targets=(
            Target(f"{_DDB}.models.table", "Table.all_items", params=("self",)),
            Target(f"{_DDB}.models.dynamo_type", "DynamoType.__lt__", params=("self", "other")),
        ),
    ),
)

_LOCK = threading.Lock()
#: Per (patch name, moto version): why it may not be applied, or ``None`` (checked once).
_VERDICTS: dict[tuple[str, str], str | None] = {}


def moto_version() -> str:
    """The installed moto's version."""
    return importlib.metadata.version("moto")


def named(*names: str) -> tuple[Patch, ...]:
    """The patches of :data:`PATCHES` with these names, in registry order (``KeyError`` for an
    unknown name): for tests that patch only part of moto, through the same checks."""
    unknown = set(names) - {patch.name for patch in PATCHES}
    if unknown:
        raise KeyError(f"no such moto patch: {', '.join(sorted(unknown))}")
    return tuple(patch for patch in PATCHES if patch.name in names)


def problems(patches: Sequence[Patch] = PATCHES) -> list[str]:
    """Every target of ``patches`` missing or shaped otherwise in the installed modules."""
    return [f"{patch.name}: {p}" for patch in patches for p in patch.problems()]


def install(*, version: str | None = None, patches: Sequence[Patch] = PATCHES) -> list[str]:
    """Apply ``patches`` in order (idempotent, thread-safe); returns the names applied.

    ``version`` is moto's (default: the installed one; tests inject others). Every patch is
    checked before any is applied: a correctness patch outside its versions, or whose targets
    are missing or shaped otherwise, raises :class:`MotoPatchError` (naming each such patch,
    its versions and the installed one) and nothing is applied; such a speed patch is skipped
    with a warning (once per process).
    """
    version = version or moto_version()
    with _LOCK:
        refused: list[str] = []
        applicable: list[Patch] = []
        for patch in patches:
            key = (patch.name, version)
            if key not in _VERDICTS:
                _VERDICTS[key] = _verdict(patch, version)
                if _VERDICTS[key] and patch.kind == "speed":
                    _LOG.warning("moto speed patch %s skipped: %s", patch.name, _VERDICTS[key])
            verdict = _VERDICTS[key]
            if verdict is None:
                applicable.append(patch)
            elif patch.kind == "correctness":
                refused.append(f"{patch.name} ({verdict})")
        if refused:
            raise MotoPatchError(
                f"the local runtime's moto patches do not fit moto {version}: "
                + "; ".join(refused)
                + f". Install a moto in {_specifier(patches)} (pip install 's3ingest[local]'), "
                "or update the patches (s3ingest/local/emulator/moto_patches.py)."
            )
        for patch in applicable:
            patch.function()()
        return [patch.name for patch in applicable]


def _verdict(patch: Patch, version: str) -> str | None:
    if not patch.admits(version):
        return f"written against moto {patch.versions}, installed {version}"
    found = patch.problems()
    if found:
        return f"moto {version} differs: {'; '.join(found)}"
    return None


def _specifier(patches: Sequence[Patch]) -> str:
    ranges = sorted({patch.versions for patch in patches if patch.kind == "correctness"})
    return " and ".join(ranges) or f">={TESTED[0]},<{TESTED[1]}"
