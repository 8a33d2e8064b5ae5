"""moto patches for the delivery incidents the local runtime rehearses (``docs/runbook.md``).

Installed through :mod:`s3ingest.local.emulator.moto_patches` (each idempotent; read against moto
5.2.5):

* :func:`disabled_rules_deliver_nothing`: a ``DISABLED`` EventBridge rule matches nothing, as
  in AWS (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_DisableRule.html);
  moto delivers to a disabled rule's targets. The archive's own rule stays enabled, so an event
  put while the ingest rule is disabled is archived and not delivered, and a replay brings it.
* :func:`queue_policy_denies_eventbridge`: moto evaluates no SQS queue policy; this honours
  one form only: a ``Deny`` statement for the principal ``events.amazonaws.com`` (or ``*``) on
  ``sqs:SendMessage`` (or ``sqs:*``, ``*``): EventBridge's delivery to that queue fails, as it
  does in AWS when a policy shuts the rule out (the event is not delivered; it stays archived).
* :func:`message_move_tasks`: SQS ``StartMessageMoveTask`` / ``ListMessageMoveTasks``
  (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_StartMessageMoveTask.html),
  which moto lacks: the visible messages of the source queue move at once, the task completes.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

#: The ``Principal`` services a queue policy's Deny names to shut EventBridge out.
_EVENTBRIDGE = "events.amazonaws.com"
_SEND_ACTIONS = ("sqs:SendMessage", "sqs:*", "*")
#: Message-move tasks per source queue ARN, newest first (``ListMessageMoveTasks``).
_TASKS: dict[str, list[dict[str, Any]]] = {}
_TASKS_LOCK = threading.Lock()


def disabled_rules_deliver_nothing() -> None:
    """Patch ``Rule.send_to_targets``: a rule whose state is ``DISABLED`` delivers nothing."""
    from moto.events.models import Rule

    original = Rule.send_to_targets
    if getattr(original, "_s3ingest_patched", False):
        return

    def send_to_targets(self: Any, original_event: Any, transform_input: bool = True) -> None:
        if getattr(self, "state", "ENABLED") == "DISABLED":
            return
        original(self, original_event, transform_input)

    send_to_targets._s3ingest_patched = True  # type: ignore[attr-defined]
    Rule.send_to_targets = send_to_targets  # type: ignore[method-assign]


def denies_eventbridge(policy: Any) -> bool:
    """Whether an SQS queue policy (JSON text or dict) has a Deny for EventBridge's
    ``sqs:SendMessage``."""
    import json

    if not policy:
        return False
    doc = json.loads(policy) if isinstance(policy, str) else policy
    statements = doc.get("Statement", [])
    for statement in statements if isinstance(statements, list) else [statements]:
        if statement.get("Effect") != "Deny":
            continue
        principal = statement.get("Principal")
        services = principal.get("Service", []) if isinstance(principal, dict) else principal
        services = [services] if isinstance(services, str) else list(services or [])
        actions = statement.get("Action", [])
        actions = [actions] if isinstance(actions, str) else list(actions)
        if (_EVENTBRIDGE in services or "*" in services) and any(
            a in _SEND_ACTIONS for a in actions
        ):
            return True
    return False


def queue_policy_denies_eventbridge() -> None:
    """Patch ``Rule._send_to_sqs_queue``: no delivery to a queue whose policy denies
    EventBridge (:func:`denies_eventbridge`)."""
    from moto.events.models import Rule

    original = Rule._send_to_sqs_queue
    if getattr(original, "_s3ingest_patched", False):
        return

    def _send_to_sqs_queue(
        self: Any, resource_id: str, event: dict[str, Any], group_id: str | None = None
    ) -> None:
        from moto.sqs import sqs_backends

        queue = sqs_backends[self.account_id][self.region_name].queues.get(resource_id)
        if queue is not None and denies_eventbridge(getattr(queue, "policy", None)):
            return
        original(self, resource_id, event, group_id)

    _send_to_sqs_queue._s3ingest_patched = True  # type: ignore[attr-defined]
    Rule._send_to_sqs_queue = _send_to_sqs_queue  # type: ignore[method-assign]


def message_move_tasks() -> None:
    """Add ``start_message_move_task`` and ``list_message_move_tasks`` to moto's SQS."""
    from moto.core.responses import ActionResult
    from moto.sqs.responses import SQSResponse

    if getattr(SQSResponse, "_s3ingest_move_tasks", False):
        return

    def start_message_move_task(self: Any) -> Any:
        backend = self.sqs_backend
        source_arn = self._get_param("SourceArn")
        source = _queue_of(backend, source_arn)
        destination_arn = self._get_param("DestinationArn")
        if destination_arn is None:  # the queues whose dead-letter queue the source is
            destination_arn = next(
                q.queue_arn
                for q in backend.queues.values()
                if (getattr(q, "redrive_policy", None) or {}).get("deadLetterTargetArn")
                == source_arn
            )
        destination = _queue_of(backend, destination_arn)
        moved = 0
        with source._messages_lock:
            waiting = [m for m in source._messages if m.visible and not m.delayed]
            for message in waiting:
                source._messages.remove(message)
        for message in waiting:
            backend.send_message(
                destination.name,
                message.body,
                message_attributes=dict(message.message_attributes) or None,
            )
            moved += 1
        handle = uuid.uuid4().hex
        task = {
            "TaskHandle": handle,
            "Status": "COMPLETED",
            "SourceArn": source_arn,
            "DestinationArn": destination_arn,
            "ApproximateNumberOfMessagesMoved": moved,
            "ApproximateNumberOfMessagesToMove": moved,
            "StartedTimestamp": int(time.time() * 1000),
        }
        with _TASKS_LOCK:
            _TASKS.setdefault(source_arn, []).insert(0, task)
        return ActionResult({"TaskHandle": handle})

    def list_message_move_tasks(self: Any) -> Any:
        source_arn = self._get_param("SourceArn")
        limit = int(self._get_param("MaxResults") or 1)
        with _TASKS_LOCK:
            tasks = [
                {k: v for k, v in t.items() if k != "TaskHandle"}
                for t in _TASKS.get(source_arn, [])[:limit]
            ]
        return ActionResult({"Results": tasks})

    SQSResponse.start_message_move_task = start_message_move_task  # type: ignore[attr-defined]
    SQSResponse.list_message_move_tasks = list_message_move_tasks  # type: ignore[attr-defined]
    SQSResponse._s3ingest_move_tasks = True  # type: ignore[attr-defined]


def _queue_of(backend: Any, arn: str) -> Any:
    """The moto queue of ``arn`` (its name is the ARN's last part)."""
    return backend.get_queue(arn.rsplit(":", 1)[-1])
