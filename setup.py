"""The one C extension (the rest of the build is declared in pyproject.toml).

`shoal.ingest._scan` (src/shoal/ingest/_scan.c): the NDJSON line scanner, built by `pip install`
(in place for an editable install); the msgspec pass stands in where it is missing.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("shoal.ingest._scan", ["src/shoal/ingest/_scan.c"],
                             extra_compile_args=["-O3", "-Wall", "-Wextra",
                                                 "-Wno-unused-parameter"])])
