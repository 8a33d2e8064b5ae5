"""The CDK feature flags the pipeline's resources depend on, pinned on the pipeline's node so that
no app's ``cdk.json`` (or its absence: ``python app.py`` without the CDK CLI) changes them.

A flag is read as ``FeatureFlags.of(construct)``: the construct's own context first, then its
scopes' (``Node.tryGetContext``, https://docs.aws.amazon.com/cdk/v2/guide/featureflags.html).
Context set on the pipeline before it has children therefore decides for everything below it
and nothing else of the team's app. Where a property decides the same thing, the constructs set
it explicitly instead: server access logs delivered under a bucket policy
(:func:`s3ingest_cdk.constructs.landing_bucket.server_access_logs`); encryption, object
ownership and public access of every bucket
(:func:`s3ingest_cdk.constructs.landing_bucket.secure_bucket`).

The values are those ``cdk init`` writes for aws-cdk-lib 2.275 (``recommended-feature-flags.json``
of the package), which the repository's ``cdk.json`` has: the stack's template is the one it
always had. Flags read at the stack or app level (``@aws-cdk/core:enablePartitionLiterals``,
``@aws-cdk/core:explicitStackTags``, ...) stay the team's stack's choice. One is read at both:
``@aws-cdk/aws-iam:minimizePolicies`` merges a role's statements where the role is (pinned), and
the stack's value orders the actions and resources of each statement as the stack renders the
template (sorted, a one-element list written as its element); IAM reads both forms the same.
"""

from __future__ import annotations

from collections.abc import Mapping

from constructs import Construct

#: Flag -> value, for every flag aws-cdk-lib reads in the code paths of the pipeline's resources.
PINNED_FLAGS: dict[str, bool] = {
    # IAM: statements of a policy merged (one statement per set of actions / resources)
    "@aws-cdk/aws-iam:minimizePolicies": True,
    # Lambda: a function's grants go to its role's default policy, not a new policy each
    "@aws-cdk/aws-lambda:createNewPoliciesWithAddToRolePolicy": False,
    # Lambda: a function without a log group gets a CDK-managed one (the provider framework's)
    "@aws-cdk/aws-lambda:useCdkManagedLogGroup": True,
    # Lambda: layer versions are part of a function version's hash
    "@aws-cdk/aws-lambda:recognizeLayerVersion": True,
    # EventBridge: an SQS target's queue policy allows the rule's own account only
    "@aws-cdk/aws-events:eventsTargetQueueSameAccount": True,
    # EventBridge: a bus policy statement carries a Sid
    "@aws-cdk/aws-events:requireEventBusPolicySid": True,
    # Step Functions: a Distributed Map's ResultWriter in its current (V2) form
    "@aws-cdk/aws-stepfunctions:useDistributedMapResultWriterV2": True,
    # S3: block public access settings rendered as given
    "@aws-cdk/aws-s3:publicAccessBlockedByDefault": True,
    # S3: server access logs delivered under a bucket policy, not the LogDeliveryWrite ACL
    # (also set explicitly, landing_bucket.server_access_logs)
    "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True,
    # SNS -> SQS subscriptions: the queue key policy names the topic
    "@aws-cdk/aws-sns-subscriptions:restrictSqsDescryption": True,
}


#: The flags read where the stack renders its template, pinned on s3ingest's own stack
#: (:class:`s3ingest_cdk.stack.S3IngestStack`) at the values of the repository's ``cdk.json``:
#: with them the stack's template is the same byte for byte in any app, ``cdk.json`` or none.
STACK_FLAGS: dict[str, bool] = {
    # IAM: the actions and resources of each policy statement rendered sorted
    "@aws-cdk/aws-iam:minimizePolicies": True,
    # ARNs keep the partition pseudo-parameter (AWS::Partition) even with the region known
    "@aws-cdk/core:enablePartitionLiterals": False,
}


def pin_flags(construct: Construct, flags: Mapping[str, bool] = PINNED_FLAGS) -> None:
    """Set ``flags`` as ``construct``'s context (before it has children).

    Raises
    ------
    RuntimeError
        From CDK, when ``construct`` already has children.
    """
    for flag, value in flags.items():
        construct.node.set_context(flag, value)
