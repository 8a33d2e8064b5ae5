"""What the backfill tests read of a synthesized template: the handlers, the logical ids the
backfill uses (:class:`Ids`), the backfill state machine's states, and the CloudFormation
intrinsics they are written with."""

from __future__ import annotations

from typing import Any

from s3ingest_cdk.synth import Synth

from .asl import definition

BACKFILL_HANDLER = "s3ingest_fn.handlers.backfill.handler"
CONTROL_HANDLER = "s3ingest_fn.handlers.backfill_control.handler"
#: ``AWS::Partition`` as :func:`~tests.infra.asl.definition` renders it in a definition.
PARTITION = "<AWS::Partition>"


def arn(logical_id: str) -> dict[str, Any]:
    """``Fn::GetAtt`` of a resource's ARN."""
    return {"Fn::GetAtt": [logical_id, "Arn"]}


def ref(logical_id: str) -> dict[str, Any]:
    """``Ref`` of a resource or pseudo parameter."""
    return {"Ref": logical_id}


def join(*parts: Any) -> dict[str, Any]:
    """``Fn::Join`` of ``parts`` with no separator."""
    return {"Fn::Join": ["", list(parts)]}


def resource(synth: Synth, construct: Any) -> tuple[str, dict[str, Any]]:
    """A construct's logical id and its template resource."""
    logical_id = synth.logical_id(construct)
    return logical_id, synth.template["Resources"][logical_id]


class Ids:
    """Logical ids of what the backfill uses."""

    def __init__(self, synth: Synth) -> None:
        pipeline = synth.pipeline
        inventory = pipeline.landing.inventory_bucket
        control = pipeline.backfill_control
        machine = pipeline.backfill_state_machine
        assert inventory is not None and control is not None and machine is not None
        self.bucket = synth.logical_id(pipeline.landing.bucket)
        self.inventory = synth.logical_id(inventory)
        self.table = synth.logical_id(pipeline.ledger.table)
        self.queue = synth.logical_id(pipeline.ingest_queue.queue)
        self.dlq = synth.logical_id(pipeline.ingest_queue.dead_letter_queue)
        self.control = synth.logical_id(control.function)
        self.control_log_group = synth.logical_id(control.log_group)
        self.machine = synth.logical_id(machine.state_machine)
        self.reports = join(
            arn(self.inventory), "/inventory/", ref(self.bucket), "/s3ingest-daily/*"
        )
        self.completion_reports = join(arn(self.inventory), "/backfill-reports/*")
        self.objects = join(arn(self.bucket), "/*")
        output = pipeline.processor_output
        self.output = synth.logical_id(output.bucket) if output is not None else None


def states(synth: Synth) -> dict[str, Any]:
    """The backfill state machine's ``States``."""
    machine = synth.pipeline.backfill_state_machine
    assert machine is not None
    found: dict[str, Any] = definition(synth, machine.state_machine)["States"]
    return found
