"""The landing buckets: :class:`BucketSpec` (one ``buckets`` entry, created or existing, with its
key filters), an owner's existing S3 Inventory (:class:`InventoryRef`), and where the stack's
own inventory reports land.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from s3ingest.settings.context import to_bool

#: A valid S3 bucket name (3 to 63 lower-case letters, digits, dots and hyphens).
BUCKET_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_CONSTRUCT_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,63}$")
_INVENTORY_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
#: An AWS account id (12 digits), a commercial-style Region name, an IAM role ARN.
ACCOUNT_RE = re.compile(r"^[0-9]{12}$")
REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]$")
ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}$")
#: The name of the read role the source stack creates in a bucket's account
#: (:func:`source_read_role_name`): one per account and Region (IAM names are per account).
SOURCE_READ_ROLE_PREFIX = "s3ingest-source-read-"
#: Fields of one ``buckets`` entry (context form).
BUCKET_FIELDS = (
    "name",
    "existing",
    "id",
    "versioned",
    "prefixes",
    "suffixes",
    "inventory",
    "eventBridge",
    "kmsKeyArn",
    "account",
    "region",
    "readRoleArn",
)

#: A KMS key ARN in any partition, by key id (not an alias: a grant names the key itself)
#: (https://docs.aws.amazon.com/kms/latest/developerguide/concepts.html#key-id-key-ARN).
KMS_KEY_ARN_RE = re.compile(
    r"^arn:aws(-[a-z]+)*:kms:[a-z]{2}(-[a-z]+)+-\d:\d{12}:key/[A-Za-z0-9-]{1,128}$"
)
#: ``kmsKeyArn``'s value for a key the stack creates.
CREATE_KEY = "create"


def kms_key_problems(where: str, value: str | None, *, allow_create: bool) -> list[str]:
    """The problem of a ``kmsKeyArn`` value (empty when valid): ``None``, a key ARN or, with
    ``allow_create``, :data:`CREATE_KEY`."""
    if value is None or (allow_create and value == CREATE_KEY) or KMS_KEY_ARN_RE.match(value):
        return []
    also = f' or "{CREATE_KEY}"' if allow_create else ""
    return [
        f"{where}: {value!r} is not a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>){also}"
    ]


#: Where the stack's S3 Inventory reports land in the inventory bucket, and the id of the
#: inventory configuration: S3 writes ``<prefix>/<source bucket>/<configuration id>/<date>/``
#: (https://docs.aws.amazon.com/AmazonS3/latest/userguide/storage-inventory-location.html).
INVENTORY_PREFIX = "inventory"
INVENTORY_ID = "s3ingest-daily"


@dataclass(frozen=True)
class InventoryRef:
    """An S3 Inventory configuration the bucket's owner already has, used instead of the
    stack's own: reports under ``s3://<bucket>/<prefix>/<source bucket>/<id>/``
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/storage-inventory-location.html).
    It must be a CSV inventory with the ``Size``, ``LastModifiedDate`` and ``ETag`` fields (and,
    for a versioned bucket, all versions)."""

    id: str
    bucket: str
    prefix: str = ""

    def report_prefix(self, source_bucket: str) -> str:
        """The folder holding one dated folder per report of ``source_bucket``."""
        head = f"{self.prefix.strip('/')}/" if self.prefix.strip("/") else ""
        return f"{head}{source_bucket}/{self.id}/"


@dataclass(frozen=True)
class BucketSpec:
    """One landing bucket of the stack (a ``buckets`` entry).

    Attributes
    ----------
    name : str or None
        The bucket's name: required for an existing bucket; for a created one, ``None`` lets
        CloudFormation name it.
    existing : bool
        The bucket exists already (adopted): the stack switches on its EventBridge delivery
        (``event_bridge``) and adds its inventory configuration, and changes nothing else.
    id : str or None
        Construct id of the bucket's resources (letters and digits); logical ids derive from it,
        so keep it stable. Default :meth:`construct_id`.
    versioned : bool
        Versioning on a bucket the stack creates (an existing bucket keeps its own).
    prefixes, suffixes : tuple of str
        Key filters (decoded keys): only keys with one of the prefixes and one of the suffixes
        are tracked (:mod:`s3ingest_fn.core.scope`). Empty: every key.
    inventory : bool or InventoryRef
        ``True``: the stack's own daily S3 Inventory (configuration id ``s3ingest-daily``, to the
        stack's inventory bucket); an :class:`InventoryRef`: an existing configuration; ``False``:
        none (reconciliation lists the bucket, no inventory backfill).
    event_bridge : bool
        Existing buckets: the stack switches on "Send notifications to Amazon EventBridge" and
        leaves it as found on deletion. ``False``: the bucket's owner does (``s3ingest onboard``
        checks it).
    kms_key_arn : str or None
        Existing buckets encrypted with SSE-KMS under a customer-managed key: that key's ARN.
        ``kms:Decrypt`` on it goes to exactly the roles that read the bucket's objects (ingest,
        reconciliation, the backfills, the presigning roles of processors;
        ``docs/encryption.md``); the key's policy must allow this account. A bucket the stack
        creates is encrypted with the stack's ``kmsKeyArn`` instead.
    account : str or None
        The AWS account (12 digits) that owns an existing bucket, when it is not the stack's
        (``docs/organisation.md``): its source stack (:class:`s3ingest_cdk.S3IngestSource`)
        forwards its events and sets up its inventory; the pipeline does not set it up itself.
    region : str or None
        The bucket's Region; a bucket in another Region than the stack's is refused (one
        pipeline per Region). ``None``: the stack's.
    read_role_arn : str or None
        The role of the bucket's account the pipeline assumes to read it; ``None``: the source
        stack's default, ``arn:aws:iam::<account>:role/s3ingest-source-read-<region>``.
    """

    name: str | None = None
    existing: bool = False
    id: str | None = None
    versioned: bool = True
    prefixes: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()
    inventory: bool | InventoryRef = True
    event_bridge: bool = True
    kms_key_arn: str | None = None
    account: str | None = None
    region: str | None = None
    read_role_arn: str | None = None

    @property
    def remote(self) -> bool:
        """Whether the entry names the account that owns the bucket (another account's)."""
        return self.account is not None

    def construct_id(self, index: int) -> str:
        """``id``, else ``"Landing"`` for the first bucket and ``"Landing<index + 1>"`` after
        (the single-bucket stack's ids stay those of earlier releases)."""
        if self.id:
            return self.id
        return "Landing" if index == 0 else f"Landing{index + 1}"

    def contains(self, key: str) -> bool:
        """Whether ``key`` (decoded) passes the key filters (:mod:`s3ingest_fn.core.scope`)."""
        if not self.prefixes and not self.suffixes:
            return True
        return any(
            key.startswith(p) and key.endswith(x) and len(key) >= len(p) + len(x)
            for p in self.prefixes or ("",)
            for x in self.suffixes or ("",)
        )

    @property
    def has_inventory(self) -> bool:
        """Whether an inventory (the stack's own or an existing one) covers the bucket."""
        return self.inventory is not False

    def report_prefix(self, bucket_name: str | None = None) -> str | None:
        """Where the bucket's inventory reports land in their destination bucket, or None."""
        name = bucket_name or self.name or ""
        if isinstance(self.inventory, InventoryRef):
            return self.inventory.report_prefix(name)
        return inventory_report_prefix(name) if self.inventory else None

    def scope_entry(self, bucket_name: str | None = None) -> dict[str, Any]:
        """``{"name", "prefixes", "suffixes"}`` (``SCOPE``'s entry; ``bucket_name`` for a
        created bucket's token)."""
        return {
            "name": bucket_name or self.name,
            "prefixes": list(self.prefixes),
            "suffixes": list(self.suffixes),
        }

    def to_context(self) -> dict[str, Any]:
        """The context form (``cdk.json``'s ``buckets`` entry), without defaulted fields."""
        out: dict[str, Any] = {}
        if self.name is not None:
            out["name"] = self.name
        if self.existing:
            out["existing"] = True
        if self.id is not None:
            out["id"] = self.id
        if not self.versioned:
            out["versioned"] = False
        if self.prefixes:
            out["prefixes"] = list(self.prefixes)
        if self.suffixes:
            out["suffixes"] = list(self.suffixes)
        if isinstance(self.inventory, InventoryRef):
            out["inventory"] = asdict(self.inventory)
        elif not self.inventory:
            out["inventory"] = False
        if not self.event_bridge:
            out["eventBridge"] = False
        if self.kms_key_arn is not None:
            out["kmsKeyArn"] = self.kms_key_arn
        for key, value in (
            ("account", self.account),
            ("region", self.region),
            ("readRoleArn", self.read_role_arn),
        ):
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_context(cls, raw: Any, where: str) -> tuple[BucketSpec | None, list[str]]:
        """One entry from its context form; ``(None, problems)`` when it cannot be read.
        ``where`` names it in the problems (``"buckets[0]"``)."""
        if not isinstance(raw, Mapping):
            return None, [f"{where}: expected an object, got {raw!r}"]
        problems = [
            f"{where}.{k}: unknown field (known: {', '.join(BUCKET_FIELDS)})"
            for k in raw
            if k not in BUCKET_FIELDS
        ]
        flags: dict[str, bool] = {}
        for key, default in (("existing", False), ("versioned", True), ("eventBridge", True)):
            flag = to_bool(raw.get(key, default))
            if flag is None:
                problems.append(f"{where}.{key}: expected true or false, got {raw.get(key)!r}")
            flags[key] = default if flag is None else flag
        filters: dict[str, tuple[str, ...]] = {}
        for key in ("prefixes", "suffixes"):
            values = raw.get(key) or []
            if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
                problems.append(f"{where}.{key}: expected a list of non-empty strings")
                values = []
            filters[key] = tuple(values)
        inventory: bool | InventoryRef = True
        raw_inventory = raw.get("inventory", True)
        if isinstance(raw_inventory, Mapping):
            unknown = sorted(set(raw_inventory) - {"id", "bucket", "prefix"})
            if unknown or not raw_inventory.get("id") or not raw_inventory.get("bucket"):
                problems.append(
                    f"{where}.inventory: an existing configuration is "
                    '{"id": ..., "bucket": ..., "prefix": ...} (id and bucket required)'
                )
            else:
                inventory = InventoryRef(
                    str(raw_inventory["id"]),
                    str(raw_inventory["bucket"]),
                    str(raw_inventory.get("prefix") or ""),
                )
        else:
            flag = to_bool(raw_inventory)
            if flag is None:
                problems.append(
                    f"{where}.inventory: expected true, false or an existing configuration"
                )
            inventory = True if flag is None else flag
        name = raw.get("name")
        ident = raw.get("id")
        key_arn = raw.get("kmsKeyArn")
        texts: dict[str, str | None] = {}
        for key in ("account", "region", "readRoleArn"):
            value = raw.get(key)
            if value is not None and not isinstance(value, str):
                problems.append(f"{where}.{key}: expected a string, got {value!r}")
                value = None
            texts[key] = value or None
        spec = cls(
            name=None if name in (None, "") else str(name),
            existing=flags["existing"],
            id=None if ident in (None, "") else str(ident),
            versioned=flags["versioned"],
            prefixes=filters["prefixes"],
            suffixes=filters["suffixes"],
            inventory=inventory,
            event_bridge=flags["eventBridge"],
            kms_key_arn=None if key_arn in (None, "") else str(key_arn),
            account=texts["account"],
            region=texts["region"],
            read_role_arn=texts["readRoleArn"],
        )
        return spec, problems

    def problems(self, where: str) -> list[str]:
        """Every rule this entry breaks (empty when valid)."""
        p: list[str] = []
        if self.name is not None and not BUCKET_NAME_RE.match(self.name):
            p.append(f"{where}.name: {self.name!r} is not a valid S3 bucket name")
        if self.existing and self.name is None:
            p.append(f"{where}: an existing bucket needs its name")
        if self.id is not None and not _CONSTRUCT_ID_RE.match(self.id):
            p.append(f"{where}.id: {self.id!r} must be letters and digits, starting with a letter")
        p.extend(self._inventory_problems(where))
        p.extend(kms_key_problems(f"{where}.kmsKeyArn", self.kms_key_arn, allow_create=False))
        if self.kms_key_arn is not None and not self.existing:
            p.append(
                f"{where}.kmsKeyArn: only an existing bucket names its key: mark a bucket the "
                'stack does not create existing ("existing": true; BucketSpec(existing=True), '
                "as every bucket of an S3IngestSourceStack); a bucket the stack creates is "
                "encrypted with the stack's kmsKeyArn"
            )
        p.extend(self._filter_problems(where))
        p.extend(self._account_problems(where))
        return p

    def _inventory_problems(self, where: str) -> list[str]:
        """The rules of an existing inventory (:class:`InventoryRef`); none for a flag."""
        inventory = self.inventory
        if not isinstance(inventory, InventoryRef):
            return []
        p: list[str] = []
        if not self.existing:
            p.append(f"{where}.inventory: only an existing bucket names an existing inventory")
        if not _INVENTORY_ID_RE.match(inventory.id):
            p.append(f"{where}.inventory.id: {inventory.id!r} is not an inventory id")
        if not BUCKET_NAME_RE.match(inventory.bucket):
            p.append(
                f"{where}.inventory.bucket: {inventory.bucket!r} is not a valid S3 bucket name"
            )
        return p

    def _filter_problems(self, where: str) -> list[str]:
        """The rules of the key filters."""
        p: list[str] = []
        for key, values in (("prefixes", self.prefixes), ("suffixes", self.suffixes)):
            if len(set(values)) != len(values):
                p.append(f"{where}.{key}: listed twice")
            if any(len(v.encode()) > 1024 for v in values):
                p.append(f"{where}.{key}: longer than a key can be (1024 bytes)")
        return p

    def _account_problems(self, where: str) -> list[str]:
        """The rules of ``account``, ``region`` and ``readRoleArn``."""
        p: list[str] = []
        if self.account is not None:
            if not ACCOUNT_RE.match(self.account):
                p.append(f"{where}.account: {self.account!r} is not an AWS account id (12 digits)")
            if not self.existing:
                p.append(
                    f"{where}: a bucket of another account exists already (existing: true); "
                    "its owner deploys the source stack (docs/organisation.md)"
                )
        if self.region is not None and not REGION_RE.match(self.region):
            p.append(f"{where}.region: {self.region!r} is not an AWS Region name")
        if self.read_role_arn is not None:
            if self.account is None:
                p.append(f"{where}.readRoleArn: only a bucket of another account (account) has one")
            elif not ROLE_ARN_RE.match(self.read_role_arn) or (
                self.read_role_arn.split(":")[4] != self.account
            ):
                p.append(
                    f"{where}.readRoleArn: {self.read_role_arn!r} is not an IAM role ARN of "
                    f"account {self.account}"
                )
        return p


def source_read_role_name(region: str) -> str:
    """The read role's name in a bucket's account: ``s3ingest-source-read-<region>`` (the
    Region may be a CDK token)."""
    return f"{SOURCE_READ_ROLE_PREFIX}{region}"


def read_role_arn(spec: BucketSpec, region: str, partition: str = "aws") -> str:
    """The role of a remote bucket's account the pipeline assumes to read it: ``readRoleArn``,
    else the source stack's default ``arn:<partition>:iam::<account>:role/`` +
    :func:`source_read_role_name` of the bucket's Region (``region`` when it names none; CDK
    tokens work)."""
    if spec.read_role_arn is not None:
        return spec.read_role_arn
    name = source_read_role_name(spec.region or region)
    return f"arn:{partition}:iam::{spec.account}:role/{name}"


def inventory_report_prefix(bucket_name: str) -> str:
    """The folder holding one dated folder per inventory report of ``bucket_name``:
    ``"inventory/<bucket>/s3ingest-daily/"`` (a CDK token in the stack works too)."""
    return f"{INVENTORY_PREFIX}/{bucket_name}/{INVENTORY_ID}/"


def parse_buckets(raw: Any) -> tuple[tuple[BucketSpec, ...], list[str]]:
    """``buckets`` from its context value: a list, or a JSON list as ``-c buckets=[...]``
    gives it; ``None``/empty: no list (the single-bucket settings apply)."""
    if raw in (None, "", "null"):
        return (), []
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            return (), [f"buckets: not JSON ({exc.msg})"]
    if not isinstance(raw, list):
        return (), [f"buckets: expected a list of bucket objects, got {raw!r}"]
    specs: list[BucketSpec] = []
    problems: list[str] = []
    for index, entry in enumerate(raw):
        spec, found = BucketSpec.from_context(entry, f"buckets[{index}]")
        problems.extend(found)
        if spec is not None:
            specs.append(spec)
    return tuple(specs), problems
