"""``S3IngestPipeline``: the whole of s3ingest as one construct, for the team's own stack."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from os import PathLike
from typing import Any

from aws_cdk import Annotations, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from s3ingest import outputs as output
from s3ingest import stack_resources
from s3ingest.encryption import remote_inventories
from s3ingest.settings import DEFAULT_PROCESSOR_NAME, BucketSpec, Settings, SettingsError
from s3ingest.settings.fields import keyword_parameters
from s3ingest.settings.fields import overrides as field_overrides
from s3ingest_cdk.bundling import (
    build_cache,
    function_code,
    processor_requirements,
    processor_sources,
    processors_sources,
)
from s3ingest_cdk.constructs import LandingBucket, LedgerTable, ProcessorOutputBucket
from s3ingest_cdk.constructs.bucket_setup import BucketSetupProvider
from s3ingest_cdk.constructs.landing_bucket import Landings, allow_inventory_delivery
from s3ingest_cdk.deputy import hold_to_account
from s3ingest_cdk.discovery import publish
from s3ingest_cdk.encryption import (
    attach_key,
    encrypt_everything,
    grant_bucket_keys,
    grant_key_use,
)
from s3ingest_cdk.features import (
    Backfill,
    ChangeStream,
    Ingestion,
    Monitoring,
    Reconciliation,
)
from s3ingest_cdk.features.checkpointed_run import ListingBackfill, Reprocess
from s3ingest_cdk.features.history import History
from s3ingest_cdk.features.log_keys import LogKeys
from s3ingest_cdk.features.processors import ProcessorConfig, Processors, ingest_processors
from s3ingest_cdk.features.service import Given, IngestProcessors
from s3ingest_cdk.flags import pin_flags
from s3ingest_cdk.owners import guard_role
from s3ingest_cdk.pipeline_props import processor_entries, props_problems
from s3ingest_cdk.remote import RemoteSources, read_role_arn, reads_buckets
from s3ingest_fn import config as fn_config
from s3ingest_fn.effect_targets import hold_names

#: The settings fields the team's own resources stand for (``bucket``, ``buckets``,
#: ``processors``, ``processor_policy_statements``), not keyword overrides.
RESOURCE_FIELDS = frozenset({"bucket_name", "buckets", "processors", "processor_policy_statements"})


def setting_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``S3IngestPipeline``'s keyword overrides as :class:`~s3ingest.settings.Settings` fields
    (:func:`s3ingest.settings.fields.overrides`), :data:`RESOURCE_FIELDS` not among them.

    Raises
    ------
    s3ingest.settings.UnknownKeywordError
        A ``SettingsError`` and a ``TypeError``, naming every keyword that is no setting and
        the closest setting of each, as an unknown ``cdk.json`` key gets.
    """
    return field_overrides(Settings, overrides, "S3IngestPipeline", exclude=RESOURCE_FIELDS)


#: The construct ids of the features, children of the pipeline.
FEATURE_IDS = (
    "Ingestion",
    "Reconciliation",
    "Backfill",
    "Listing",
    "Reprocess",
    "ChangeStream",
    "Monitoring",
)


@dataclass(frozen=True)
class LandingBucketSource:
    """A ``buckets`` entry backed by a bucket of the app: ``S3IngestPipeline(buckets=[...,
    LandingBucketSource(BucketSpec(existing=True, prefixes=("in/",)), my_bucket)])``.

    ``bucket`` (created in the app, its name may be a token, or imported) is the entry's
    existing bucket: the pipeline sets it up as ``spec`` says (EventBridge delivery, its own
    inventory) without replacing anything else; ``spec.name`` is taken from ``bucket``.
    """

    spec: BucketSpec
    bucket: s3.IBucket


class S3IngestPipeline(Construct):
    """S3 -> EventBridge (default bus, archived) -> SQS (+DLQ) -> Lambda -> DynamoDB ledger, a
    scheduled reconciliation of the ledger with the bucket (CONTRACT C12) with a drift alarm, the
    backfill of pre-existing objects over the bucket's inventory (CONTRACT C13), the optional
    processor and change stream (CONTRACT C11), alarms and a dashboard.

    One construct per feature (:mod:`s3ingest_cdk.features`), each with its functions, its
    least-privilege grants and its cdk-nag acknowledgements; this construct creates the shared
    state (landing bucket, ledger table, processor output bucket) and composes them. It adds no
    stack of its own: put it in any stack. The app's feature flags change none of it
    (:mod:`s3ingest_cdk.flags`).

    The settings are ``settings`` (a :class:`s3ingest.settings.Settings`), with any of its
    fields overridden by a keyword argument of the field's name (``cdk.json``'s keys in
    snake_case: ``stage="prod"``, ``processor=...``), validated by the same rules; ``bucket``
    replaces ``bucketName``, and ``buckets``, ``processors`` and
    ``processor_policy_statements`` take the team's own resources.

    Parameters
    ----------
    scope : constructs.Construct
        The team's stack (or any construct in it).
    construct_id : str
        Construct id. Logical ids derive from the construct path, so two pipelines in one stack
        do not collide; give them different ``stage`` values (alarm, dashboard and bus names).
    settings : s3ingest.settings.Settings, optional
        The settings (default: every default); its ``buckets``, ``processors`` and
        ``processor_policy_statements`` stand when those arguments are empty. Its
        ``bucket_name`` must be unset (the bucket is ``bucket``, or see :meth:`from_settings`).
    bucket : aws_cdk.aws_s3.IBucket, optional
        The team's landing bucket, created in the app (``s3.Bucket(...)``, its name may be a
        token) or imported (``Bucket.from_bucket_name``). It is not reconfigured: its events must
        reach EventBridge (:func:`s3ingest_cdk.enable_event_bridge` turns that on for a bucket of
        the app; for another, the owner turns on "Send notifications to Amazon EventBridge"), and
        it gets no inventory, so reconciliation lists it and no backfill is deployed. Synth fails
        naming the fix when a bucket of the app sends no events to EventBridge
        (:class:`~s3ingest_cdk.constructs.landing_bucket.EventBridgeDeliveryCheck`).
        ``None``: the pipeline creates the landing bucket (and, with ``inventory_enabled``, its
        daily inventory, the backfill and the option of the fan-out reconciliation).
    buckets : sequence of s3ingest.settings.BucketSpec or LandingBucketSource, optional
        The landing buckets (the ``buckets`` setting), instead of ``bucket``: each created by
        the pipeline or existing (``existing=True`` with a name, or a
        :class:`LandingBucketSource` for a bucket of the app), with its key filters. An
        existing bucket gets its EventBridge delivery switched on and the pipeline's own
        inventory by a custom resource that keeps every other configuration and leaves the
        bucket as found on deletion (``docs/existing-buckets.md``). The first bucket is the
        default one (``BucketName``).
    processors : sequence of s3ingest_cdk.ProcessorConfig, optional
        Several named processors (the ``processors`` setting), each with its key filters and
        delivery mode: the team's own Lambda function (``function`` or ``function_arn``,
        invoked synchronously under the claim, with ``lambda:InvokeFunction`` on exactly that
        function), a handler of the bundle the pipeline deploys as its own function
        (``handler``), or an in-process module (``module``). The functions that run them get
        ``PROCESSORS`` (JSON) and timeouts of at least the longest processor function's plus
        15 s. Not with ``processor``.
    processor_policy_statements : sequence of aws_cdk.aws_iam.PolicyStatement, optional
        Added to the roles of the functions that run the in-process processors (``processor``
        or ``module`` entries), for what those need beyond the landing and output buckets.
    code : aws_cdk.aws_lambda.Code, optional
        The functions' code; the bundled ``s3ingest_fn`` package by default (with the
        processor's package), built without Docker (:mod:`s3ingest_cdk.bundling`).
    bundle_cache_dir : str or os.PathLike, optional
        Where the functions' package and its dependencies are built and cached; by default
        ``<outdir>/.s3ingest-build`` (the app's ``cdk.out``), never the app's source folder. Name
        a directory that outlives ``cdk.out`` to keep the cache across clean synths.
    publish_outputs : bool, default True
        Add the outputs the CLI reads to the stack, named with the stage (``s3ingest --stack
        NAME [--pipeline STAGE]``, :mod:`s3ingest_cdk.discovery`).
    **overrides
        Any other field of :class:`s3ingest.settings.Settings` by name (``stage``,
        ``processor``, ``hold``, ``operator_role_arns``, ...; ``docs/settings.md`` gives each
        one's meaning, unit and bounds), replacing that of ``settings``.

    Raises
    ------
    s3ingest.settings.SettingsError
        Listing every invalid setting (a bucket name is checked only when it is not a token).
    s3ingest.settings.UnknownKeywordError
        For keywords that are no setting: a ``SettingsError`` (each keyword with the closest
        setting's name, as an unknown ``cdk.json`` key gets) that is also a ``TypeError``.
    ValueError
        When ``settings.bucket_name`` is set.

    Attributes
    ----------
    settings, bucket, table, queue, dead_letter_queue, ingest_function, topic, bus
        The validated settings and the shared resources (``bus``: ``change_stream`` only).
    ingestion, reconciliation, monitoring, backfilling, listing, reprocess, change_stream
        The features (:mod:`s3ingest_cdk.features`); ``backfilling`` (every bucket with an
        inventory) and ``change_stream`` may be None.
    landings, bucket_setup
        Every landing bucket and the shared buckets; the existing buckets' setup provider.
    state_machines : dict[str, aws_cdk.aws_stepfunctions.StateMachine]
        ``"backfill"`` (inventory), ``"backfill-listing"``, ``"reprocess"`` and
        (``reconcile_fan_out``) ``"reconcile"``.
    functions : dict[str, aws_cdk.aws_lambda.Function]
        Every function, by role: ``ingest``, ``reconcile``, ``delivery-check`` and, when
        deployed, ``reconcile-fan-out``, ``backfill-control``, ``backfill``, ``change-relay``.
    remote_sources : s3ingest_cdk.remote.RemoteSources or None
        The central side of the buckets of other accounts (``BucketSpec.account``): the
        default bus's statement, their inventories' delivery (``docs/organisation.md``).
    remote_read_roles : dict[str, str]
        Each bucket of another account's read role ARN, by bucket name (the ``READ_ROLES`` of
        :attr:`bucket_readers`, the ``RemoteReadRoleArns`` output).
    bucket_readers : list of str
        The functions (names of :attr:`functions`) that read those buckets, the only ones
        that may assume their read roles (empty without buckets of other accounts).
    landing, ledger, processor_output, ingest_queue, routing, ingest, reconcile,
    reconcile_fan_out, reconcile_state_machine, reconcile_schedule, drift, backfill_control,
    backfill, batch_operations, backfill_state_machine, change_bus, change_relay,
    change_source, delivery_check, alarm_topic, alarms, dashboard
        The small constructs the features compose (each documents its own attributes).
    ingest_service_functions : list[aws_cdk.aws_lambda.Function]
        The functions that apply the ledger rules and so run the processor.
    processing : s3ingest_cdk.features.processors.Processors or None
        The processor functions deployed for ``handler`` entries (``processing.functions``, by
        processor name), when there are any.
    processor_functions : dict[str, aws_cdk.aws_lambda.Function]
        The same functions, by processor name (empty without ``handler`` entries).
    encryption_key : aws_cdk.aws_kms.IKey or None
        The ``kms_key_arn`` key (created or imported) every encryptable resource uses
        (``docs/encryption.md``); None without it.
    key_grants, bucket_key_grants : dict[str, list[str]]
        The key actions granted on ``encryption_key``, and the adopted buckets' key ARNs
        granted ``kms:Decrypt``, by role construct path.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        settings: Settings | None = None,
        *,
        bucket: s3.IBucket | None = None,
        buckets: Sequence[BucketSpec | LandingBucketSource] = (),
        processors: Sequence[ProcessorConfig] = (),
        processor_policy_statements: Sequence[iam.PolicyStatement] = (),
        code: lambda_.Code | None = None,
        bundle_cache_dir: str | PathLike[str] | None = None,
        publish_outputs: bool = True,
        **overrides: Any,
    ) -> None:
        base = replace(settings or Settings(), **setting_overrides(overrides))
        if base.bucket_name is not None:
            raise ValueError(
                "settings.bucket_name: give that bucket as `bucket` or in `buckets` "
                "(S3IngestPipeline.from_settings imports it)"
            )
        if not buckets:
            buckets = base.buckets
        if not processors:
            processors = [ProcessorConfig.from_entry(e) for e in base.processors]
        if not processor_policy_statements:
            processor_policy_statements = [
                iam.PolicyStatement.from_json(statement)
                for statement in base.processor_policy_statements
            ]
        super().__init__(scope, construct_id)
        self._bundle_cache_dir = bundle_cache_dir
        pin_flags(self)  # before any child: the team's feature flags decide nothing below
        if bucket is not None and buckets:
            raise SettingsError(["bucket and buckets are both given: list the bucket in buckets"])
        bucket_name = bucket.bucket_name if bucket is not None else None
        entries, problems = processor_entries(processors)
        statements = [statement.to_json() for statement in processor_policy_statements]
        # The entries' buckets of the app, by index; their specs carry the buckets' names.
        given: dict[int, s3.IBucket] = {}
        specs: list[BucketSpec] = []
        for index, entry in enumerate(buckets):
            if isinstance(entry, LandingBucketSource):
                given[index] = entry.bucket
                specs.append(replace(entry.spec, name=entry.bucket.bucket_name, existing=True))
            else:
                specs.append(entry)
        # The team's resources stand for their settings: the bucket's name, the buckets, the
        # processors and statements as given.
        settings = replace(
            base,
            bucket_name=bucket_name,
            buckets=tuple(specs),
            processors=tuple(entries),
            processor_policy_statements=tuple(statements),
        )
        problems.extend(
            props_problems(
                self,
                settings,
                given_bucket=bucket is not None,
                statements=processor_policy_statements,
            )
        )
        if problems:
            raise SettingsError(problems)
        self.settings = settings
        self.processor_policy_statements = tuple(processor_policy_statements)
        if bucket is not None:
            # The team's bucket as before: used as is, not reconfigured, no inventory.
            sources: list[tuple[BucketSpec, s3.IBucket | None, bool]] = [
                (
                    BucketSpec(
                        name=bucket_name, existing=True, inventory=False, event_bridge=False
                    ),
                    bucket,
                    False,
                )
            ]
        else:
            # another account's bucket is set up by its own account's source stack
            sources = [
                (spec, given.get(index), not spec.remote)
                for index, spec in enumerate(settings.bucket_specs)
            ]
        self._compose(settings, sources, code)
        if publish_outputs:
            publish(self, settings.stage, self.outputs())

    @classmethod
    def from_settings(
        cls,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        bucket: s3.IBucket | None = None,
        code: lambda_.Code | None = None,
        bundle_cache_dir: str | PathLike[str] | None = None,
        publish_outputs: bool = True,
    ) -> S3IngestPipeline:
        """The pipeline of already validated ``settings`` (``cdk.json`` context, read by
        :func:`s3ingest_cdk.compose.settings_from_app`); ``bucket`` stands for
        ``settings.bucket_name`` (None: the pipeline creates it), set up as an existing bucket
        (EventBridge delivery and, with ``inventory_enabled``, the pipeline's own inventory).
        ``settings.buckets`` are imported by name (existing) or created.

        Raises
        ------
        ValueError
            When ``settings.bucket_name`` is set and no ``bucket`` is given, or the reverse.
        """
        if (settings.bucket_name is None) != (bucket is None):
            raise ValueError("give bucket exactly when settings.bucket_name is set")
        entries: list[BucketSpec | LandingBucketSource] = list(settings.buckets)
        if bucket is not None:
            entries = [LandingBucketSource(settings.bucket_specs[0], bucket)]
        return cls(
            scope,
            construct_id,
            settings=replace(settings, bucket_name=None),
            buckets=entries,
            code=code,
            bundle_cache_dir=bundle_cache_dir,
            publish_outputs=publish_outputs,
        )

    def _compose(
        self,
        settings: Settings,
        sources: list[tuple[BucketSpec, s3.IBucket | None, bool]],
        code: lambda_.Code | None,
    ) -> None:
        """Every feature, in the order their constructs are added (logical ids do not depend
        on it; the order of policy statements and dependencies does)."""
        #: The bundled package (None: the caller's ``code``, used by every role as it is).
        self._bundled: lambda_.Code | None = None
        self._role_codes: dict[tuple[str, ...], lambda_.Code] = {}
        if code is None:
            code = self._bundled = self._function_code(settings)
        self._landing_buckets(settings, sources, code)
        output_bucket, processors = self._shared_state(settings, code)
        given = Given(settings, code, self.landings, self.table, output_bucket, processors)
        self._ingestion(given)
        self._runs(given)
        self._change_stream(settings, code)
        self._monitoring(given)
        self._index_functions(settings)
        self._read_remote_buckets()
        #: Owners, not names: every function knows each bucket's owner (``BUCKET_OWNERS``: the
        #: ``ExpectedBucketOwner`` of its S3 calls, the ``account`` an event must carry), and no
        #: function's own role reaches a bucket of a landing bucket's name in another account.
        self._expect_owners()
        #: ``logKeys``: every function's LOG_KEYS, the hash key's secret, the machines' logs.
        self.log_keys = LogKeys(
            self,
            "LogKeys",
            settings=settings,
            functions=self.functions,
            state_machines=self.state_machines,
        )
        self._encrypt(settings)
        #: Service statements CDK wrote with ``aws:SourceArn`` only, held to this account too.
        self.held_to_account = hold_to_account(self)

    def role_code(self, packages: tuple[str, ...], code: lambda_.Code) -> lambda_.Code:
        """The code of a role with its own ``packages``
        (:attr:`~s3ingest.function_roles.FunctionRole.packages`) for the pipeline's ``code``:
        the bundled package with them (one asset per set of packages), or ``code`` as it is when
        it is not the bundled one (the caller's ``code``: what it holds is the caller's)."""
        if not packages or self._bundled is None or code is not self._bundled:
            return code
        if packages not in self._role_codes:
            self._role_codes[packages] = self._function_code(self.settings, packages)
        return self._role_codes[packages]

    def _function_code(self, settings: Settings, packages: tuple[str, ...] = ()) -> lambda_.Code:
        """The bundled functions' package, with the processors' sources and requirements
        (:mod:`s3ingest_cdk.bundling`) and a role's own ``packages``; the bundler's notes as
        info annotations (the processors' imports are checked in the package without
        ``packages``)."""
        extra = (
            processors_sources(settings.processor_entries(), settings.processor_package_dir)
            if settings.processors
            else processor_sources(settings.processor, settings.processor_package_dir)
        )
        imports = {
            f"processors[{index}].{key}": entry[key]
            for index, entry in enumerate(settings.processor_entries())
            for key in ("module", "handler")
            if key in entry and settings.processors
        }
        if settings.processor is not None and not settings.processors:
            imports["processor"] = settings.processor
        notes: list[str] = []
        code = function_code(
            cache_dir=build_cache(self, self._bundle_cache_dir),
            extra_sources=extra,
            requirements=processor_requirements(settings.processor_package_dir),
            imports={} if packages else imports,
            notes=notes,
            tracing=settings.tracing,
            packages=packages,
        )
        for note in notes:
            Annotations.of(self).add_info(note)
        return code

    def _landing_buckets(
        self,
        settings: Settings,
        sources: list[tuple[BucketSpec, s3.IBucket | None, bool]],
        code: lambda_.Code,
    ) -> None:
        """The ``kmsKeyArn`` key, the landing buckets (with the existing ones' set-up provider)
        and the central side of the buckets of other accounts."""
        #: ``kmsKeyArn``: the key every encryptable resource uses (None: each service's own).
        # (its policy admits the inventory reports of the buckets of other accounts)
        self.encryption_key: kms.IKey | None = attach_key(
            self, settings.kms_key_arn, settings.stage, remote_inventories(s for s, _, _ in sources)
        )
        self.bucket_setup: BucketSetupProvider | None = None
        if any(spec.existing and set_up for spec, _, set_up in sources):
            self.bucket_setup = BucketSetupProvider(
                self, "BucketSetup", code=code, log_retention_days=settings.log_retention_days
            )
        entries: list[LandingBucket] = []
        for index, (spec, given, set_up) in enumerate(sources):
            entries.append(
                LandingBucket(
                    self,
                    spec.construct_id(index),
                    spec=spec,
                    bucket=given,
                    shared=entries[0].shared if entries else None,
                    setup=self.bucket_setup if set_up else None,
                )
            )
        self.landings = Landings(entries=tuple(entries), shared=entries[0].shared)
        self.landing = entries[0]
        own_inventory = [
            e.bucket for e in entries if e.inventory_bucket is not None and not e.spec.remote
        ]
        if own_inventory:
            allow_inventory_delivery(self.landings.shared.inventory, own_inventory)
        #: Buckets of other accounts: the default bus's statement, their inventories' delivery,
        #: the role of each one's account the pipeline assumes to read it (by bucket name).
        self.remote_read_roles: dict[str, str] = {
            e.bucket.bucket_name: read_role_arn(e.spec, self) for e in entries if e.spec.remote
        }
        self.remote_sources: RemoteSources | None = None
        if any(spec.remote or spec.region is not None for spec, _, _ in sources):
            self.remote_sources = RemoteSources(
                self,
                "RemoteSources",
                stage=settings.stage,
                entries=[(e.spec, e.bucket) for e in entries],
                inventory=self.landings.shared.inventory,
            )
        self.bucket: s3.IBucket = self.landing.bucket

    def _shared_state(
        self, settings: Settings, code: lambda_.Code
    ) -> tuple[s3.IBucket | None, IngestProcessors]:
        """The ledger, the processor output bucket and the deployed processor functions; returns
        the output bucket (None without an in-process or deployed processor) and what the
        processors give the functions that run them."""
        self.ledger = LedgerTable(
            self,
            "Ledger",
            stream=_stream_view(stack_resources.ledger(settings).stream_view),
            warm_write_units=settings.ledger_warm_write_units,
        )
        self.table: dynamodb.Table = self.ledger.table
        self.processor_output: ProcessorOutputBucket | None = None
        # In-process processors and the deployed processor functions write to it.
        if any("module" in e or "handler" in e for e in settings.processor_entries()):
            self.processor_output = ProcessorOutputBucket(
                self, "ProcessorOutput", access_logs_bucket=self.landing.access_logs_bucket
            )
        output_bucket = self.processor_output.bucket if self.processor_output else None
        self.processing: Processors | None = None
        self.processor_functions: dict[str, lambda_.Function] = {}
        if any("handler" in e for e in settings.processor_entries()):
            self.processing = Processors(
                self, "Processors", settings=settings, code=code, output_bucket=output_bucket
            )
            self.processor_functions = {
                name: owner.function for name, owner in self.processing.functions.items()
            }
        processors = ingest_processors(
            self, settings, self.processor_functions, self.processor_policy_statements
        )
        #: Every processor's name (``default``: the single ``processor`` setting).
        self.processor_names: list[str] = [e["name"] for e in settings.processor_entries()]
        self.settings_processor_entries = settings.processor_entries()
        return output_bucket, processors

    def _ingestion(self, given: Given) -> None:
        """The ingestion and reconciliation features, and who may send to the ingest queue."""
        self.ingestion = Ingestion(self, "Ingestion", given=given)
        self.ingest_queue = self.ingestion.ingest_queue
        self.routing = self.ingestion.routing
        self.ingest = self.ingestion.ingest
        self.queue: sqs.Queue = self.ingest_queue.queue
        self.dead_letter_queue: sqs.Queue = self.ingest_queue.dead_letter_queue
        self.ingest_function: lambda_.Function = self.ingest.function
        self.reconciliation = Reconciliation(self, "Reconciliation", given=given, queue=self.queue)
        self.reconcile = self.reconciliation.reconcile
        self.reconcile_fan_out = self.reconciliation.reconcile_fan_out
        self.reconcile_state_machine = self.reconciliation.reconcile_state_machine
        self.reconcile_schedule = self.reconciliation.reconcile_schedule
        self.drift = self.reconciliation.drift
        # Only the ingest rule, the roles granted sqs:SendMessage on the queue (reconciliation's
        # repairs) and the operators (a redrive) may send to the ingest queue.
        self.ingest_queue.admit_only(
            rules=[self.routing.rule],
            roles=self.reconciliation.queue_senders,
            operator_role_arns=given.settings.operator_role_arns,
        )
        self.ingest_service_functions: list[lambda_.Function] = [self.ingest_function]

    def _change_stream(self, settings: Settings, code: lambda_.Code) -> None:
        """The change-stream feature (``change_stream`` only)."""
        self.change_stream: ChangeStream | None = None
        if settings.change_stream:
            self.change_stream = ChangeStream(
                self, "ChangeStream", settings=settings, code=code, ledger_table=self.table
            )
        self.change_bus = self.change_stream.change_bus if self.change_stream else None
        self.change_relay = self.change_stream.change_relay if self.change_stream else None
        self.change_source = self.change_stream.change_source if self.change_stream else None
        self.bus: events.EventBus | None = self.change_bus.bus if self.change_bus else None
        #: ``historyTable``: the history table's writer, database and queries.
        self.history: History | None = None
        if settings.history_table and self.bus is not None:
            self.history = History(
                self,
                "History",
                settings=settings,
                code=code,
                bus=self.bus,
                bucket=self.landings.shared.inventory,
            )

    def _monitoring(self, given: Given) -> None:
        """The monitoring feature (alarms, dashboard, delivery check) over the others."""
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            given=given,
            ingestion=self.ingestion,
            reconciliation=self.reconciliation,
            backfill=self.backfilling,
            change_stream=self.change_stream,
            history=self.history,
            listing=self.listing,
            reprocess=self.reprocess,
        )
        # Dead letters are evidence: kept when the stack is deleted (the logical ids unchanged).
        for dead_letter_queue in self.monitoring.dead_letter_queues.values():
            dead_letter_queue.apply_removal_policy(RemovalPolicy.RETAIN)
        self.delivery_check = self.monitoring.delivery_check
        self.alarm_topic = self.monitoring.alarm_topic
        self.alarms = self.monitoring.alarms
        self.dashboard = self.monitoring.dashboard
        self.topic: sns.Topic = self.alarm_topic.topic

    def _index_functions(self, settings: Settings) -> None:
        """:attr:`state_machines` and :attr:`functions` by name, and the reconcile functions'
        view of the processors (``PROCESSOR_TARGETS``, ``PROCESSOR_NAMES``)."""
        self.state_machines: dict[str, sfn.StateMachine] = {}
        if self.backfill_state_machine is not None:
            self.state_machines["backfill"] = self.backfill_state_machine.state_machine
        self.state_machines["backfill-listing"] = self.listing.state_machine.state_machine
        self.state_machines["reprocess"] = self.reprocess.state_machine.state_machine
        if self.reconcile_state_machine is not None:
            self.state_machines["reconcile"] = self.reconcile_state_machine.state_machine
        self.functions: dict[str, lambda_.Function] = {
            name: owner.function
            for name, owner in (
                ("ingest", self.ingest),
                ("reconcile", self.reconcile),
                ("reconcile-fan-out", self.reconcile_fan_out),
                ("backfill-control", self.backfill_control),
                ("backfill", self.backfill),
                ("change-relay", self.change_relay),
                ("history", self.history.writer if self.history else None),
                ("delivery-check", self.delivery_check),
                ("listing-plan", self.listing.plan),
                ("listing-shard", self.listing.shard),
                ("listing-summarize", self.listing.summarize),
                ("reprocess-plan", self.reprocess.plan),
                ("reprocess-segment", self.reprocess.segment),
                ("reprocess-summarize", self.reprocess.summarize),
            )
            if owner is not None
        }
        reconcilers = [
            self.functions[role]
            for role in ("reconcile", "reconcile-fan-out", "backfill-control")
            if role in self.functions
        ]
        if self.processor_names:
            # reconciliation counts the rows behind each processor (its version and filters,
            # not its code): docs/reprocess.md
            targets = fn_config.targets_json(settings.processor_entries())
            for function in reconcilers:
                function.add_environment(fn_config.PROCESSOR_TARGETS, targets)
        if any(n != DEFAULT_PROCESSOR_NAME for n in self.processor_names):
            # reconciliation reads each processor's effect state with the row (its Scan
            # projection names the attributes): docs/effects.md
            for function in reconcilers:
                function.add_environment(fn_config.PROCESSOR_NAMES, ",".join(self.processor_names))

    def _read_remote_buckets(self) -> None:
        """Buckets of other accounts: every function that reads them (its role names them:
        :func:`~s3ingest_cdk.remote.reads_buckets`) knows the role to read each one with
        (``READ_ROLES``, :class:`s3ingest_fn.config.ClientConfig`) and may assume it; the
        others (the change relay, the planners and summaries) may not."""
        self.bucket_readers: list[str] = []
        if not self.remote_read_roles:
            return
        roles = Stack.of(self).to_json_string(self.remote_read_roles)
        assume = iam.PolicyStatement(
            actions=["sts:AssumeRole"], resources=sorted(set(self.remote_read_roles.values()))
        )
        remote_arns = [e.bucket.bucket_arn for e in self.landings.entries if e.spec.remote]
        self.bucket_readers = [
            name for name, f in self.functions.items() if reads_buckets(f, remote_arns)
        ]
        for function in (self.functions[name] for name in self.bucket_readers):
            function.add_environment(fn_config.READ_ROLES, roles)
            # the identity half of the cross-account trust (the read role's trust is the
            # other): https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_common-scenarios_aws-accounts.html
            function.add_to_role_policy(assume)

    def _expect_owners(self) -> None:
        """``BUCKET_OWNERS`` (:meth:`Landings.owners_json`) on every function that reads a
        bucket (all but the change relay), and on each one's role the inline policy of
        :func:`~s3ingest_cdk.owners.guard_role` over the stack's own landing buckets (a remote
        bucket is read through its account's role, whose policy holds the same condition:
        :class:`s3ingest_cdk.source.S3IngestSource`)."""
        owners = self.landings.owners_json(self)
        own = [e.bucket for e in self.landings.entries if not e.spec.remote]
        guarded: set[str] = set()
        for role, function in self.functions.items():
            if role == "change-relay":  # reads the ledger's stream, no bucket
                continue
            function.add_environment(fn_config.BUCKET_OWNERS, owners)
            if own and function.role is not None and function.role.node.path not in guarded:
                guarded.add(function.role.node.path)
                guard_role(function.role, own)

    def _encrypt(self, settings: Settings) -> None:
        """``kmsKeyArn`` on every resource and the key grants each role's policy needs; the
        adopted buckets' own keys (``buckets[].kmsKeyArn``) to the roles that read them."""
        #: The key actions granted, by role path (``kmsKeyArn`` only).
        self.key_grants: dict[str, list[str]] = {}
        if self.encryption_key is not None:
            encrypt_everything(self, self.encryption_key)
            self.key_grants = grant_key_use(self, self.encryption_key)
        # A bucket of the app (``bucket``, ``LandingBucketSource``) brings its own key, if any.
        bucket_keys: list[tuple[str, list[str]]] = []
        for entry in self.landings.entries:
            own = entry.bucket.encryption_key if not entry.owned else None
            key_arn = entry.spec.kms_key_arn or (own.key_arn if own is not None else None)
            # a bucket of another account is read through its account's role, which its
            # source stack grants the key (S3IngestSource): nothing to grant here
            if key_arn is not None and not entry.spec.remote:
                bucket_keys.append((key_arn, [entry.bucket.bucket_arn]))
        #: The adopted buckets' key ARNs granted ``kms:Decrypt``, by role path.
        self.bucket_key_grants: dict[str, list[str]] = grant_bucket_keys(self, bucket_keys)

    def _runs(self, given: Given) -> None:
        """The inventory backfill, only when every bucket has an inventory (the manifest the job
        reads); the listing backfill and the reprocess run (every stack)."""
        dead_letter_queue = self.dead_letter_queue
        self.backfilling: Backfill | None = None
        if self.landings.all_inventoried:
            self.backfilling = Backfill(
                self, "Backfill", given=given, queue=self.queue, dead_letter_queue=dead_letter_queue
            )
            self.ingest_service_functions.extend(self.backfilling.ingest_service_functions)
        backfilling = self.backfilling
        self.backfill_control = backfilling.backfill_control if backfilling else None
        self.backfill = backfilling.backfill if backfilling else None
        self.batch_operations = backfilling.batch_operations if backfilling else None
        self.backfill_state_machine = backfilling.backfill_state_machine if backfilling else None
        self.listing = ListingBackfill(
            self, "Listing", given=given, dead_letter_queue=dead_letter_queue
        )
        self.ingest_service_functions.extend(self.listing.ingest_service_functions)
        self.reprocess = Reprocess(
            self, "Reprocess", given=given, dead_letter_queue=dead_letter_queue
        )
        self.ingest_service_functions.extend(self.reprocess.ingest_service_functions)

    def outputs(self) -> dict[str, str]:
        """The values the operator CLI reads (``s3ingest --stack``), by output name
        (:mod:`s3ingest.outputs`): the pipeline publishes them on its stack with its stage's
        prefix (``publish_outputs``); :class:`s3ingest_cdk.stack.S3IngestStack` declares them
        under these names."""
        stack, routing = Stack.of(self), self.routing
        outputs = {
            output.BUCKET_NAME: self.bucket.bucket_name,
            output.BUCKET_NAMES: ",".join(b.bucket_name for b in self.landings.buckets),
            output.BUCKET_SCOPE: self.landings.scope_json(self),
            output.QUEUE_URL: self.queue.queue_url,
            output.DEAD_LETTER_QUEUE_URL: self.dead_letter_queue.queue_url,
            output.EVENT_TARGET_DEAD_LETTER_QUEUE_URL: routing.target_dead_letter_queue.queue_url,
            output.LEDGER_TABLE_NAME: self.table.table_name,
            output.FUNCTION_NAME: self.ingest_function.function_name,
            output.ARCHIVE_NAME: routing.archive.archive_name,
            output.ARCHIVE_ARN: routing.archive.archive_arn,
            output.RULE_NAME: routing.rule.rule_name,
            output.RULE_ARN: routing.rule.rule_arn,
            output.ALARM_TOPIC_ARN: self.topic.topic_arn,
            output.DASHBOARD_NAME: self.dashboard.dashboard.dashboard_name,
        }
        # The stack's inventory bucket (every stack has it: inventories and checkpoints).
        inventory_bucket = self.landings.shared.inventory
        outputs[output.INVENTORY_BUCKET_NAME] = inventory_bucket.bucket_name
        if self.reconciliation.attestation_bucket is not None:
            outputs[output.ATTESTATION_BUCKET_NAME] = (
                self.reconciliation.attestation_bucket.bucket_name
            )
        outputs[output.RECONCILE_FUNCTION_NAME] = self.reconcile.function.function_name
        outputs[output.DRIFT_ALARM_NAME] = self.drift.alarm.alarm_name
        outputs[output.DELIVERY_CHECK_FUNCTION_NAME] = self.delivery_check.function.function_name
        arns = {name: machine.state_machine_arn for name, machine in self.state_machines.items()}
        if "reconcile" in arns:
            outputs[output.RECONCILE_STATE_MACHINE_ARN] = arns["reconcile"]
        if "backfill" in arns:
            outputs[output.BACKFILL_STATE_MACHINE_ARN] = arns["backfill"]
        outputs[output.LISTING_BACKFILL_STATE_MACHINE_ARN] = arns["backfill-listing"]
        outputs[output.REPROCESS_STATE_MACHINE_ARN] = arns["reprocess"]
        if self.backfill is not None and self.batch_operations is not None:
            outputs[output.BACKFILL_FUNCTION_NAME] = self.backfill.function.function_name
            outputs[output.BACKFILL_ROLE_ARN] = self.batch_operations.role.role_arn
            outputs[output.REPORT_BUCKET_NAME] = inventory_bucket.bucket_name
        if self.processor_output is not None:
            outputs[output.PROCESSOR_OUTPUT_BUCKET] = self.processor_output.bucket.bucket_name
        if self.processor_names:
            outputs[output.PROCESSOR_NAMES] = ",".join(self.processor_names)
            # each processor's version and filters: what `s3ingest explain` judges behind by
            outputs[output.PROCESSOR_TARGETS] = fn_config.targets_json(
                self.settings_processor_entries
            )
        # the processors a hold policy applies to ([]: none), what `s3ingest held` reports
        outputs[output.HOLD_PROCESSORS] = stack.to_json_string(
            hold_names(self.settings_processor_entries, self.settings.hold)
        )
        if self.processor_functions or any(
            "functionArn" in e for e in self.settings_processor_entries
        ):
            # the roles that invoke processor functions: what a function in another account
            # allows in its resource-based policy (docs/processor-api.md)
            outputs[output.PROCESSOR_INVOKER_ROLE_ARNS] = stack.to_json_string(
                [f.role.role_arn for f in self.ingest_service_functions if f.role is not None]
            )
        if self.processor_functions:
            outputs[output.PROCESSOR_FUNCTIONS] = stack.to_json_string(
                {name: f.function_arn for name, f in self.processor_functions.items()}
            )
        # the account that owns each landing bucket (the CLI's ExpectedBucketOwner)
        outputs[output.BUCKET_OWNERS] = self.landings.owners_json(self)
        if self.remote_read_roles:
            # the role of each remote bucket's account the pipeline assumes to read it
            outputs[output.REMOTE_READ_ROLE_ARNS] = stack.to_json_string(self.remote_read_roles)
        outputs[output.LOG_KEYS] = self.settings.log_keys  # what `s3ingest log-key` reads
        if self.log_keys.secret is not None:
            outputs[output.LOG_KEY_SECRET_ARN] = self.log_keys.secret.secret_arn
        if (bus := self.change_bus) is not None and (relay := self.change_relay) is not None:
            outputs[output.CHANGE_BUS_NAME] = bus.bus.event_bus_name
            outputs[output.CHANGE_BUS_ARN] = bus.bus.event_bus_arn
            outputs[output.CHANGE_ARCHIVE_NAME] = bus.archive.archive_name
            outputs[output.CHANGE_AUDIT_LOG_GROUP_NAME] = bus.audit_log_group.log_group_name
            outputs[output.CHANGE_DEAD_LETTER_QUEUE_URL] = relay.dead_letter_queue.queue_url
            outputs[output.CHANGE_RELAY_FUNCTION_NAME] = relay.function.function_name
        if (history := self.history) is not None:
            outputs[output.HISTORY_WORK_GROUP] = str(history.work_group.name)
            outputs[output.HISTORY_TABLE] = history.table
            outputs[output.HISTORY_DEAD_LETTER_QUEUE_URL] = history.dead_letter_queue.queue_url
            outputs[output.HISTORY_WRITER_FUNCTION_NAME] = history.writer.function.function_name
        return outputs


def _stream_view(view: str | None) -> dynamodb.StreamViewType | None:
    return dynamodb.StreamViewType(view) if view else None


def _keyword_signature() -> inspect.Signature:
    """``S3IngestPipeline.__init__``'s signature as ``help`` and editors show it, derived from
    the settings model: ``scope``, ``construct_id`` and ``settings``, then ``bucket`` and one
    keyword per :class:`~s3ingest.settings.Settings` field but ``bucket_name`` (its default the
    field's), then ``code``, ``bundle_cache_dir`` and ``publish_outputs``."""
    real = inspect.signature(S3IngestPipeline.__init__, follow_wrapped=False).parameters
    return inspect.Signature(
        [
            *(real[name] for name in ("self", "scope", "construct_id", "settings", "bucket")),
            *keyword_parameters(Settings, exclude={"bucket_name"}),
            real["code"],
            real["bundle_cache_dir"],
            real["publish_outputs"],
        ]
    )


S3IngestPipeline.__init__.__signature__ = _keyword_signature()  # type: ignore[attr-defined]
