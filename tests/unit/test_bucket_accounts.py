"""A ``buckets`` entry of another account (``account``, ``region``, ``readRoleArn``):
context form and the rules it must follow (``docs/organisation.md``)."""

from __future__ import annotations

import pytest

from s3ingest.settings import BucketSpec, Settings, SettingsError
from s3ingest_fn.config import READ_ROLES, ClientConfig, ConfigError

REMOTE = {
    "name": "producer-drop",
    "existing": True,
    "account": "222222222222",
    "region": "eu-west-1",
    "readRoleArn": "arn:aws:iam::222222222222:role/team/reader",
    "prefixes": ["in/"],
}


def test_a_remote_entry_reads_and_writes_back_its_account_region_and_role() -> None:
    # GIVEN an entry naming the bucket's account, Region and read role
    settings = Settings.from_context({"buckets": [{}, REMOTE]})
    _, remote = settings.bucket_specs
    # THEN the spec carries them and says it is another account's
    assert (remote.account, remote.region) == ("222222222222", "eu-west-1")
    assert remote.read_role_arn == REMOTE["readRoleArn"]
    assert remote.remote and not settings.bucket_specs[0].remote
    # AND the context form reads back to the same settings
    assert remote.to_context() == REMOTE
    assert Settings.from_context(settings.to_context()) == settings


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"account": "2222"}, "buckets[1].account: '2222' is not an AWS account id"),
        ({"existing": False}, "buckets[1]: a bucket of another account exists already"),
        ({"region": "Europe"}, "buckets[1].region: 'Europe' is not an AWS Region name"),
        (
            {"readRoleArn": "arn:aws:iam::333333333333:role/reader"},
            "is not an IAM role ARN of account 222222222222",
        ),
        ({"account": None}, "buckets[1].readRoleArn: only a bucket of another account"),
        ({"account": 222222222222}, "buckets[1].account: expected a string"),
    ],
)
def test_a_remote_entry_breaking_a_rule_is_refused(
    changes: dict[str, object], problem: str
) -> None:
    entry = {k: v for k, v in {**REMOTE, **changes}.items() if v is not None}
    with pytest.raises(SettingsError) as caught:
        Settings.from_context({"buckets": [{}, entry]})
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_a_local_entry_keeps_its_context_form() -> None:
    # an entry without the new fields writes none of them (cdk.json files stay as they are)
    assert BucketSpec(name="team-bucket", existing=True).to_context() == {
        "name": "team-bucket",
        "existing": True,
    }


def test_the_functions_read_each_remote_bucket_s_role_from_their_environment() -> None:
    # GIVEN READ_ROLES as the stack writes it
    role = "arn:aws:iam::222222222222:role/s3ingest-source-read-eu-west-1"
    clients = ClientConfig.from_env({READ_ROLES: f'{{"producer-drop": "{role}"}}'})
    # THEN the client configuration names it per bucket, and writes it back
    assert clients.read_roles == {"producer-drop": role}
    assert ClientConfig.from_env(clients.to_env()) == clients
    # AND without it every bucket is local
    assert ClientConfig.from_env({}).read_roles == {}


@pytest.mark.parametrize("raw", ["[1]", '{"b": 1}', "not json"])
def test_a_malformed_read_roles_value_is_refused(raw: str) -> None:
    with pytest.raises(ConfigError, match=READ_ROLES):
        ClientConfig.from_env({READ_ROLES: raw})
