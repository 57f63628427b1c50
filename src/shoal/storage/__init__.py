"""Object stores: local directory and S3-compatible (docs/storage.md).

`open_store(url)` picks the implementation from `SHOAL_STORAGE_URL`-style URLs:

- `file:///abs/dir` or a bare path (relative paths resolve against the working directory)
  -> `LocalObjectStore`; the directory is created.
- `s3://bucket/prefix` -> `S3ObjectStore`. Endpoint: the `s3_endpoint` argument, else
  `SHOAL_S3_ENDPOINT` (`host:port` or `http(s)://host:port`), else AWS. Region: `s3_region`,
  else `AWS_REGION` / `AWS_DEFAULT_REGION`. Credentials: `AWS_ACCESS_KEY_ID`,
  `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`); without them pyarrow's default AWS
  credential chain (profiles, instance metadata) applies.

Anything else raises `ConfigError`. Environment variables are read when `open_store` is
called, from `environ` if given (tests) or `os.environ` (`SHOAL_S3_ENDPOINT` via `shoal.config`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from shoal.config import setting_from_env
from shoal.errors import ConfigError
from shoal.storage.base import ObjectInfo, ObjectStore
from shoal.storage.local import LocalObjectStore

if TYPE_CHECKING:
    from shoal.storage.s3 import S3ObjectStore


def __getattr__(name: str) -> Any:
    """`S3ObjectStore` on first use: it imports `pyarrow.fs` (~7 ms of every command's
    start-up, where the store is a local directory)."""
    if name == "S3ObjectStore":
        from shoal.storage.s3 import S3ObjectStore

        return S3ObjectStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["LocalObjectStore", "ObjectInfo", "ObjectStore", "S3ObjectStore", "open_store"]


def open_store(url: str, *, s3_endpoint: str | None = None, s3_region: str | None = None,
               environ: Mapping[str, str] | None = None) -> ObjectStore:
    """The object store named by `url` (see the module docstring)."""
    env = os.environ if environ is None else environ
    parts = urlsplit(url)
    if not url or not parts.scheme:
        return _local(url, url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ConfigError(f"storage URL {url!r}: file URLs take no host (file:///abs/dir)")
        return _local(url, unquote(parts.path))
    if parts.scheme == "s3":
        return _s3(url, parts.netloc, parts.path, env, s3_endpoint, s3_region)
    raise ConfigError(f"storage URL {url!r}: unsupported scheme {parts.scheme!r}; "
                      "expected file:///abs/dir, a directory path, or s3://bucket/prefix")


def _local(url: str, path: str) -> LocalObjectStore:
    if not path:
        raise ConfigError(f"storage URL {url!r}: no directory given")
    store = LocalObjectStore(path)
    try:
        os.makedirs(store.root, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"storage URL {url!r}: cannot create {store.root}: {exc}") from exc
    return store


def _s3(url: str, bucket: str, path: str, env: Mapping[str, str],
        endpoint: str | None, region: str | None) -> S3ObjectStore:
    from shoal.storage.s3 import S3ObjectStore

    if not bucket:
        raise ConfigError(f"storage URL {url!r}: no bucket (expected s3://bucket/prefix)")
    access_key = env.get("AWS_ACCESS_KEY_ID") or None
    secret_key = env.get("AWS_SECRET_ACCESS_KEY") or None
    if (access_key is None) != (secret_key is None):
        raise ConfigError("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together")
    try:
        return S3ObjectStore(
            bucket, path.strip("/"),
            endpoint=endpoint or setting_from_env("s3_endpoint", env),
            region=region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
            access_key=access_key, secret_key=secret_key,
            session_token=env.get("AWS_SESSION_TOKEN") or None)
    except ValueError as exc:
        raise ConfigError(f"storage URL {url!r}: {exc}") from exc
