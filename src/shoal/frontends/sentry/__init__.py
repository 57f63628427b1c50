"""Sentry as a source (docs/sentry.md): the SDK's envelope and store endpoints write errors
and transactions into a table (`events.py`, `envelope.py`, `sink.py`; the HTTP edge is
`shoal.server.sentry_http`), and a table bound to a Sentry organisation and project pulls
its issues through Sentry's web API on a schedule (`binding.py`, `pull.py`, `kind.py`).
"""
