"""The ingest layer's C extension, `shoal.ingest._scan` (`_scan.c`), or None where it is not
built (an install without a C compiler): its users then take their Python forms, which stay
as the reference the tests hold it to. Light on purpose (no numpy, no pyarrow): `chunks.py`,
which `shoal --help` imports, takes it from here."""

from __future__ import annotations

from typing import Any

from shoal.native import optional_extension

scan: Any = optional_extension("shoal.ingest._scan",
                               "coercion uses its slower msgspec and numpy forms")
