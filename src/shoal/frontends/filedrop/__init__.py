"""File-drop ingest (docs/filedrop.md): NDJSON objects (gzip too) dropped under a watched prefix.

`DropSource` names the prefix (a local directory or `s3://bucket/prefix`);
`FileDropPipeline` scans it, runs one Spark task per group of new objects
(`task.process_files`: hash, ledger check, coerce, write extents) and commits each group on
the driver: rejects first, then the extents with one ledger row `filedrop:{sha256}` per file
in one compare-and-swap. Bad lines land in `<table>__rejects` with file and line.
`resolve_binding` reads a table's file-drop binding (`WITH (filedrop_path='...')`, `binding.py`);
`kind.FileDropKind` runs bound tables under the binding supervisor (`frontends.supervisor`).
"""

from shoal.frontends.filedrop.binding import FileDropBinding, resolve_binding
from shoal.frontends.filedrop.pipeline import (FileDropPipeline, FileDropTaskError,
                                               ScanProgress, ScanSummary)
from shoal.frontends.filedrop.source import DropSource, is_drop_name
from shoal.frontends.filedrop.task import FileResult, TaskSpec, ledger_key, process_files

__all__ = ["DropSource", "FileDropBinding", "FileDropPipeline", "FileDropTaskError",
           "FileResult", "ScanProgress", "ScanSummary", "TaskSpec", "is_drop_name", "ledger_key",
           "process_files", "resolve_binding"]
