"""The Prometheus frontend (issue #16): remote write (`remote_write`, `PromWriteSink`) into the
tables whose layout `shoal.types.prometheus` defines. The HTTP edge is the server's
(`shoal.server.prometheus_write`)."""
