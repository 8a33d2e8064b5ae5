"""``logKeys`` (issue 24): how object keys appear in the functions' logs and the state machines'
logs (the change audit log's part is :class:`s3ingest_cdk.constructs.ChangeBus`'s).

* Every function gets ``LOG_KEYS`` (:class:`s3ingest_fn.config.LogConfig`; unset for
  ``plain``), which its loggers' :class:`s3ingest_fn.log_keys.KeyFilter` applies.
* ``hashed``: a Secrets Manager secret the stack generates (``GenerateSecretString``, 64
  characters) keys the HMAC; every function may read it (``LOG_KEY_SECRET_ARN``, read once per
  cold start) and so may the operator (``s3ingest log-key KEY``, the output
  ``LogKeySecretArn``). A secret costs 0.40 USD a month plus 0.05 USD per 10,000 calls
  (https://aws.amazon.com/secrets-manager/pricing/): one call per cold start. It is never
  rotated (a new value changes every hash, so old lines are no longer found by a key's hash)
  and retained with the stack's logs.
* ``hashed`` and ``none``: the state machines log no execution data
  (``IncludeExecutionData`` false; their inputs and outputs carry keys): their log lines keep
  the event types, states and timing, not what went in or out
  (https://docs.aws.amazon.com/step-functions/latest/dg/cw-logs.html).
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from s3ingest.settings import Settings
from s3ingest_cdk.nag import acknowledge
from s3ingest_fn.config import LogConfig

#: The hash key's length, characters (letters and digits: about 380 bits).
SECRET_LENGTH = 64


class LogKeys(Construct):
    """Apply ``settings.log_keys`` to ``functions`` and ``state_machines``.

    Attributes
    ----------
    secret : aws_cdk.aws_secretsmanager.Secret or None
        The hash key (``hashed`` only).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        functions: Mapping[str, lambda_.Function],
        state_machines: Mapping[str, sfn.StateMachine],
    ) -> None:
        super().__init__(scope, construct_id)
        self.secret: secretsmanager.Secret | None = None
        if settings.log_keys == "hashed":
            self.secret = secretsmanager.Secret(
                self,
                "Secret",
                description="s3ingest: the key of the hash that stands for object keys in logs",
                generate_secret_string=secretsmanager.SecretStringGenerator(
                    password_length=SECRET_LENGTH, exclude_punctuation=True
                ),
                # kept with the logs it keys (retained too): a new stack's hashes would differ
                removal_policy=RemovalPolicy.RETAIN,
            )
            acknowledge(
                self.secret,
                "AwsSolutions-SMG4",
                "The log key secret keys the hash that stands for object keys in logs; a "
                "rotation would change every hash, so lines logged before it could no longer "
                "be found by a key's hash (docs/runbook.md#finding-a-key-in-the-logs).",
            )
        config = LogConfig(settings.log_keys, self.secret.secret_arn if self.secret else None)
        for function in functions.values():
            for name, value in config.to_env().items():
                function.add_environment(name, value)
            if self.secret is not None:
                self.secret.grant_read(function)
        if settings.log_keys != "plain":
            for machine in state_machines.values():
                cfn = machine.node.default_child
                if not isinstance(cfn, sfn.CfnStateMachine):  # pragma: no cover
                    raise TypeError("StateMachine's default child is not a CfnStateMachine")
                cfn.add_property_override("LoggingConfiguration.IncludeExecutionData", False)
