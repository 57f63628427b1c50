"""Prometheus frontends: metrics in the layout of `shoal.types.prometheus`.

- `remote_write.py`, `sink.py`: the remote write 1.0 receiver's decoding, mapping and write
  (`PromWriteSink`); its HTTP edge is `write.py`.
- `api.py`: the Prometheus HTTP query API, answering PromQL (`promql/`) over those tables.
- `scrape.py`, `kind.py`: scheduled pull — scrape jobs bound to a table's properties
  (`binding.py`, registered in `shoal.bindings`), run by the binding supervisor and
  `shoal pipeline scrape`.
"""
