"""`python -m shoal.ingest._pool_worker FD`: one coercion worker of `shoal.ingest.pool`."""

import sys

from shoal.ingest.pool import serve_worker

if __name__ == "__main__":
    serve_worker(int(sys.argv[1]))
