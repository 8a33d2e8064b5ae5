"""The hand-written expectation of every S3 event fixture in ``tests/events/``
(:data:`EXPECTED`), and the files that are no S3 event payload (:data:`SKIPPED`), for
``tests/unit/test_corpus_samples.py``.

Expectations are written by hand from the fixture files and ``docs/payloads.md``; none is computed
by the code under test. How a sample file becomes SQS message bodies depends on its shape:

* ``PLAIN``: a notification, EventBridge event, TestEvent or SNS envelope; the body is the file.
* ``SQS``: a Lambda SQS event; each ``Records[i].body`` is a body.
* ``LAMBDA_SNS``: a Lambda SNS event; each ``Records[i].Sns.Message`` is a body.
* ``LOCALSTACK``: an AWS-validated LocalStack snapshot; each recorded entry that is an event
  (a notification record, a ``{"Records": ...}`` document, an EventBridge event, an SNS envelope
  whose ``Message`` the snapshot tool pre-parsed, or a DynamoDB-typed copy of a record) is a body.
  Placeholders (``<object-key:1>``, ``"sequencer": "sequencer"``, ``"object-sequencer"``) are
  kept as they are.

A sequencer not in S3's shape makes an ordered event invalid (CONTRACT C2, C9): a body whose
expectation names one of :data:`PLACEHOLDER_SEQUENCERS` on an ordered record is checked twice,
as written (``invalid``, ``sequencer-not-hex``) and with :data:`REAL_SEQUENCER` in its place
(every other field as written here, the sequencer ordered).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from s3ingest_fn.core.model import Format, Kind

EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e"


@dataclass(frozen=True, kw_only=True)
class Ch:
    """One expected :class:`~s3ingest_fn.core.model.Change`."""

    fmt: Format
    kind: Kind
    bucket: str
    key: str
    #: The key as on the wire, when it differs from the decoded key.
    raw_key: str | None = None
    #: Notification ``eventName`` once the ``s3:`` prefix is stripped (not checked for EventBridge).
    event: str | None = None
    #: The sequencer exactly as on the wire (``Change.raw_sequencer``).
    seq: str | None = None
    #: True when ``seq`` must normalise to a usable sequencer; False when it must be None.
    ordered: bool = False
    version: str | None = None
    etag: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class Ignored:
    reason: str


@dataclass(frozen=True)
class Invalid:
    reason: str


Expected = tuple[Ch, ...] | Ignored | Invalid


def rec(**fields: Any) -> tuple[Ch, ...]:
    """A body holding one S3 notification record."""
    return (Ch(fmt=Format.S3_NOTIFICATION, **fields),)


def ebe(**fields: Any) -> tuple[Ch, ...]:
    """A body holding one EventBridge S3 event."""
    return (Ch(fmt=Format.EVENTBRIDGE, **fields),)


CREATED, REMOVED, VERSION_REMOVED, METADATA = (
    Kind.CREATED,
    Kind.REMOVED,
    Kind.VERSION_REMOVED,
    Kind.METADATA,
)
TEST_EVENT = Ignored("test-event")
MALFORMED = Invalid("malformed-json")
UNKNOWN = Invalid("unknown-shape")
#: Sequencers of library fixtures that S3 never sends (not hex): LocalStack's anonymised
#: ``sequencer`` and ``object-sequencer``, aws-lambda-go's ``Happy Sequencer``.
PLACEHOLDER_SEQUENCERS = frozenset({"sequencer", "object-sequencer", "Happy Sequencer"})
#: What stands in for them in the second check: a real one (``powertools__s3SqsEvent.json``).
REAL_SEQUENCER = "00643717F9F8B85354"

PLAIN, SQS, LAMBDA_SNS, LOCALSTACK = "plain", "sqs", "lambda-sns", "localstack"
BODY = "body"  # the id of the single body of a PLAIN file

# --- hand-written expectations -------------------------------------------------------------------

_KB = "bucket-name"
_KB_KEY = "1.2.3.4-1514864593.00"
_GO_BUCKET = "example-bucket"
_GO_RESTORE = dict(
    kind=METADATA,
    event="ObjectRestore:Completed",
    bucket=_GO_BUCKET,
    key="glacier-test.txt",
    raw_key="glacier%2Dtest.txt",
    seq="0A1B2C3D4E5F678901",
    ordered=False,
    version="abcdeH0Xp66ep__QDjR76LK7Gc9X4wKO",
    etag="0123456789abcdef0123456789abcdef",
    size=1024,
)
_HAPPY = dict(
    kind=CREATED,
    event="ObjectCreated:Put",
    bucket="sourcebucket",
    key="Happy Face.jpg",
    raw_key="Happy%20Face.jpg",
    seq="Happy Sequencer",
    ordered=False,
    version="version",
    etag=EMPTY_MD5,
    size=1024,
)
_PT_BUCKET = "lambda-artifacts-deafc19498e3f2df"
_PT_KEY = "b21b84d653bb07b05b1e6b33684dc11b"
_PT_EB = dict(bucket="example-bucket", key="IMG_m7fzo3.jpg")
_PT_EB_SEQ = "006408CAD69598B05E"
_PT_EB_ETAG = "4e68adba0abe2dc8653dc3354e14c01d"
_DOC_EB = dict(bucket="DOC-EXAMPLE-BUCKET1", key="example-key")
_SAM = dict(bucket="{{{bucket}}}", key="{{{key}}}", seq="0A1B2C3D4E5F678901", ordered=True)

# LocalStack snapshots: the anonymised sequencers are not hex (PLACEHOLDER_SEQUENCERS).
_LS_SQS = dict(bucket="<resource:1>", seq="sequencer", ordered=False)
_LS_EB = dict(bucket="<bucket-name:1>", key="<key-name:1>")
_LS_EB_SEQ = dict(_LS_EB, seq="object-sequencer", ordered=False)
_LS_ETAG = "437b930db84b8079c2dd804a71936b5f"
_LS_PUT = dict(_LS_SQS, kind=CREATED, event="ObjectCreated:Put")

EXPECTED: dict[str, tuple[str, dict[str, Expected]]] = {
    # Real S3 -> SNS -> SQS bodies of 2018 (docs/payloads.md 1.2, 3, 4).
    "arbor-kafka-bind__sns-wrapped_exampleS3CompleteMultipartUploadMessage.json": (
        PLAIN,
        {
            BODY: rec(
                kind=CREATED,
                event="ObjectCreated:CompleteMultipartUpload",
                bucket=_KB,
                key=_KB_KEY,
                seq="005A935416CD0A0275",
                ordered=True,
                etag="767e7a8379c0f62c39e0ceeea0e13de9-768",
                size=6442450944,
            ),
        },
    ),
    "arbor-kafka-bind__sns-wrapped_exampleS3CopyMessage.json": (
        PLAIN,
        {
            # A 2018 Copy event carries no eTag.
            BODY: rec(
                kind=CREATED,
                event="ObjectCreated:Copy",
                bucket=_KB,
                key=_KB_KEY,
                seq="005A8F907BD60CAFF1",
                ordered=True,
                size=336,
            ),
        },
    ),
    "arbor-kafka-bind__sns-wrapped_exampleS3ObjectRemovedMessage.json": (
        PLAIN,
        {
            BODY: rec(
                kind=REMOVED,
                event="ObjectRemoved:Delete",
                bucket=_KB,
                key=_KB_KEY,
                seq="005A937AB75B924C8A",
                ordered=True,
            ),
        },
    ),
    "arbor-kafka-bind__sns-wrapped_exampleS3PutMessage.json": (
        PLAIN,
        {
            BODY: rec(
                kind=CREATED,
                event="ObjectCreated:Put",
                bucket=_KB,
                key=_KB_KEY,
                seq="005A934FE6C0A58C72",
                ordered=True,
                etag="9e30708dc09064bb76d8460c08cbabcb",
                size=336,
            ),
        },
    ),
    "arbor-kafka-bind__sns-wrapped_exampleTestMessage.json": (PLAIN, {BODY: TEST_EVENT}),
    # aws-lambda-go fixtures: %20 and %2D keys, "s3:" prefixes, non-hex sequencers (invalid as
    # written: PLACEHOLDER_SEQUENCERS) (docs/payloads.md 1.3, 3).
    "aws-lambda-go__s3-event-with-decoded.json": (PLAIN, {BODY: rec(**_HAPPY)}),
    "aws-lambda-go__s3-event.json": (PLAIN, {BODY: rec(**_HAPPY)}),
    "aws-lambda-go__s3-glacier-event.json": (PLAIN, {BODY: rec(**_GO_RESTORE)}),
    "aws-lambda-go__s3-intelligenttier-event.json": (
        PLAIN,
        {
            BODY: rec(
                kind=METADATA,
                event="IntelligentTiering:TransitionAccess",
                bucket=_GO_BUCKET,
                key="intelligent-tier-test.dat",
                raw_key="intelligent%2Dtier%2Dtest.dat",
                seq="0066ABC1234567890",
                ordered=False,
                version="versionExample123",
                etag=EMPTY_MD5,
                size=5242880,
            ),
        },
    ),
    "aws-lambda-go__s3-lifecycle-event.json": (
        PLAIN,
        {
            BODY: rec(
                kind=METADATA,
                event="LifecycleTransition",
                bucket=_GO_BUCKET,
                key="lifecycle-test.dat",
                raw_key="lifecycle%2Dtest.dat",
                seq="0066LIFECYCLE890",
                ordered=False,
                version="lifecycleVersion123",
                etag="abcd1234ef5678901234567890abcdef",
                size=10485760,
            ),
        },
    ),
    "aws-lambda-go__s3-replication-event.json": (
        PLAIN,
        {
            # Its sequencer is the original PUT's (docs/payloads.md 1.2): metadata, never ordered.
            BODY: rec(
                kind=METADATA,
                event="Replication:OperationFailedReplication",
                bucket="amzn-s3-demo-bucket1",
                key="replication-test.png",
                raw_key="replication%2Dtest.png",
                seq="0066DA1CBF104C0D51",
                ordered=False,
                version="abcdeH0Xp66ep__QDjR76LK7Gc9X4wKO",
                etag="e12345ca7e88a38428305d3ff7fcb99f",
                size=520080,
            ),
        },
    ),
    "aws-lambda-go__s3-restore-event.json": (PLAIN, {BODY: rec(**_GO_RESTORE)}),
    "aws-lambda-go__sqs-event.json": (SQS, {"Records/0/body": MALFORMED}),
    "awsdocs-lambda__sqs-event-fifo.json": (SQS, {"Records/0/body": MALFORMED}),
    "awsdocs-lambda__sqs-event-standard.json": (
        SQS,
        {
            "Records/0/body": MALFORMED,
            "Records/1/body": MALFORMED,
        },
    ),
    # AWS doc EventBridge examples: 16-character lower-case sequencers (docs/payloads.md 3, 5).
    "awsdocs-s3ug__eventbridge-ObjectCreated.json": (
        PLAIN,
        {
            BODY: ebe(
                kind=CREATED,
                **_DOC_EB,
                seq="617f08299329d189",
                ordered=True,
                version="IYV3p45BT0ac8hjHg1houSdS1a.Mro8e",
                etag="b1946ac92492d2347c6235b4d2611184",
                size=5,
            ),
        },
    ),
    "awsdocs-s3ug__eventbridge-ObjectDeleted-DeleteObject.json": (
        PLAIN,
        {
            BODY: ebe(
                kind=REMOVED,
                **_DOC_EB,
                seq="617f0837b476e463",
                ordered=True,
                version="1QW9g1Z99LUNbvaaYVpW9xDlOLU.qxgF",
                etag=EMPTY_MD5,
            ),
        },
    ),
    "awsdocs-s3ug__eventbridge-ObjectDeleted-LifecycleExpiration.json": (
        PLAIN,
        {
            BODY: ebe(
                kind=REMOVED,
                **_DOC_EB,
                seq="617b398000000000",
                ordered=True,
                version="mtB0cV.jejK63XkRNceanNMC.qXPWLeK",
                etag=EMPTY_MD5,
            ),
        },
    ),
    "awsdocs-s3ug__eventbridge-ObjectRestoreCompleted.json": (
        PLAIN,
        {
            BODY: ebe(
                kind=METADATA,
                **_DOC_EB,
                version="KKsjUC1.6gIjqtvhfg5AdMI0eCePIiT3",
                etag="b1946ac92492d2347c6235b4d2611184",
                size=5,
            ),
        },
    ),
    "awsdocs-s3ug__notification-ObjectCreatedPut.json": (
        PLAIN,
        {
            BODY: rec(
                kind=CREATED,
                event="ObjectCreated:Put",
                bucket="mybucket",
                key="HappyFace.jpg",
                seq="0055AED6DCD90281E5",
                ordered=True,
                version="096fKKXTRTtl3on89fVO.nfljtsv6qko",
                etag=EMPTY_MD5,
                size=1024,
            ),
        },
    ),
    "awsdocs-s3ug__notification-TestEvent.json": (PLAIN, {BODY: TEST_EVENT}),
    "java-libs__s3_event.json": (
        PLAIN,
        {
            # versionId "" is absent.
            BODY: rec(
                kind=CREATED,
                event="ObjectCreated:Put",
                bucket="example-bucket",
                key="test/key",
                seq="0A1B2C3D4E5F678901",
                ordered=True,
                etag="0123456789abcdef0123456789abcdef",
                size=1024,
            ),
        },
    ),
    "lambda-dev-guide__java-events_s3-notification.json": (
        PLAIN,
        {
            BODY: rec(
                kind=CREATED,
                event="ObjectCreated:Put",
                bucket="BUCKET_NAME",
                key="inbound/sample-java-s3.png",
                seq="005E64A65DF093B26D",
                ordered=True,
                etag="d132690b6c65b6d1629721dcfb49b883",
                size=21476,
            ),
        },
    ),
    "powertools-ts__s3-lifecycle-event.json": (
        PLAIN,
        {
            BODY: rec(
                kind=REMOVED,
                event="LifecycleExpiration:Delete",
                bucket="amzn-s3-demo-bucket",
                key="expiration/delete",
                seq="0055AED6DCD90281E5",
                ordered=True,
            ),
        },
    ),
    "powertools__s3Event.json": (
        PLAIN,
        {
            BODY: rec(
                kind=CREATED,
                event="ObjectCreated:Put",
                bucket=_PT_BUCKET,
                key=_PT_KEY,
                seq="0C0F6F405D6ED209E1",
                ordered=True,
                etag=_PT_KEY,
                size=1305107,
            ),
        },
    ),
    "powertools__s3EventBridgeNotificationObjectCreatedEvent.json": (
        PLAIN,
        {
            BODY: ebe(
                kind=CREATED, **_PT_EB, seq=_PT_EB_SEQ, ordered=True, etag=_PT_EB_ETAG, size=184662
            ),
        },
    ),
    "powertools__s3EventBridgeNotificationObjectDeletedEvent.json": (
        PLAIN,
        {
            BODY: ebe(kind=REMOVED, **_PT_EB, seq=_PT_EB_SEQ, ordered=True),
        },
    ),
    "powertools__s3EventBridgeNotificationObjectExpiredEvent.json": (
        PLAIN,
        {
            BODY: ebe(
                kind=REMOVED, **_PT_EB, seq=_PT_EB_SEQ, ordered=True, etag=_PT_EB_ETAG, size=184662
            ),
        },
    ),
    "powertools__s3EventBridgeNotificationObjectRestoreCompletedEvent.json": (
        PLAIN,
        {
            # A restore never moves ordering state, even with a sequencer on the wire.
            BODY: ebe(
                kind=METADATA,
                **_PT_EB,
                seq=_PT_EB_SEQ,
                ordered=False,
                etag=_PT_EB_ETAG,
                size=184662,
            ),
        },
    ),
    "powertools__s3EventDecodedKey.json": (PLAIN, {BODY: rec(**_HAPPY)}),
    "powertools__s3EventDeleteObject.json": (
        PLAIN,
        {
            BODY: rec(
                kind=REMOVED,
                event="ObjectRemoved:Delete",
                bucket=_PT_BUCKET,
                key=_PT_KEY,
                seq="0C0F6F405D6ED209E1",
                ordered=True,
            ),
        },
    ),
    "powertools__s3EventGlacier.json": (
        PLAIN,
        {
            BODY: rec(
                kind=CREATED,
                event="ObjectCreated:Put",
                bucket=_PT_BUCKET,
                key=_PT_KEY,
                seq="0C0F6F405D6ED209E1",
                ordered=True,
                etag=_PT_KEY,
                size=1305107,
            ),
        },
    ),
    "powertools__s3SqsEvent.json": (
        SQS,
        {
            "Records/0/body": rec(
                kind=CREATED,
                event="ObjectCreated:Put",
                bucket="xxx",
                key="test.pdf",
                seq="00643717F9F8B85354",
                ordered=True,
                version="yd3d4HaWOT2zguDLvIQLU6ptDTwKBnQV",
                etag="2e3ad1e983318bbd8e73b080e2997980",
                size=104681,
            ),
        },
    ),
    # An SNS envelope whose Message is JSON but not an S3 event.
    "powertools__snsSqsEvent.json": (SQS, {"Records/0/body": UNKNOWN}),
    "powertools__sqsEvent.json": (SQS, {"Records/0/body": MALFORMED, "Records/1/body": UNKNOWN}),
    "sam-cli__S3Delete.json": (
        PLAIN,
        {
            BODY: rec(kind=REMOVED, event="ObjectRemoved:Delete", **_SAM),
        },
    ),
    "sam-cli__S3Put.json": (
        PLAIN,
        {
            BODY: rec(
                kind=CREATED,
                event="ObjectCreated:Put",
                **_SAM,
                etag="0123456789abcdef0123456789abcdef",
                size=1024,
            ),
        },
    ),
    "sam-cli__Sns.json": (LAMBDA_SNS, {"Records/0/Sns/Message": MALFORMED}),
    "sam-cli__Sqs.json": (SQS, {"Records/0/body": MALFORMED}),
    # AWS-validated LocalStack snapshots (docs/payloads.md 1.2, 5, 6).
    "localstack__test_s3_notifications_sqs.snapshot.json": (
        LOCALSTACK,
        {
            "test_object_created_put/receive_messages/messages/0": rec(
                **_LS_PUT, key="my_key_0", etag=_LS_ETAG, size=9
            ),
            "test_object_created_put/receive_messages/messages/1": rec(
                **_LS_PUT, key="my_key_1", etag="6c7ba9c5a141421e1c03cb9807c97c74", size=14
            ),
            "test_object_created_copy/receive_messages/messages/0": rec(
                **_LS_SQS,
                kind=CREATED,
                event="ObjectCreated:Copy",
                key="<object-key:1>",
                etag=_LS_ETAG,
                size=9,
            ),
            "test_object_created_and_object_removed/receive_messages/messages/0": rec(
                **_LS_SQS,
                kind=CREATED,
                event="ObjectCreated:Copy",
                key="<object-key:1>",
                etag=_LS_ETAG,
                size=9,
            ),
            "test_object_created_and_object_removed/receive_messages/messages/1": rec(
                **_LS_PUT, key="<object-key:2>", etag=_LS_ETAG, size=9
            ),
            "test_object_created_and_object_removed/receive_messages/messages/2": rec(
                **_LS_SQS, kind=REMOVED, event="ObjectRemoved:Delete", key="<object-key:2>"
            ),
            "test_object_created_complete_multipart_upload/receive_messages/messages/0": rec(
                **_LS_SQS,
                kind=CREATED,
                event="ObjectCreated:CompleteMultipartUpload",
                key="test-key",
                etag="8eabe9d6b43316e840b079170916c079-1",
                size=6144,
            ),
            "test_key_encoding/receive_messages/messages/0": rec(
                **_LS_PUT, key="a@b", raw_key="a%40b", etag=_LS_ETAG, size=9
            ),
            "test_object_created_put_with_presigned_url_upload/receive_messages/messages/0": rec(
                **_LS_PUT, key="key-by-hostname", etag=_LS_ETAG, size=9
            ),
            "test_object_created_put_with_presigned_url_upload/receive_messages_region_2"
            "/messages/0": rec(
                **dict(_LS_PUT, bucket="<resource:2>"), key="key-by-hostname", etag=_LS_ETAG, size=9
            ),
            "test_object_tagging_put_event/receive_messages/messages/0": rec(
                kind=METADATA,
                event="ObjectTagging:Put",
                bucket="<resource:1>",
                key="<object-key:1>",
                etag="f3e6da48d914f3f04f6bd9cb092c044d",
            ),
            "test_object_tagging_delete_event/receive_messages/messages/0": rec(
                kind=METADATA,
                event="ObjectTagging:Delete",
                bucket="<resource:1>",
                key="<object-key:1>",
                etag="f3e6da48d914f3f04f6bd9cb092c044d",
            ),
            "test_xray_header/receive_messages/messages/0/Body": rec(
                **_LS_PUT, key="test-data", etag=_LS_ETAG, size=9
            ),
            "test_notifications_with_filter/message": rec(
                **dict(_LS_PUT, bucket="<bucket>"),
                key="testupload/dir1/testfile.txt",
                etag="f527a5c9f427867aeaf091c134949aa0",
                size=32,
            ),
            **{
                f"test_delete_objects/receive_messages/messages/{i}": rec(
                    **_LS_SQS,
                    kind=REMOVED,
                    event="ObjectRemoved:Delete",
                    key=f"<object-key:{i + 1}>",
                )
                for i in range(3)
            },
            **{
                f"test_object_put_acl/receive_messages/messages/{i}": rec(
                    kind=METADATA,
                    event="ObjectAcl:Put",
                    bucket="<resource:1>",
                    key="my_key_acl",
                    etag=_LS_ETAG,
                )
                for i in range(3)
            },
            "test_restore_object/receive_messages/messages/0": rec(
                **_LS_SQS,
                kind=METADATA,
                event="ObjectRestore:Post",
                key="my_key_restore",
                etag=_LS_ETAG,
                size=9,
            ),
            "test_restore_object/receive_messages/messages/1": rec(
                **_LS_SQS,
                kind=METADATA,
                event="ObjectRestore:Completed",
                key="my_key_restore",
                etag=_LS_ETAG,
                size=9,
            ),
            # docs/payloads.md 6: PUT v1, PUT v2, DELETE of version v1, delete marker; then
            # suspended: a null-version PUT (no versionId) and the DELETE of the delete marker's
            # version.
            "test_object_created_put_versioned/message-versioning-active/0": rec(
                **_LS_PUT,
                key="test-key",
                version="version-id",
                etag="6869c34ca384e0ed836d49214f881e87",
                size=13,
            ),
            "test_object_created_put_versioned/message-versioning-active/1": rec(
                **_LS_PUT,
                key="test-key",
                version="version-id",
                etag="8d777f385d3dfec8815d20f7496026dc",
                size=4,
            ),
            "test_object_created_put_versioned/message-versioning-active/2": rec(
                **_LS_SQS,
                kind=VERSION_REMOVED,
                event="ObjectRemoved:Delete",
                key="test-key",
                version="version-id",
            ),
            "test_object_created_put_versioned/message-versioning-active/3": rec(
                **_LS_SQS,
                kind=REMOVED,
                event="ObjectRemoved:DeleteMarkerCreated",
                key="test-key",
                version="version-id",
                etag=EMPTY_MD5,
            ),
            "test_object_created_put_versioned/message-versioning-suspended/0": rec(
                **_LS_PUT, key="test-key", etag="2fb1d4988881168bbcd6432d7593be5a", size=13
            ),
            "test_object_created_put_versioned/message-versioning-suspended/1": rec(
                **_LS_SQS,
                kind=VERSION_REMOVED,
                event="ObjectRemoved:Delete",
                key="test-key",
                version="version-id",
            ),
        },
    ),
    "localstack__test_s3_notifications_eventbridge.snapshot.json": (
        LOCALSTACK,
        {
            # "Permanently Deleted" without a version-id: an unversioned delete.
            "test_object_created_put/object_deleted": ebe(kind=REMOVED, **_LS_EB_SEQ),
            "test_object_created_put/object_created": ebe(
                kind=CREATED, **_LS_EB_SEQ, etag="8d777f385d3dfec8815d20f7496026dc", size=4
            ),
            **{
                f"test_object_put_acl/messages/messages/{i}": ebe(
                    kind=METADATA, **_LS_EB, etag=_LS_ETAG
                )
                for i in range(3)
            },
            "test_object_put_acl/messages/messages/3": ebe(
                kind=CREATED, **_LS_EB_SEQ, etag=_LS_ETAG, size=9
            ),
            "test_restore_object/messages/messages/0": ebe(
                kind=METADATA, **_LS_EB, etag=_LS_ETAG, size=9
            ),
            "test_restore_object/messages/messages/1": ebe(
                kind=METADATA, **_LS_EB, etag=_LS_ETAG, size=9
            ),
            **{
                "test_object_created_put_in_different_region/object-created-different-regions/"
                f"messages/{i}": ebe(
                    kind=CREATED, **_LS_EB_SEQ, etag="8d777f385d3dfec8815d20f7496026dc", size=4
                )
                for i in range(2)
            },
            **{
                f"test_object_created_put_versioned/message-versioning-{state}/0": ebe(
                    kind=CREATED, **_LS_EB_SEQ, etag="2fb1d4988881168bbcd6432d7593be5a", size=13
                )
                for state in ("active", "suspended")
            },
            # "Permanently Deleted" of the delete marker's version: the key becomes visible again.
            **{
                f"test_object_created_put_versioned/message-versioning-{state}/1": ebe(
                    kind=VERSION_REMOVED, **_LS_EB_SEQ, version="<version-id:3>"
                )
                for state in ("active", "suspended")
            },
        },
    ),
    "localstack__test_s3_notifications_sns.snapshot.json": (
        LOCALSTACK,
        {
            "test_object_created_put/receive_messages/messages/0": rec(
                **_LS_PUT, key="bucket-key", etag="c8e3a3027a133355210f85cfbb1acc35", size=11
            ),
            "test_object_created_put/receive_messages/messages/1": rec(
                **_LS_PUT, key="bucket-key", etag="05c7c1b96e20928f6e55a881b5ca1c45", size=12
            ),
            "test_bucket_notifications_with_filter/message": rec(
                **_LS_PUT,
                key="testupload/dir1/testfile.txt",
                etag="f5260f0f41af2722d9fe17a57dfa9da5",
                size=35,
            ),
        },
    ),
    "localstack__test_s3_notifications_lambda.snapshot.json": (
        LOCALSTACK,
        {
            "test_create_object_put_via_dynamodb/table_content": rec(
                **dict(_LS_PUT, bucket="<bucket-name:1>"),
                key="<object-key:1>",
                etag="e9fb1ed1d5eaa36781088aae37acffbd",
                size=11,
            ),
            # The only captured ObjectCreated:Post (a presigned POST), AWS-validated 2025-03-17.
            "test_create_object_by_presigned_request_via_dynamodb/items/0/data": rec(
                **dict(_LS_SQS, bucket="<bucket-name:1>"),
                kind=CREATED,
                event="ObjectCreated:Post",
                key="<object-key:1>",
                etag="232d7472010db416df31c55fdc0490a5",
                size=16,
            ),
            "test_create_object_by_presigned_request_via_dynamodb/items/1/data": rec(
                **dict(_LS_PUT, bucket="<bucket-name:1>"),
                key="<object-key:1>",
                etag="b0d833b208acd18be70a25c9323f210d",
                size=16,
            ),
        },
    ),
}

#: Sample files that are not S3 event payloads, each with why it is left out.
SKIPPED: dict[str, str] = {
    **{
        name: "S3 Batch Operations request"
        for name in (
            "aws-lambda-go__s3-batch-job-event-request-1.0.json",
            "aws-lambda-go__s3-batch-job-event-request-2.0.json",
            "awsdocs-lambda__s3-batch-request-v1.json",
            "awsdocs-s3ug__batchops-request-v1.json",
            "java-libs__s3_batch_event_v2.json",
            "powertools__s3BatchOperationEventSchemaV1.json",
            "powertools__s3BatchOperationEventSchemaV2.json",
            "sam-cli__S3BatchInvocation.json",
        )
    },
    **{
        name: "a Lambda response, not an input"
        for name in (
            "aws-lambda-go__s3-batch-job-event-response.json",
            "awsdocs-lambda__s3-batch-response-v1.json",
            "awsdocs-lambda__sqs-batchItemFailures-response.json",
            "awsdocs-s3ug__batchops-response-v1.AS-PUBLISHED-INVALID-JSON.txt",
            "java-libs__s3_batch_response.json",
            "java-libs__sqs_batch_response.json",
        )
    },
    **{
        name: "S3 Inventory manifest or data"
        for name in (
            "awsdocs-s3ug__inventory-manifest-CSV.json",
            "awsdocs-s3ug__inventory-manifest-ORC.json",
            "awsdocs-s3ug__inventory-manifest-Parquet.json",
            "orcabus-filemanager__csv_inventory.csv.gz",
            "orcabus-filemanager__csv_inventory_manifest.checksum",
            "orcabus-filemanager__csv_inventory_manifest.json",
            "orcabus-filemanager__csv_inventory_no_version.csv.gz",
            "orcabus-filemanager__csv_inventory_no_version_manifest.checksum",
            "orcabus-filemanager__csv_inventory_no_version_manifest.json",
            "orcabus-filemanager__orc_inventory.orc",
            "orcabus-filemanager__orc_inventory_manifest.checksum",
            "orcabus-filemanager__orc_inventory_manifest.json",
            "orcabus-filemanager__parquet_inventory.parquet",
            "orcabus-filemanager__parquet_inventory_manifest.checksum",
            "orcabus-filemanager__parquet_inventory_manifest.json",
        )
    },
    **{
        name: "LocalStack snapshot validation dates, no payload"
        for name in (
            "localstack__test_s3_notifications_eventbridge.validation.json",
            "localstack__test_s3_notifications_lambda.validation.json",
            "localstack__test_s3_notifications_sns.validation.json",
            "localstack__test_s3_notifications_sqs.validation.json",
        )
    },
}

#: (file, body id) -> why the parser is known to get it wrong (strict xfail, reported upstream).
KNOWN_BUGS: dict[tuple[str, str], str] = {}
