"""Alarms, the alarm topic and the dashboard: exact properties on every synthesized variant."""

from __future__ import annotations

import json
from typing import Any

import pytest

from s3ingest_cdk.constructs.operations_dashboard import OUTCOME_METRICS
from s3ingest_cdk.synth import PROJECT_ROOT, Synth

from .conftest import ALARM_EMAIL, VARIANTS

FIVE_MINUTES = 300
ONE_HOUR = 3_600
DAY = 86_400


def _stack_dimensions(synth: Synth) -> list[dict[str, Any]]:
    """The dimensions of the stack's own custom metrics: ``service`` and ``stack``."""
    return [
        {"Name": "service", "Value": "s3ingest"},
        {"Name": "stack", "Value": synth.stack.stack_name},
    ]


def _ref(logical_id: str) -> dict[str, Any]:
    return {"Ref": logical_id}


def _topic_id(synth: Synth) -> str:
    return synth.logical_id(synth.pipeline.alarm_topic.topic)


def _props(synth: Synth, construct: Any) -> dict[str, Any]:
    properties: dict[str, Any] = synth.template["Resources"][synth.logical_id(construct)][
        "Properties"
    ]
    return properties


def _notifies_topic(synth: Synth, threshold: float, evaluation_periods: int) -> dict[str, Any]:
    """What every operational alarm shares: > threshold in all periods, missing data not
    breaching, the topic on ALARM and on OK."""
    return {
        "Threshold": threshold,
        "ComparisonOperator": "GreaterThanThreshold",
        "EvaluationPeriods": evaluation_periods,
        "DatapointsToAlarm": evaluation_periods,
        "TreatMissingData": "notBreaching",
        "AlarmActions": [_ref(_topic_id(synth))],
        "OKActions": [_ref(_topic_id(synth))],
    }


def _queue_alarm(synth: Synth, queue: Any, metric_name: str) -> dict[str, Any]:
    return {
        "Namespace": "AWS/SQS",
        "MetricName": metric_name,
        "Dimensions": [
            {
                "Name": "QueueName",
                "Value": {"Fn::GetAtt": [synth.logical_id(queue), "QueueName"]},
            }
        ],
        "Statistic": "Maximum",
        "Period": FIVE_MINUTES,
    }


def _executions_failed(synth: Synth, machine: Any, label: str, period: int) -> dict[str, Any]:
    """A state machine's failed + timed-out + aborted executions (math expression)."""
    machine_arn = _ref(synth.logical_id(machine))
    return {
        "Metrics": [
            {
                "Expression": "failed + timedOut + aborted",
                "Id": "expr_1",
                "Label": f"{label} executions failed, timed out or aborted",
                "ReturnData": True,
            },
            *(
                {
                    "Id": metric_id,
                    "MetricStat": {
                        "Metric": {
                            "Namespace": "AWS/States",
                            "MetricName": metric_name,
                            "Dimensions": [{"Name": "StateMachineArn", "Value": machine_arn}],
                        },
                        "Period": period,
                        "Stat": "Sum",
                    },
                    "ReturnData": False,
                }
                for metric_id, metric_name in (
                    ("failed", "ExecutionsFailed"),
                    ("timedOut", "ExecutionsTimedOut"),
                    ("aborted", "ExecutionsAborted"),
                )
            ),
        ],
    }


def _function_alarm(synth: Synth, function: Any, metric_name: str, period: int) -> dict[str, Any]:
    return {
        "Namespace": "AWS/Lambda",
        "MetricName": metric_name,
        "Dimensions": [{"Name": "FunctionName", "Value": _ref(synth.logical_id(function))}],
        "Statistic": "Sum",
        "Period": period,
    }


def _expected_alarms(synth: Synth) -> dict[str, tuple[dict[str, Any], str]]:
    """Logical id -> (exact properties but the description and tags, runbook anchor)."""
    pipeline = synth.pipeline
    alarms = pipeline.alarms
    topic = _topic_id(synth)
    expected: dict[str, tuple[dict[str, Any], str]] = {
        synth.logical_id(alarms.dead_letters): (
            {
                **_queue_alarm(
                    synth,
                    pipeline.ingest_queue.dead_letter_queue,
                    "ApproximateNumberOfMessagesVisible",
                ),
                **_notifies_topic(synth, 0, 1),
            },
            "poison-message-in-the-dlq",
        ),
        synth.logical_id(alarms.target_dead_letters): (
            {
                **_queue_alarm(
                    synth,
                    pipeline.routing.target_dead_letter_queue,
                    "ApproximateNumberOfMessagesVisible",
                ),
                **_notifies_topic(synth, 0, 1),
            },
            "events-lost-upstream",
        ),
        synth.logical_id(alarms.oldest_message_age): (
            {
                **_queue_alarm(synth, pipeline.ingest_queue.queue, "ApproximateAgeOfOldestMessage"),
                **_notifies_topic(synth, 900, 3),
            },
            "ingest-falling-behind",
        ),
        synth.logical_id(alarms.ingest_errors): (
            {
                **_function_alarm(synth, pipeline.ingest.function, "Errors", FIVE_MINUTES),
                **_notifies_topic(synth, 0, 1),
            },
            "ingest-falling-behind",
        ),
        synth.logical_id(alarms.ingest_throttles): (
            {
                **_function_alarm(synth, pipeline.ingest.function, "Throttles", FIVE_MINUTES),
                **_notifies_topic(synth, 0, 2),
            },
            "ingest-falling-behind",
        ),
        synth.logical_id(alarms.reconcile_errors): (
            {
                **_function_alarm(synth, pipeline.reconcile.function, "Errors", ONE_HOUR),
                **_notifies_topic(synth, 0, 1),
            },
            "events-lost-upstream",
        ),
        # The drift alarm keeps its own metric and threshold (test_infra_reconcile.py) and gains
        # the topic's actions.
        synth.logical_id(pipeline.drift.alarm): (
            {
                "Namespace": "S3Ingest",
                "MetricName": "drift_total",
                "Dimensions": _stack_dimensions(synth),
                "Statistic": "Maximum",
                "Period": 86_400,
                "Threshold": 1,
                "ComparisonOperator": "GreaterThanOrEqualToThreshold",
                "EvaluationPeriods": 1,
                "TreatMissingData": "notBreaching",
                "AlarmActions": [_ref(topic)],
                "OKActions": [_ref(topic)],
            },
            "events-lost-upstream",
        ),
        # The scheduled run's attestation, made after its repairs, has differing roots (issue
        # 38): the drift alarm's shape on its own metric.
        synth.logical_id(pipeline.drift.attestation): (
            {
                "Namespace": "S3Ingest",
                "MetricName": "attestation_differs",
                "Dimensions": _stack_dimensions(synth),
                "Statistic": "Maximum",
                "Period": 86_400,
                "Threshold": 1,
                "ComparisonOperator": "GreaterThanOrEqualToThreshold",
                "EvaluationPeriods": 1,
                "TreatMissingData": "notBreaching",
                "AlarmActions": [_ref(topic)],
                "OKActions": [_ref(topic)],
            },
            "events-lost-upstream",
        ),
    }
    reconcile_machine = pipeline.reconcile_state_machine
    if reconcile_machine is not None:
        assert alarms.reconcile_failed is not None
        expected[synth.logical_id(alarms.reconcile_failed)] = (
            {
                **_executions_failed(
                    synth, reconcile_machine.state_machine, "Fan-out reconciliation", ONE_HOUR
                ),
                **_notifies_topic(synth, 0, 1),
            },
            "events-lost-upstream",
        )
    else:
        assert alarms.reconcile_failed is None
    backfill_machine = pipeline.backfill_state_machine
    if backfill_machine is not None:
        assert alarms.backfill_failed is not None
        expected[synth.logical_id(alarms.backfill_failed)] = (
            {
                **_executions_failed(
                    synth, backfill_machine.state_machine, "Backfill", FIVE_MINUTES
                ),
                **_notifies_topic(synth, 0, 1),
            },
            "bucket-adopted-with-existing-objects",
        )
    else:
        assert alarms.backfill_failed is None
    assert alarms.listing_failed is not None  # every stack deploys the listing backfill
    expected[synth.logical_id(alarms.listing_failed)] = (
        {
            **_executions_failed(
                synth,
                pipeline.listing.state_machine.state_machine,
                "Listing backfill",
                FIVE_MINUTES,
            ),
            **_notifies_topic(synth, 0, 1),
        },
        "bucket-adopted-with-existing-objects",
    )
    assert alarms.reprocess_failed is not None  # every stack deploys the reprocess run
    expected[synth.logical_id(alarms.reprocess_failed)] = (
        {
            **_executions_failed(
                synth,
                pipeline.reprocess.state_machine.state_machine,
                "Reprocess",
                FIVE_MINUTES,
            ),
            **_notifies_topic(synth, 0, 1),
        },
        "reprocess-run-failed",
    )
    # a run that ended with keys behind (issue 34): the summary's metric, stack dimensions
    assert alarms.reprocess_keys_behind is not None
    expected[synth.logical_id(alarms.reprocess_keys_behind)] = (
        {
            **_custom_alarm(synth, "reprocess_keys_behind", "Maximum", FIVE_MINUTES),
            **_notifies_topic(synth, 0, 1),
        },
        "reprocess-run-failed",
    )
    # Every DLQ's oldest message: half the time the DLQ surely keeps it (test_infra_dead_letters).
    settings = synth.settings
    sure = {
        "ingest-dlq": (settings.dlq_retention_days - settings.queue_retention_days) * DAY,
        "rule-target-dlq": settings.dlq_retention_days * DAY,
        "change-stream-dlq": 14 * DAY,
        # redriven from the history queue (4 days) and sent to (the rule, the writer): 14 days
        "history-dlq": (14 - 4) * DAY,
    }
    assert set(alarms.dead_letter_ages) == set(pipeline.monitoring.dead_letter_queues)
    for what, alarm in alarms.dead_letter_ages.items():
        dlq = pipeline.monitoring.dead_letter_queues[what]
        expected[synth.logical_id(alarm)] = (
            {
                **_queue_alarm(synth, dlq, "ApproximateAgeOfOldestMessage"),
                "Period": ONE_HOUR,
                **_notifies_topic(synth, sure[what] // 2, 1),
            },
            "dlq-messages-near-expiry",
        )
    relay = pipeline.change_relay
    if relay is not None:
        assert alarms.change_dead_letters is not None
        assert alarms.change_relay_errors is not None
        assert alarms.change_relay_behind is not None
        expected[synth.logical_id(alarms.change_dead_letters)] = (
            {
                **_queue_alarm(
                    synth, relay.dead_letter_queue, "ApproximateNumberOfMessagesVisible"
                ),
                **_notifies_topic(synth, 0, 1),
            },
            "change-stream-dlq",
        )
        expected[synth.logical_id(alarms.change_relay_errors)] = (
            {
                **_function_alarm(synth, relay.function, "Errors", FIVE_MINUTES),
                **_notifies_topic(synth, 0, 1),
            },
            "change-stream-errors",
        )
        # A failed PutEvents entry is a partial batch failure, not a function error: the stream
        # waiting behind it shows as the iterator age (milliseconds).
        expected[synth.logical_id(alarms.change_relay_behind)] = (
            {
                **_function_alarm(synth, relay.function, "IteratorAge", FIVE_MINUTES),
                "Statistic": "Maximum",
                **_notifies_topic(synth, 900_000, 3),
            },
            "change-stream-errors",
        )
    else:
        assert alarms.change_dead_letters is None
        assert alarms.change_relay_errors is None
        assert alarms.change_relay_behind is None
    expected.update(_expected_operating_alarms(synth))
    return expected


def _custom_alarm(synth: Synth, metric_name: str, statistic: str, period: int) -> dict[str, Any]:
    """An alarm on one of the stack's own custom metrics (service and stack dimensions); a
    percentile is an ``ExtendedStatistic``."""
    key = "ExtendedStatistic" if statistic.startswith("p") else "Statistic"
    return {
        "Namespace": "S3Ingest",
        "MetricName": metric_name,
        "Dimensions": _stack_dimensions(synth),
        key: statistic,
        "Period": period,
    }


def _breaching_below_one(synth: Synth, evaluation_periods: int) -> dict[str, Any]:
    """A heartbeat: < 1 in all periods, missing data breaching (no run is the failure)."""
    return {
        **_notifies_topic(synth, 1, evaluation_periods),
        "ComparisonOperator": "LessThanThreshold",
        "TreatMissingData": "breaching",
    }


def _rule_alarm(synth: Synth, metric_name: str) -> dict[str, Any]:
    # A rule on the default bus: RuleName is its only dimension (eb-monitoring.html).
    return {
        "Namespace": "AWS/Events",
        "MetricName": metric_name,
        "Dimensions": [
            {"Name": "RuleName", "Value": _ref(synth.logical_id(synth.pipeline.routing.rule))}
        ],
        "Statistic": "Sum",
        "Period": FIVE_MINUTES,
        **_notifies_topic(synth, 0, 1),
    }


def _duration_timeouts(synth: Synth) -> dict[str, tuple[Any, int]]:
    """``what`` -> (function, its timeout setting in seconds): every function with one."""
    pipeline, settings = synth.pipeline, synth.settings
    timeouts = {
        "ingest": (pipeline.ingest.function, settings.function_timeout_seconds),
        "reconcile": (pipeline.reconcile.function, settings.reconcile_timeout_seconds),
    }
    if pipeline.reconcile_fan_out is not None:
        timeouts["reconcile-fan-out"] = (
            pipeline.reconcile_fan_out.function,
            settings.reconcile_timeout_seconds,
        )
    if pipeline.backfill_control is not None:
        timeouts["backfill-control"] = (
            pipeline.backfill_control.function,
            settings.reconcile_timeout_seconds,
        )
    if pipeline.backfill is not None:
        timeouts["backfill"] = (
            pipeline.backfill.function,
            settings.backfill_function_timeout_seconds,
        )
    if pipeline.change_relay is not None:
        timeouts["change-relay"] = (
            pipeline.change_relay.function,
            settings.function_timeout_seconds,
        )
    if pipeline.history is not None:  # its row's fixed timeout
        timeouts["history"] = (pipeline.history.writer.function, 300)
    return timeouts


def _expected_operating_alarms(synth: Synth) -> dict[str, tuple[dict[str, Any], str]]:
    """Lag, the reconcile heartbeat, ledger throttling, durations, the ingest rule, delivery."""
    alarms, settings = synth.pipeline.alarms, synth.settings
    table = _ref(synth.logical_id(synth.pipeline.ledger.table))
    expected: dict[str, tuple[dict[str, Any], str]] = {
        synth.logical_id(alarms.ingest_lag): (
            {
                **_custom_alarm(synth, "ingest_lag_ms", "p99", FIVE_MINUTES),
                **_notifies_topic(synth, settings.lag_alarm_seconds * 1000, 1),
            },
            "ingest-lag",
        ),
        synth.logical_id(alarms.reconcile_heartbeat): (
            {
                # rate(1 day): one day and one hour
                **_custom_alarm(synth, "reconcile_completed", "Sum", 25 * ONE_HOUR),
                **_breaching_below_one(synth, 1),
            },
            "reconciliation-not-running",
        ),
        synth.logical_id(alarms.ledger_throttles): (
            {
                "Metrics": [
                    {
                        "Expression": "reads + writes",
                        "Id": "expr_1",
                        "Label": "Ledger read and write throttle events",
                        "ReturnData": True,
                    },
                    *(
                        {
                            "Id": metric_id,
                            "MetricStat": {
                                "Metric": {
                                    "Namespace": "AWS/DynamoDB",
                                    "MetricName": metric_name,
                                    "Dimensions": [{"Name": "TableName", "Value": table}],
                                },
                                "Period": FIVE_MINUTES,
                                "Stat": "Sum",
                            },
                            "ReturnData": False,
                        }
                        for metric_id, metric_name in (
                            ("reads", "ReadThrottleEvents"),
                            ("writes", "WriteThrottleEvents"),
                        )
                    ),
                ],
                **_notifies_topic(synth, 0, 1),
            },
            "ledger-throttled",
        ),
        synth.logical_id(alarms.rule_failed_invocations): (
            _rule_alarm(synth, "FailedInvocations"),
            "ingest-rule-failing",
        ),
        synth.logical_id(alarms.rule_dlq_failures): (
            _rule_alarm(synth, "InvocationsFailedToBeSentToDlq"),
            "ingest-rule-failing",
        ),
        synth.logical_id(alarms.delivery_off): (
            {
                **_custom_alarm(synth, "eventbridge_delivery_enabled", "Minimum", 1_800),
                **_breaching_below_one(synth, 2),
            },
            "eventbridge-delivery-off",
        ),
    }
    timeouts = _duration_timeouts(synth)
    assert set(alarms.durations) == set(timeouts)
    for what, (function, timeout_seconds) in timeouts.items():
        expected[synth.logical_id(alarms.durations[what])] = (
            {
                **_function_alarm(synth, function, "Duration", FIVE_MINUTES),
                "Statistic": "Maximum",
                # 80% of the timeout, in milliseconds
                **_notifies_topic(synth, timeout_seconds * 800, 1),
            },
            "function-near-timeout",
        )
    return expected


def _expected_names(synth: Synth) -> dict[str, str]:
    """Logical id -> the alarm's name, ``s3ingest-<stage>-<what>``."""
    pipeline = synth.pipeline
    alarms = pipeline.alarms
    whats: dict[str, Any] = {
        "ingest-dlq-depth": alarms.dead_letters,
        "rule-target-dlq-depth": alarms.target_dead_letters,
        "ingest-oldest-message-age": alarms.oldest_message_age,
        "ingest-errors": alarms.ingest_errors,
        "ingest-throttles": alarms.ingest_throttles,
        "reconcile-errors": alarms.reconcile_errors,
        "reconcile-executions-failed": alarms.reconcile_failed,
        "backfill-executions-failed": alarms.backfill_failed,
        "listing-executions-failed": alarms.listing_failed,
        "reprocess-executions-failed": alarms.reprocess_failed,
        "reprocess-keys-behind": alarms.reprocess_keys_behind,
        **{f"{what}-age": alarm for what, alarm in alarms.dead_letter_ages.items()},
        "change-stream-dlq-depth": alarms.change_dead_letters,
        "change-relay-errors": alarms.change_relay_errors,
        "change-relay-iterator-age": alarms.change_relay_behind,
        "drift": pipeline.drift.alarm,
        "attestation": pipeline.drift.attestation,
        "ingest-lag": alarms.ingest_lag,
        "reconcile-heartbeat": alarms.reconcile_heartbeat,
        "ledger-throttles": alarms.ledger_throttles,
        "ingest-rule-failed-invocations": alarms.rule_failed_invocations,
        "ingest-rule-dlq-failures": alarms.rule_dlq_failures,
        "eventbridge-delivery-off": alarms.delivery_off,
        **{f"{what}-duration": alarm for what, alarm in alarms.durations.items()},
    }
    return {
        synth.logical_id(alarm): f"s3ingest-{synth.settings.stage}-{what}"
        for what, alarm in whats.items()
        if alarm is not None
    }


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_alarm_is_exact_and_notifies_the_topic(
    variant: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(variant)
    expected = _expected_alarms(synth)
    # THEN there are exactly these alarms, each with exactly these properties ...
    alarms = synth.resources("AWS::CloudWatch::Alarm")
    assert set(alarms) == set(expected)
    names = _expected_names(synth)
    for logical_id, (properties, anchor) in expected.items():
        actual = alarms[logical_id]["Properties"]
        ignored = ("AlarmDescription", "AlarmName", "Tags")
        assert {key: actual[key] for key in actual if key not in ignored} == properties, logical_id
        # ... named s3ingest-<stage>-<what> ...
        assert actual["AlarmName"] == names[logical_id]
        # ... with a description that links its runbook section (an absolute URL)
        assert actual["AlarmDescription"].startswith("s3ingest: "), logical_id
        assert actual["AlarmDescription"].endswith(
            f"Runbook: {synth.settings.runbook_base_url}#{anchor}"
        ), logical_id
    assert len(set(names.values())) == len(names)
    # The construct's list is the dashboard's: every alarm, once.
    assert sorted(synth.logical_id(alarm) for alarm in synth.pipeline.alarms.alarms) == sorted(
        expected
    )


def test_every_runbook_anchor_exists(fanout_synth: Synth) -> None:
    # GIVEN the variant with every alarm (the backfill's and the change stream's included)
    anchors = {anchor for _, anchor in _expected_alarms(fanout_synth).values()}
    runbook = (PROJECT_ROOT / "docs" / "runbook.md").read_text()
    # THEN each section an alarm names has its anchor in the runbook
    assert anchors == {
        "poison-message-in-the-dlq",
        "events-lost-upstream",
        "ingest-falling-behind",
        "bucket-adopted-with-existing-objects",
        "change-stream-dlq",
        "change-stream-errors",
        "ingest-lag",
        "reconciliation-not-running",
        "ledger-throttled",
        "function-near-timeout",
        "ingest-rule-failing",
        "eventbridge-delivery-off",
        "dlq-messages-near-expiry",
        "reprocess-run-failed",
    }
    for anchor in anchors:
        assert f'<a id="{anchor}"></a>' in runbook, anchor


def test_variants_cover_every_optional_alarm(synth: Synth, adopted_synth: Synth) -> None:
    # The default synth has the backfill alarm; so has the adopted one (the stack's own
    # inventory of the existing bucket, issue 15); neither has the fan-out's.
    assert synth.pipeline.alarms.backfill_failed is not None
    assert synth.pipeline.alarms.reconcile_failed is None
    assert adopted_synth.pipeline.alarms.backfill_failed is not None
    assert adopted_synth.pipeline.alarms.reconcile_failed is None


def test_fanout_variant_has_the_reconcile_execution_alarm(fanout_synth: Synth) -> None:
    assert fanout_synth.pipeline.alarms.reconcile_failed is not None
    assert fanout_synth.pipeline.alarms.backfill_failed is not None


def test_only_the_change_stream_variant_has_its_alarms(
    synth: Synth, adopted_synth: Synth, fanout_synth: Synth
) -> None:
    for variant in (synth, adopted_synth):
        assert variant.pipeline.alarms.change_dead_letters is None
        assert variant.pipeline.alarms.change_relay_errors is None
        assert variant.pipeline.alarms.change_relay_behind is None
    alarms = fanout_synth.pipeline.alarms
    assert alarms.change_dead_letters in alarms.alarms
    assert alarms.change_relay_errors in alarms.alarms
    assert alarms.change_relay_behind in alarms.alarms


# --- The topic -----------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_topic_is_encrypted_with_a_rotated_key_cloudwatch_may_use(
    variant: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(variant)
    key_id = synth.logical_id(synth.pipeline.alarm_topic.key)
    topic = _props(synth, synth.pipeline.alarm_topic.topic)
    # THEN the topic uses the stack's own key, not alias/aws/sns ...
    assert topic["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    key = _props(synth, synth.pipeline.alarm_topic.key)
    assert key["EnableKeyRotation"] is True
    # ... whose policy lets CloudWatch alarms encrypt for it (and nothing else beyond the account)
    statements = key["KeyPolicy"]["Statement"]
    assert [s for s in statements if s.get("Principal") != {"AWS": _account_root()}] == [
        {
            "Sid": "AllowCloudWatchAlarmsToPublishToTheEncryptedTopic",
            "Effect": "Allow",
            "Principal": {"Service": "cloudwatch.amazonaws.com"},
            "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
            "Resource": "*",
            # this account's and Region's alarms only (confused deputy, issue 34)
            "Condition": {
                "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
                "ArnLike": {
                    "aws:SourceArn": {
                        "Fn::Join": [
                            "",
                            [
                                "arn:",
                                {"Ref": "AWS::Partition"},
                                ":cloudwatch:",
                                {"Ref": "AWS::Region"},
                                ":",
                                {"Ref": "AWS::AccountId"},
                                ":alarm:*",
                            ],
                        ]
                    }
                },
            },
        }
    ]


def _account_root() -> dict[str, Any]:
    return {
        "Fn::Join": [
            "",
            ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":root"],
        ]
    }


def test_topic_policy_denies_insecure_transport_and_admits_this_accounts_alarms(
    synth: Synth,
) -> None:
    topic = _ref(_topic_id(synth))
    _, policy = synth.one("AWS::SNS::TopicPolicy")
    assert policy["Properties"]["Topics"] == [topic]
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {
            "Sid": "AllowPublishThroughSSLOnly",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "sns:Publish",
            "Resource": topic,
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        },
        {
            "Sid": "AllowCloudWatchAlarmsOfThisAccountAndRegion",
            "Effect": "Allow",
            "Principal": {"Service": "cloudwatch.amazonaws.com"},
            "Action": "sns:Publish",
            "Resource": topic,
            "Condition": {
                "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
                "ArnLike": {
                    "aws:SourceArn": {
                        "Fn::Join": [
                            "",
                            [
                                "arn:",
                                {"Ref": "AWS::Partition"},
                                ":cloudwatch:",
                                {"Ref": "AWS::Region"},
                                ":",
                                {"Ref": "AWS::AccountId"},
                                ":alarm:*",
                            ],
                        ]
                    }
                },
            },
        },
    ]


def test_no_subscription_without_alarm_email(synth: Synth, adopted_synth: Synth) -> None:
    for variant in (synth, adopted_synth):
        assert variant.settings.alarm_email is None
        assert variant.pipeline.alarm_topic.subscription is None
        assert variant.resources("AWS::SNS::Subscription") == {}


def test_alarm_email_subscribes_the_address(fanout_synth: Synth) -> None:
    # GIVEN alarmEmail in the context
    assert fanout_synth.settings.alarm_email == ALARM_EMAIL
    # THEN the topic has exactly one subscription: that address, by e-mail
    _, subscription = fanout_synth.one("AWS::SNS::Subscription")
    assert subscription["Properties"] == {
        "Protocol": "email",
        "Endpoint": ALARM_EMAIL,
        "TopicArn": _ref(_topic_id(fanout_synth)),
    }


# --- The dashboard -------------------------------------------------------------------------------


def _placeholder(token: Any) -> str:
    if isinstance(token, dict) and "Ref" in token:
        return f"<{token['Ref']}>"
    if isinstance(token, dict) and "Fn::GetAtt" in token:
        return "<{}.{}>".format(*token["Fn::GetAtt"])
    raise AssertionError(f"unexpected token in the dashboard body: {token!r}")


def _dashboard_body(synth: Synth) -> dict[str, Any]:
    """The dashboard body with each CloudFormation token rendered as ``<LogicalId[.Attr]>``."""
    _, dashboard = synth.one("AWS::CloudWatch::Dashboard")
    delimiter, parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"]
    body: dict[str, Any] = json.loads(
        delimiter.join(part if isinstance(part, str) else _placeholder(part) for part in parts)
    )
    return body


def _widgets(body: dict[str, Any], title: str) -> dict[str, Any]:
    found = [w["properties"] for w in body["widgets"] if w["properties"].get("title") == title]
    assert len(found) == 1, title
    widget: dict[str, Any] = found[0]
    return widget


def _metric_names(widget: dict[str, Any]) -> list[str]:
    return [metric[1] for metric in widget["metrics"]]


def test_outcome_metrics_are_the_handlers() -> None:
    from s3ingest_fn.core.model import Outcome

    emitted = (*(outcome.value for outcome in Outcome), "replayed")
    assert emitted == OUTCOME_METRICS


@pytest.mark.parametrize("variant", VARIANTS)
def test_dashboard_shows_outcomes_drift_queues_functions_and_alarms(
    variant: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(variant)
    _, dashboard = synth.one("AWS::CloudWatch::Dashboard")
    assert dashboard["Properties"]["DashboardName"] == f"s3ingest-{synth.settings.stage}"
    body = _dashboard_body(synth)
    serialized = json.dumps(body)
    for name in OUTCOME_METRICS:
        assert f'"{name}"' in serialized, name
    # The outcomes: S3Ingest, service=s3ingest, summed per 5 minutes.
    outcomes = _widgets(body, "Ingest outcomes (messages per 5 minutes)")
    assert outcomes["metrics"] == [
        [
            "S3Ingest",
            name,
            "service",
            "s3ingest",
            "stack",
            synth.stack.stack_name,
            {"label": name, "stat": "Sum"},
        ]
        for name in OUTCOME_METRICS
    ]
    # No period: CDK leaves out CloudWatch's default, 300 seconds.
    assert "period" not in outcomes
    drift = _widgets(body, "Drift found by reconciliation (keys per run)")
    assert _metric_names(drift) == [
        "drift_total",
        "drift_missing",
        "drift_deleted_but_live",
        "drift_content_mismatch",
        "drift_sequencer_contradicted",
    ]
    pipeline = synth.pipeline
    queue = _widgets(body, "Ingest queue")
    queue_name = f"<{synth.logical_id(pipeline.ingest_queue.queue)}.QueueName>"
    assert [metric[:4] for metric in queue["metrics"]] == [
        ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", queue_name],
        ["AWS/SQS", "ApproximateAgeOfOldestMessage", "QueueName", queue_name],
    ]
    dead_letters = _widgets(body, "Dead-letter queues (messages visible)")
    queues = [pipeline.ingest_queue.dead_letter_queue, pipeline.routing.target_dead_letter_queue]
    if pipeline.change_relay is not None:
        queues.append(pipeline.change_relay.dead_letter_queue)
    assert [metric[3] for metric in dead_letters["metrics"]] == [
        f"<{synth.logical_id(queue)}.QueueName>" for queue in queues
    ]
    functions = {f"<{synth.logical_id(pipeline.ingest.function)}>"}
    functions.add(f"<{synth.logical_id(pipeline.reconcile.function)}>")
    if pipeline.change_relay is not None:
        functions.add(f"<{synth.logical_id(pipeline.change_relay.function)}>")
    errors = _widgets(body, "Lambda errors and throttles (per 5 minutes)")
    duration = _widgets(body, "Lambda duration (maximum, ms)")
    assert set(_metric_names(errors)) == {"Errors", "Throttles"}
    assert set(_metric_names(duration)) == {"Duration"}
    assert functions <= {metric[3] for metric in errors["metrics"]}
    assert functions <= {metric[3] for metric in duration["metrics"]}
    # The alarm status widget lists every alarm.
    alarm_status = _widgets(body, "Alarms")
    assert sorted(alarm_status["alarms"]) == sorted(
        f"<{synth.logical_id(alarm)}.Arn>" for alarm in pipeline.alarms.alarms
    )


@pytest.mark.parametrize("variant", VARIANTS)
def test_outputs_name_the_topic_and_the_dashboard(
    variant: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(variant)
    outputs = synth.template["Outputs"]
    assert outputs["AlarmTopicArn"]["Value"] == _ref(_topic_id(synth))
    assert outputs["DashboardName"]["Value"] == _ref(
        synth.logical_id(synth.pipeline.dashboard.dashboard)
    )
