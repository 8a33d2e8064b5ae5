"""Two stages in one account: each stack's alarms watch its own series only.

The functions' custom metrics carry ``stack=<S3INGEST_STACK>`` besides ``service=s3ingest``, so
``dev`` and ``prod`` in one account and region never share a series; the AWS metrics name the
stack's own resources. Here the two stacks' alarm metrics are compared as synthesized, with each
reference to a resource of the stack made stack-qualified (two stacks' ``Ref``s to the same
logical id are two resources).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from s3ingest_cdk.synth import Synth, synthesize

MetricKey = tuple[str, str, tuple[tuple[str, str], ...]]


@pytest.fixture(scope="module")
def prod_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    """The default app as stage ``prod`` (the session's ``synth`` is ``dev``): one more synth."""
    yield synthesize(tmp_path_factory.mktemp("cdk-out-prod"), {"stage": "prod"})


def _qualified(value: Any, stack_name: str) -> str:
    """A dimension value as text; a reference to a resource of the stack is prefixed with the
    stack's name, a pseudo parameter (``AWS::Region``) is not (it is the same for both)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Ref" in value:
        ref = value["Ref"]
        return ref if ref.startswith("AWS::") else f"{stack_name}/{ref}"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        resource, attribute = value["Fn::GetAtt"]
        return f"{stack_name}/{resource}.{attribute}"
    if isinstance(value, dict) and "Fn::Join" in value:
        delimiter, parts = value["Fn::Join"]
        return str(delimiter).join(_qualified(part, stack_name) for part in parts)
    raise AssertionError(f"unexpected dimension value: {json.dumps(value)}")


def _metric_key(metric: dict[str, Any], stack_name: str) -> MetricKey:
    dimensions = tuple(
        sorted(
            (dimension["Name"], _qualified(dimension["Value"], stack_name))
            for dimension in metric.get("Dimensions", [])
        )
    )
    return (metric["Namespace"], metric["MetricName"], dimensions)


def _alarm_metrics(synth: Synth) -> dict[MetricKey, list[str]]:
    """Every metric an alarm of the stack watches (a metric-math alarm's included) -> the
    alarms' logical ids."""
    stack_name = synth.stack.stack_name
    found: dict[MetricKey, list[str]] = {}
    for logical_id, alarm in synth.resources("AWS::CloudWatch::Alarm").items():
        properties = alarm["Properties"]
        metrics = (
            [properties]
            if "MetricName" in properties
            else [
                query["MetricStat"]["Metric"]
                for query in properties["Metrics"]
                if "MetricStat" in query
            ]
        )
        assert metrics, logical_id
        for metric in metrics:
            found.setdefault(_metric_key(metric, stack_name), []).append(logical_id)
    return found


def test_two_stages_alarms_watch_disjoint_series(synth: Synth, prod_synth: Synth) -> None:
    # GIVEN the same app deployed as dev and as prod, in one account and region
    assert (synth.settings.stage, prod_synth.settings.stage) == ("dev", "prod")
    dev, prod = _alarm_metrics(synth), _alarm_metrics(prod_synth)
    # THEN both have the same alarms ...
    assert sorted(synth.resources("AWS::CloudWatch::Alarm")) == sorted(
        prod_synth.resources("AWS::CloudWatch::Alarm")
    )
    # ... and no metric one stage's alarm watches is a metric of the other's
    shared = set(dev) & set(prod)
    assert not shared, {key: (dev[key], prod[key]) for key in shared}
    # The custom metrics select their own stack (not only service=s3ingest).
    custom = [key for key in dev if key[0] == "S3Ingest"]
    assert custom
    for _, _, dimensions in custom:
        assert ("stack", synth.stack.stack_name) in dimensions
        assert ("service", "s3ingest") in dimensions


def test_alarm_names_are_stage_scoped(synth: Synth, prod_synth: Synth) -> None:
    # Two stages' alarms never collide on a name (alarm names are unique per account and region).
    names = [
        {
            alarm["Properties"]["AlarmName"]
            for alarm in variant.resources("AWS::CloudWatch::Alarm").values()
        }
        for variant in (synth, prod_synth)
    ]
    assert not names[0] & names[1]
