"""S3 reads of buckets in other accounts, through each bucket account's read role.

Every S3 call the functions make names its bucket (``Bucket=``; a presigned URL's
``Params["Bucket"]``; a paginator's ``paginate(Bucket=...)``). :class:`BucketRoutedS3` has a
boto3 S3 client's interface and sends a call on a bucket of ``roles`` (``READ_ROLES``,
:attr:`s3ingest_fn.config.ClientConfig.read_roles`) through a client whose credentials come
from ``sts:AssumeRole`` on that bucket's role (the role ``S3IngestSource`` deploys in the bucket's
account, ``docs/organisation.md``), every other call through the function's own client. The
assumed credentials are fetched on the first call on such a bucket and refreshed by botocore
before they expire (``RefreshableCredentials``: 15 minutes ahead); a presigned URL carries
them, so a processor reads a remote object with the bucket account's role and no permission
of its own (https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_use_permissions-to-switch.html,
https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

#: How long one assumed role session lasts, seconds (AssumeRole's default and the maximum a
#: role allows unless raised; a presigned URL signed with it lives at most this long).
SESSION_SECONDS = 3600
#: The role session name CloudTrail shows in the bucket's account.
SESSION_NAME = "s3ingest"


def assumed_session(sts: Any, role_arn: str, region: str | None) -> Any:
    """A boto3 session whose credentials are ``role_arn``'s, assumed through ``sts`` (a boto3
    STS client of the function's own credentials) when first needed and again before they
    expire.

    Raises
    ------
    botocore.exceptions.ClientError
        From a call made with the session, when the role cannot be assumed (``AccessDenied``:
        its trust policy does not name the caller).
    """
    import boto3
    import botocore.session
    from botocore.credentials import DeferredRefreshableCredentials

    def fetch() -> dict[str, str]:
        creds = sts.assume_role(
            RoleArn=role_arn, RoleSessionName=SESSION_NAME, DurationSeconds=SESSION_SECONDS
        )["Credentials"]
        return {
            "access_key": creds["AccessKeyId"],
            "secret_key": creds["SecretAccessKey"],
            "token": creds["SessionToken"],
            "expiry_time": creds["Expiration"].isoformat(),
        }

    core = botocore.session.Session()
    # botocore has no public setter for refreshing credentials (set_credentials: static ones)
    core._credentials = DeferredRefreshableCredentials(fetch, "sts-assume-role")  # type: ignore[attr-defined]
    return boto3.session.Session(botocore_session=core, region_name=region)


def reading_through(
    own: Any,
    roles: Mapping[str, str],
    sts: Callable[[], Any],
    region: str | None,
    served: Callable[[Any], Any] = lambda client: client,
    **client_kwargs: Any,
) -> Any:
    """``own`` (an S3 client) when ``roles`` is empty; else a :class:`BucketRoutedS3` whose
    role clients are S3 clients of :func:`assumed_session` through ``sts()`` (an STS client of
    the caller's credentials), on ``own``'s endpoint when it is not AWS's own (an emulator),
    each passed through ``served``; ``client_kwargs`` as for ``session.client("s3")``."""
    if not roles:
        return own
    endpoint = str(own.meta.endpoint_url)
    if ".amazonaws.com" not in endpoint:
        client_kwargs.setdefault("endpoint_url", endpoint)

    def remote(role_arn: str) -> Any:
        session = assumed_session(sts(), role_arn, region)
        return served(session.client("s3", **client_kwargs))

    return BucketRoutedS3(own, roles, remote)


class BucketRoutedS3:
    """A boto3 S3 client's interface over ``own`` (the function's client) and, per bucket of
    ``roles``, a client of the bucket account's role made by ``remote(role_arn)``.

    Attributes other than calls (``meta``, ``exceptions``) are ``own``'s; a hook that must see
    every client (event handlers) goes through :meth:`each_client`.
    """

    def __init__(self, own: Any, roles: Mapping[str, str], remote: Callable[[str], Any]) -> None:
        self._own = own
        self._roles = dict(roles)
        self._remote = remote
        self._clients: dict[str, Any] = {}
        self._hooks: list[Callable[[Any], None]] = []
        self._lock = threading.Lock()

    @property
    def roles(self) -> dict[str, str]:
        """Bucket name -> the role its reads assume."""
        return dict(self._roles)

    def for_bucket(self, bucket: str | None) -> Any:
        """The client a call on ``bucket`` goes through."""
        role = self._roles.get(bucket or "")
        if role is None:
            return self._own
        with self._lock:
            made = self._clients.get(role)
            if made is None:
                made = self._clients[role] = self._remote(role)
                for hook in self._hooks:
                    hook(made)
            return made

    def each_client(self, hook: Callable[[Any], None]) -> None:
        """Run ``hook`` on the own client and on every role's client, made now or later."""
        with self._lock:
            self._hooks.append(hook)
            clients = [self._own, *self._clients.values()]
        for made in clients:
            hook(made)

    def generate_presigned_url(
        self, operation: str, Params: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> str:
        """As boto3's, signed with the credentials of ``Params["Bucket"]``'s client."""
        params = dict(Params or {})
        url: str = self.for_bucket(params.get("Bucket")).generate_presigned_url(
            operation, Params=params, **kwargs
        )
        return url

    def get_paginator(self, operation: str) -> _RoutedPaginator:
        """A paginator whose ``paginate(Bucket=...)`` pages through that bucket's client."""
        return _RoutedPaginator(self, operation)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._own, name)
        if name.startswith("_") or not callable(attr) or name in _NOT_ROUTED:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return getattr(self.for_bucket(kwargs.get("Bucket")), name)(*args, **kwargs)

        return call


#: Client methods that name no bucket (answered by the own client).
_NOT_ROUTED = frozenset({"can_paginate", "get_waiter", "close", "list_buckets"})


class _RoutedPaginator:
    def __init__(self, routed: BucketRoutedS3, operation: str) -> None:
        self._routed = routed
        self._operation = operation

    def paginate(self, **kwargs: Any) -> Iterator[Any]:
        client = self._routed.for_bucket(kwargs.get("Bucket"))
        result: Iterator[Any] = client.get_paginator(self._operation).paginate(**kwargs)
        return result


__all__ = [
    "SESSION_NAME",
    "SESSION_SECONDS",
    "BucketRoutedS3",
    "assumed_session",
    "reading_through",
]
