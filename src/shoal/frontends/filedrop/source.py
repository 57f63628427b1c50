"""The watched prefix of a file-drop pipeline: a local directory or an S3 bucket/prefix.

`DropSource.parse(path)` accepts a directory path (`/in/drop`, `file:///in/drop`) or
`s3://bucket/prefix` (endpoint: the `s3_endpoint` given, else `SHOAL_S3_ENDPOINT`); the prefix
is opened as an `ObjectStore` rooted there, so object keys are relative to it. A `DropSource`
is a small frozen value: it is shipped to Spark tasks, which `open()` it themselves.

`candidates()` lists the objects a scan considers: names ending in `.ndjson`, `.jsonl` or
`.json`, each optionally followed by `.gz` (gzip is detected by its magic bytes, not the
name), skipping names that mark an upload in progress (leading `.` or `_`, trailing `.tmp`,
`.part`, `.partial`, `.inprogress`) and, with `min_age_s`, objects modified more recently
than that (for producers that write in place instead of renaming).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from shoal.config import setting_from_env
from shoal.errors import InvalidPropertyError
from shoal.storage import ObjectInfo, ObjectStore, open_store

NDJSON_SUFFIXES = (".ndjson", ".jsonl", ".json")
_IN_PROGRESS_SUFFIXES = (".tmp", ".part", ".partial", ".inprogress")


def is_drop_name(key: str) -> bool:
    """True for an object key the pipeline ingests (see the module docstring)."""
    name = key.rsplit("/", 1)[-1].lower()
    if not name or name[0] in "._" or name.endswith(_IN_PROGRESS_SUFFIXES):
        return False
    if name.endswith(".gz"):
        name = name[:-3]
    return name.endswith(NDJSON_SUFFIXES)


@dataclass(frozen=True)
class DropSource:
    url: str                    # file:///abs/dir or s3://bucket/prefix
    s3_endpoint: str | None = None

    @classmethod
    def parse(cls, path: str, *, s3_endpoint: str | None = None) -> DropSource:
        """The source for `--path`; a local directory must exist."""
        parts = urlsplit(path)
        if parts.scheme == "s3":
            if not parts.netloc:
                raise InvalidPropertyError(f"file-drop path {path!r}: no bucket "
                                  "(expected s3://bucket/prefix)")
            endpoint = s3_endpoint or setting_from_env("s3_endpoint")
            return cls(f"s3://{parts.netloc}/{parts.path.strip('/')}".rstrip("/"), endpoint)
        if parts.scheme == "file":
            local = unquote(parts.path)
        elif parts.scheme and len(parts.scheme) > 1:
            raise InvalidPropertyError(
                f"file-drop path {path!r}: unsupported scheme {parts.scheme!r}; "
                "expected a directory or s3://bucket/prefix")
        else:
            local = path
        local = os.path.abspath(os.path.expanduser(local))
        if not os.path.isdir(local):
            raise InvalidPropertyError(f"file-drop path {path!r}: no such directory")
        return cls(f"file://{local}")

    def open(self) -> ObjectStore:
        return open_store(self.url, s3_endpoint=self.s3_endpoint)

    def display(self, key: str) -> str:
        """The object's full name as users see it (reject rows, progress): a path or URL."""
        if self.url.startswith("file://"):
            return os.path.join(self.url[len("file://"):], key)
        return f"{self.url}/{key}"

    def candidates(self, store: ObjectStore, *, min_age_s: float = 0.0) -> list[ObjectInfo]:
        """The objects to consider, sorted by key (see the module docstring)."""
        cutoff = time.time_ns() - int(min_age_s * 1e9)
        found: Iterator[ObjectInfo] = store.list("")
        return sorted((o for o in found if is_drop_name(o.path)
                       and (min_age_s <= 0 or o.mtime_ns <= cutoff)),
                      key=lambda o: o.path)
