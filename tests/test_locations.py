"""Allowed locations for bound pipelines (`shoal.locations`): paths, S3 prefixes, hosts."""

from __future__ import annotations

import pytest

from shoal.config import Config
from shoal.errors import LocationNotAllowedError
from shoal.locations import LocationPolicy


@pytest.fixture
def policy(tmp_path) -> LocationPolicy:
    (tmp_path / "data").mkdir()
    (tmp_path / "in").mkdir()
    (tmp_path / "inbox").mkdir()
    (tmp_path / "in" / "link").symlink_to("/etc")
    return LocationPolicy.from_config(Config(
        data_dir=str(tmp_path / "data"),
        allowed_paths=f"{tmp_path / 'in'}, s3://bucket/team/a",
        allowed_hosts="kafka.internal, 10.0.0.5:9092, [::1]:9093"))


def test_paths_inside_the_data_dir_and_allowed_dirs(policy, tmp_path):
    for ok in (tmp_path / "data", tmp_path / "data" / "drop", tmp_path / "in" / "x",
               f"file://{tmp_path / 'in'}", "s3://bucket/team/a", "s3://bucket/team/a/b/c"):
        policy.check_path(str(ok))


@pytest.mark.parametrize("bad", ["/etc", "/", "s3://bucket/team", "s3://bucket/team/ab",
                                 "s3://other/team/a", "hdfs://x/y", "http://h/x"])
def test_paths_elsewhere_are_refused(policy, bad):
    with pytest.raises(LocationNotAllowedError, match="outside the locations"):
        policy.check_path(bad)


def test_tricks_are_resolved_before_comparing(policy, tmp_path):
    for bad in (tmp_path / "inbox",                      # a prefix but not a segment
                f"{tmp_path / 'in'}/../inbox",           # dot-dot out of an allowed dir
                tmp_path / "in" / "link",                # a symlink pointing at /etc
                f"{tmp_path / 'data'}/../../.."):
        with pytest.raises(LocationNotAllowedError):
            policy.check_path(str(bad))


def test_hosts(policy):
    policy.check_hosts("kafka.internal:9092,KAFKA.internal:19092, 10.0.0.5:9092")
    policy.check_hosts("PLAINTEXT://kafka.internal:9092")
    policy.check_hosts("[::1]:9093")
    for bad in ("10.0.0.5:9093", "evil.example:9092", "kafka.internal.evil:1",
                "kafka.internal:9092,evil:1", "[::1]:9092", "127.0.0.1:9092"):
        with pytest.raises(LocationNotAllowedError):
            policy.check_hosts(bad)


def test_no_hosts_by_default(tmp_path):
    policy = LocationPolicy.from_config(Config(data_dir=str(tmp_path)))
    with pytest.raises(LocationNotAllowedError, match="SHOAL_ALLOWED_HOSTS"):
        policy.check_hosts("localhost:9092")
    policy.check_properties({"filedrop_path": str(tmp_path / "x"), "kafka_topic": "t",
                             "retention": "7d"})
    with pytest.raises(LocationNotAllowedError, match="kafka_bootstrap"):
        policy.check_properties({"kafka_bootstrap": "h:1"})
