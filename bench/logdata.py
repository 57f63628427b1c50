"""The generated log lines every ingest and query benchmark shares: a realistic NDJSON file
(RFC 3339 timestamp, service, level, message text, trace id, status, duration, nested
attributes for a `dynamic` column) of a given size, cached under bench/out/, and its typed
variant without the `dynamic` attributes."""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
SERVICES = [f"svc-{i}" for i in range(40)]
WORDS = ("request served cache miss hit user login token refresh payment declined timeout "
         "upstream retry connection reset handler queue worker shard replica commit").split()
COLUMNS = [{"name": "service", "type": "string"}, {"name": "level", "type": "string"},
           {"name": "message", "type": "string"}, {"name": "trace_id", "type": "string"},
           {"name": "status", "type": "int"}, {"name": "duration_ms", "type": "long"},
           {"name": "attrs", "type": "dynamic"}]


def generate(mb: int) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"logs_{mb}mb.ndjson"
    if path.exists() and path.stat().st_size >= mb << 20:
        return path
    rng = random.Random(1)
    base = 1_700_000_000
    tmp = path.with_suffix(".tmp")
    written = 0
    i = 0
    with open(tmp, "wb") as f:
        while written < mb << 20:
            lines = []
            for _ in range(10_000):
                ts = datetime.fromtimestamp(base + i / 1000, tz=timezone.utc)
                lines.append(json.dumps({
                    "_timestamp": ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                    "service": rng.choice(SERVICES),
                    "level": rng.choice(("info", "info", "info", "warn", "error")),
                    "message": " ".join(rng.choices(WORDS, k=10)),
                    "trace_id": "%032x" % rng.getrandbits(128),
                    "status": rng.choice((200, 200, 200, 201, 404, 500)),
                    "duration_ms": rng.randint(1, 5000),
                    "attrs": {"http": {"method": rng.choice(("GET", "POST")),
                                       "route": f"/api/v1/{rng.choice(WORDS)}"},
                              "user": {"id": rng.randint(1, 100_000)}},
                }, separators=(",", ":")))
                i += 1
            chunk = ("\n".join(lines) + "\n").encode()
            f.write(chunk)
            written += len(chunk)
    tmp.rename(path)
    return path


TYPED_COLUMNS = [c for c in COLUMNS if c["type"] != "dynamic"]


def generate_typed(mb: int, source: Path) -> Path:
    """The lines of `source` without their `dynamic` attrs, up to `mb`: seven typed columns
    (timestamp included)."""
    path = OUT / f"logs_typed_{mb}mb.ndjson"
    if path.exists() and path.stat().st_size >= mb << 20:
        return path
    tmp = path.with_suffix(".tmp")
    written = 0
    with open(source, "rb") as src, open(tmp, "wb") as f:
        for line in src:
            if written >= mb << 20:
                break
            cut = line.index(b',"attrs":')
            f.write(line[:cut] + b"}\n")
            written += cut + 2
    tmp.rename(path)
    return path


RARE_WORD = "deadlock"
DAY_START = "2023-11-14"        # the day of generate_day's rows (UTC)


def generate_day(rows: int, *, rare_every: int = 10_000, out: Path = OUT) -> Path:
    """`rows` log lines of the same shape as `generate`'s, spread evenly over one whole day
    (DAY_START, in time order), with the word RARE_WORD (lowercase, between spaces) in the
    message of about one line in `rare_every`, at random over the day, and nowhere else.
    Cached in `out` (bench/out/) by row count and rate; `generate`'s files are left as they
    are."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / (f"logs_day_{rows}.ndjson" if rare_every == 10_000
                  else f"logs_day_{rows}_rare{rare_every}.ndjson")
    if path.exists():
        return path
    rng = random.Random(2)
    step_us = 86_400_000_000 / rows
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        for start in range(0, rows, 10_000):
            lines = []
            for i in range(start, min(rows, start + 10_000)):
                us = int(i * step_us)
                s, frac = divmod(us, 1_000_000)
                h, rest = divmod(s, 3600)
                words = rng.choices(WORDS, k=10)
                if rng.random() < 1 / rare_every:
                    words[rng.randrange(10)] = RARE_WORD
                lines.append(
                    f'{{"_timestamp":"{DAY_START}T{h:02d}:{rest // 60:02d}:{rest % 60:02d}.'
                    f'{frac:06d}Z","service":"{rng.choice(SERVICES)}",'
                    f'"level":"{rng.choice(("info", "info", "info", "warn", "error"))}",'
                    f'"message":"{" ".join(words)}","trace_id":"{rng.getrandbits(128):032x}",'
                    f'"status":{rng.choice((200, 200, 200, 201, 404, 500))},'
                    f'"duration_ms":{rng.randint(1, 5000)},'
                    f'"attrs":{{"http":{{"method":"{rng.choice(("GET", "POST"))}",'
                    f'"route":"/api/v1/{rng.choice(WORDS)}"}},'
                    f'"user":{{"id":{rng.randint(1, 100_000)}}}}}}}')
            f.write("\n".join(lines) + "\n")
    tmp.rename(path)
    return path
