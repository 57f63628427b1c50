"""The environment shipped to Spark executors: `shoal spark pack`.

`pack_environment(output)` writes a `.tar.gz` laid out as a virtual environment:

    pyvenv.cfg                      home = the directory of this environment's base Python
    bin/python, bin/python3         symlinks to that base interpreter
    lib/pythonX.Y/site-packages/    shoal and every distribution it requires (its pinned
                                    dependencies, found from the installed metadata)

Spark unpacks it in every executor's working directory (`spark.archives=<file>#shoalenv`)
and runs `./shoalenv/bin/python` (`spark.pyspark.python`): Python finds `pyvenv.cfg` beside
the symlink and uses the archive's site-packages, whatever the worker's own environment.
What each node still needs is the same base interpreter at the same path (`home`), i.e.
the same Python build the driver's environment was made from; that is checked at session
start (`shoal.query.spark.cluster`), as is every module shoal's tasks import.

PySpark and py4j are left out: every executor puts its own Spark's `python/lib/pyspark.zip`
and py4j on the Python path first (the versions must match the driver's anyway). Bytecode
caches, `bin/` scripts and an editable install's path hooks are left out too; an editable
`shoal` is copied from its source tree.
"""

from __future__ import annotations

import io
import os
import re
import sys
import sysconfig
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from shoal.errors import ConfigError

ROOT_DISTRIBUTION = "shoal"
# What executors have from their own Spark (`python/lib/*.zip` on the workers' Python path).
SKIP_DISTRIBUTIONS = frozenset({"pyspark", "py4j"})


@dataclass(frozen=True)
class PackSummary:
    path: Path
    bytes: int
    files: int
    distributions: list[str]
    python: str             # the base interpreter every node must have at this path
    seconds: float


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(dist: metadata.Distribution, extras: set[str]) -> Iterator[tuple[str, set[str]]]:
    """(name, extras) of what `dist` requires with `extras`; markers other than `extra` are
    taken as true (a requirement that is not installed is skipped by the caller)."""
    for req in dist.requires or []:
        spec, _, marker = req.partition(";")
        wanted = re.findall(r"""extra\s*==\s*["']([^"']+)["']""", marker)
        if wanted and not any(_canonical(w) in extras for w in wanted):
            continue
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", spec)
        if match:
            names = {_canonical(x) for x in (match.group(2) or "").split(",") if x.strip()}
            yield match.group(1), names


def distributions(root: str = ROOT_DISTRIBUTION) -> list[metadata.Distribution]:
    """`root` and everything it requires (transitively) that is installed here."""
    seen: dict[str, metadata.Distribution] = {}
    todo: list[tuple[str, set[str]]] = [(root, set())]
    done: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        key = (_canonical(name), frozenset(extras))
        if key in done:
            continue
        done.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if name == root:
                raise ConfigError(f"{root} is not installed in {sys.prefix}") from None
            continue
        if _canonical(dist.metadata["Name"]) in SKIP_DISTRIBUTIONS:
            continue
        seen[_canonical(dist.metadata["Name"])] = dist
        todo.extend(_requirements(dist, extras))
    return sorted(seen.values(), key=lambda d: _canonical(d.metadata["Name"]))


def _site_files(dist: metadata.Distribution, site: Path) -> Iterator[tuple[Path, str]]:
    """(file, name in site-packages) of one installed distribution."""
    for rel in dist.files or []:
        parts = Path(str(rel)).parts
        if not parts or parts[0] == ".." or "__pycache__" in parts:
            continue
        if parts[0].startswith("__editable__"):
            continue
        path = Path(str(dist.locate_file(rel)))
        if path.is_file():
            yield path, str(Path(*parts))


def _editable_package(dist: metadata.Distribution, site: Path) -> Iterator[tuple[Path, str]]:
    """An editable install's package, from its source tree (RECORD does not list it)."""
    if not any(str(f).startswith("__editable__") for f in dist.files or []):
        return
    package = Path(__file__).resolve().parents[2]       # this package: src/shoal
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            yield path, str(Path("shoal") / path.relative_to(package))


def pack_environment(output: str | os.PathLike[str], *, compresslevel: int = 1) -> PackSummary:
    """Write the executors' environment to `output` (a .tar.gz); see the module docstring."""
    t0 = time.perf_counter()
    out = Path(output)
    if not out.name.endswith((".tar.gz", ".tgz")):
        raise ConfigError(f"the packed environment must be a .tar.gz, got {out.name}")
    site = Path(sysconfig.get_paths()["purelib"])
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    dists = distributions()
    prefix = f"lib/{version}/site-packages"
    files = 0
    tmp = out.with_name(out.name + ".part")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tmp, "w:gz", compresslevel=compresslevel) as tar:
        cfg = (f"home = {base.parent}\ninclude-system-site-packages = false\n"
               f"version = {sys.version_info.major}.{sys.version_info.minor}."
               f"{sys.version_info.micro}\nexecutable = {base}\n").encode()
        _add_bytes(tar, "pyvenv.cfg", cfg)
        for name in ("bin/python", "bin/python3", f"bin/{version}"):
            link = tarfile.TarInfo(name)
            link.type = tarfile.SYMTYPE
            link.linkname = str(base)
            link.mode = 0o777
            tar.addfile(link)
        written: set[str] = set()
        for dist in dists:
            for path, name in [*_site_files(dist, site), *_editable_package(dist, site)]:
                if name in written:
                    continue
                written.add(name)
                tar.add(str(path), arcname=f"{prefix}/{name}", recursive=False)
                files += 1
    tmp.replace(out)
    return PackSummary(path=out, bytes=out.stat().st_size, files=files,
                       distributions=[f"{d.metadata['Name']}=={d.version}" for d in dists],
                       python=str(base), seconds=time.perf_counter() - t0)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = int(time.time())
    tar.addfile(info, io.BytesIO(data))
