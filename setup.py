"""The C extensions (the rest of the build is declared in pyproject.toml).

Built by `pip install` (in place for an editable install); each has a pure-Python stand-in
that the code falls back to, with a warning, where it is missing:
- `shoal.ingest._scan` (src/shoal/ingest/_scan.c): the NDJSON line scanner;
- `shoal.format._kernels` (src/shoal/format/_kernels.c): extent statistics kernels.
"""

from setuptools import Extension, setup

FLAGS = ["-O3", "-Wall", "-Wextra", "-Wno-unused-parameter"]
SHARED = {"include_dirs": ["src/shoal"], "depends": ["src/shoal/_native.h"],
          "extra_compile_args": FLAGS}  # _native.h: what both extensions share

setup(ext_modules=[
    Extension("shoal.ingest._scan", ["src/shoal/ingest/_scan.c"], **SHARED),
    Extension("shoal.format._kernels", ["src/shoal/format/_kernels.c"], **SHARED),
])
