"""Prometheus frontends (issue #16): metrics in the layout of `shoal.types.prometheus`.

- `scrape.py`, `kind.py`: scheduled pull — scrape jobs bound to a table's properties
  (`shoal.ingest.scrape_binding`), run by the binding supervisor and `shoal pipeline scrape`.
"""
