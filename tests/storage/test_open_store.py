"""open_store: URL -> implementation, configuration errors. No server needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.errors import ConfigError
from shoal.storage import LocalObjectStore, S3ObjectStore, open_store


def test_file_url_opens_a_local_store_and_creates_it(tmp_path: Path) -> None:
    url = (tmp_path / "data" / "objects").as_uri()
    store = open_store(url)
    assert isinstance(store, LocalObjectStore)
    assert (tmp_path / "data" / "objects").is_dir()
    assert store.url == url
    assert open_store(store.url).url == url


def test_bare_paths_and_encoded_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert open_store(str(tmp_path / "abs")).url == (tmp_path / "abs").as_uri()
    monkeypatch.chdir(tmp_path)
    assert open_store("rel/dir").url == (tmp_path / "rel" / "dir").as_uri()
    assert open_store(f"file://{tmp_path}/a%20b").url == (tmp_path / "a b").as_uri()
    assert (tmp_path / "a b").is_dir()
    assert open_store(f"file://localhost{tmp_path}/c").url == (tmp_path / "c").as_uri()


@pytest.mark.parametrize("url", ["gs://bucket/x", "http://host/x", "s3://", "s3:///prefix",
                                 "file://host/x", "s3://bucket/a/../b", "s3://bucket/a//b"])
def test_bad_urls_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError, match="storage URL"):
        open_store(url, environ={})


def test_s3_url_reads_endpoint_region_and_credentials_from_the_environment() -> None:
    env = {"SHOAL_S3_ENDPOINT": "http://minio:9000", "AWS_REGION": "eu-west-1",
           "AWS_DEFAULT_REGION": "us-west-2", "AWS_ACCESS_KEY_ID": "k",
           "AWS_SECRET_ACCESS_KEY": "s"}
    store = open_store("s3://bucket/pre/fix/", environ=env)
    assert isinstance(store, S3ObjectStore)
    assert (store.bucket, store.prefix, store.url) == ("bucket", "pre/fix", "s3://bucket/pre/fix")
    assert store.filesystem.region == "eu-west-1"
    assert "http://minio:9000" in repr(store)

    store = open_store("s3://bucket", environ={"AWS_DEFAULT_REGION": "us-west-2"},
                       s3_endpoint="https://other:443", s3_region="ap-south-1")
    assert isinstance(store, S3ObjectStore)
    assert store.url == "s3://bucket"
    assert store.filesystem.region == "ap-south-1"
    assert "https://other:443" in repr(store)


def test_half_a_credential_pair_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="AWS_SECRET_ACCESS_KEY"):
        open_store("s3://bucket/p", environ={"AWS_ACCESS_KEY_ID": "k"})
