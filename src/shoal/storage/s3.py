"""`S3ObjectStore`: the object store in an S3-compatible bucket, through `pyarrow.fs`.

Contract (on top of `shoal.storage.base.ObjectStore`):
- Key `a/b` of a store opened on `s3://bucket/prefix` is the S3 object `prefix/a/b`.
- `put` writes the whole payload with one `write` and closes the stream: one PUT for small
  objects (`allow_delayed_open`), a multipart upload for large ones (pyarrow's part size);
  both become visible only whole. Never write an object through a `with open_output_stream`
  block that can raise halfway: pyarrow's close on exit publishes the partial object.
- `open_input` is pyarrow's S3 `RandomAccessFile`: one HEAD on open, then every `read_at` /
  `seek`+`read` is a ranged GET of just those bytes. `get_range` is one HEAD + one ranged GET.
- `get` is one HEAD + one GET. Replacing an object with one of the same size while `get`
  runs yields either version whole; with a different size, the HEAD and the GET can see
  different versions (pyarrow exposes no ETag / If-Match), so overwritten keys are only safe
  to read concurrently if their size does not change. shoal's extents are written once.
- `list` keeps only files; pyarrow's folder markers (`dir/` objects, see `delete`) are skipped.
  `mtime_ns` has S3's one-second resolution.
- Missing objects (or a missing bucket, on reads) raise `ObjectNotFoundError`; any other
  pyarrow `OSError` becomes `StorageError` naming the `s3://` key.
- `delete` of a missing object is a no-op. pyarrow's `delete_file` also PUTs an empty marker
  `parent/` so the "folder" survives; it is harmless and invisible to `list`.
- The store pickles (pyarrow's S3FileSystem does), so Spark tasks can receive it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.fs as pafs

from shoal.errors import ObjectNotFoundError, StorageError
from shoal.storage.base import ObjectInfo, check_key, check_prefix


class S3ObjectStore:
    """Objects under `prefix` in `bucket`; `endpoint` (`host:port` or a URL) for non-AWS."""

    def __init__(self, bucket: str, prefix: str = "", *, endpoint: str | None = None,
                 region: str | None = None, access_key: str | None = None,
                 secret_key: str | None = None, session_token: str | None = None,
                 scheme: str = "https") -> None:
        if not bucket or "/" in bucket:
            raise ValueError(f"bucket must be a bare bucket name, got {bucket!r}")
        prefix = prefix.strip("/")
        if prefix:
            check_key(prefix)
        if endpoint and "://" in endpoint:
            scheme, endpoint = endpoint.split("://", 1)
            endpoint = endpoint.rstrip("/")
        if scheme not in ("http", "https"):
            raise ValueError(f"scheme must be http or https, got {scheme!r}")
        self._bucket = bucket
        self._prefix = prefix
        self._base = f"{bucket}/{prefix}" if prefix else bucket
        self._endpoint = endpoint or None
        self._scheme = scheme
        self._fs = pafs.S3FileSystem(
            access_key=access_key, secret_key=secret_key, session_token=session_token,
            region=region, scheme=scheme, endpoint_override=self._endpoint,
            allow_delayed_open=True)    # small puts become one PutObject, not a multipart

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def url(self) -> str:
        return f"s3://{self._base}"

    @property
    def filesystem(self) -> pafs.S3FileSystem:
        """The underlying pyarrow filesystem (paths are `bucket/prefix/key`)."""
        return self._fs

    def __repr__(self) -> str:
        where = f", endpoint={self._scheme}://{self._endpoint}" if self._endpoint else ""
        return f"S3ObjectStore({self.url}{where})"

    # ---- writes ----------------------------------------------------------------------------

    def put(self, path: str, data: bytes | bytearray | memoryview | pa.Buffer) -> None:
        key = self._key(path)
        buffer = data if isinstance(data, pa.Buffer) else pa.py_buffer(data)
        with self._errors("put", path, missing_is_not_found=False):
            # compression=None: pyarrow would otherwise gzip a key ending in ".gz" (and so on
            # for other extensions); an object store stores the bytes it is given.
            stream = self._fs.open_output_stream(key, compression=None)
            stream.write(buffer)    # one write of the whole payload: close never sees a part
            stream.close()

    def delete(self, path: str) -> None:
        key = self._key(path)
        # deleting is idempotent: a missing key is not an error
        with (self._errors("delete", path, missing_is_not_found=False),
              contextlib.suppress(FileNotFoundError)):
            self._fs.delete_file(key)

    # ---- reads -----------------------------------------------------------------------------

    def get(self, path: str) -> bytes:
        key = self._key(path)
        # open_input_file, not open_input_stream: a stream's read() goes in 256 KiB chunks,
        # one ranged GET each, and mixes versions if the object is replaced meanwhile.
        with self._errors("get", path), self._fs.open_input_file(key) as f:
            return f.read()     # the size from the HEAD on open, then one GET for all of it

    def get_range(self, path: str, offset: int, length: int) -> bytes:
        key = self._key(path)
        if offset < 0 or length < 0:
            raise ValueError(
                f"offset and length must be >= 0, got offset={offset} length={length}")
        with self._errors("get_range", path), self._fs.open_input_file(key) as f:
            size = f.size()
            if offset >= size or length == 0:
                return b""      # pyarrow raises for a read that starts past the end
            return f.read_at(min(length, size - offset), offset)

    def size(self, path: str) -> int:
        key = self._key(path)
        with self._errors("size", path):
            info = self._fs.get_file_info(key)
        if info.type != pafs.FileType.File:
            raise ObjectNotFoundError(path)
        return info.size

    def open_input(self, path: str) -> pa.NativeFile:
        key = self._key(path)
        with self._errors("open_input", path):
            return self._fs.open_input_file(key)

    def exists(self, path: str) -> bool:
        key = self._key(path)
        with self._errors("exists", path):
            return self._fs.get_file_info(key).type == pafs.FileType.File

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        check_prefix(prefix)
        start = prefix.rpartition("/")[0]     # deepest "folder" that holds every match
        selector = pafs.FileSelector(f"{self._base}/{start}" if start else self._base,
                                     recursive=True, allow_not_found=True)
        with self._errors("list", prefix, missing_is_not_found=False):
            infos = self._fs.get_file_info(selector)
        cut = len(self._base) + 1
        for info in infos:
            if info.type != pafs.FileType.File:
                continue
            key = info.path[cut:]
            if key.startswith(prefix):
                yield ObjectInfo(path=key, size=info.size, mtime_ns=info.mtime_ns or 0)

    # ---- helpers ---------------------------------------------------------------------------

    def _key(self, path: str) -> str:
        return f"{self._base}/{check_key(path)}"

    @contextmanager
    def _errors(self, op: str, path: str, *, missing_is_not_found: bool = True) -> Iterator[None]:
        try:
            yield
        except FileNotFoundError as exc:
            if missing_is_not_found:
                raise ObjectNotFoundError(path) from exc
            raise StorageError(f"{op} s3://{self._base}/{path}: {exc}") from exc
        except OSError as exc:
            raise StorageError(f"{op} s3://{self._base}/{path}: {exc}") from exc
