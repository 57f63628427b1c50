"""Memory of a process tree from /proc (Linux): resident now, and peak since a reset.

`PeakMeter(pid)` measures what one piece of work costs a running server: `start()` records
the tree's resident memory (VmRSS of the process and all its descendants) and resets each
process's peak (`echo 5 > /proc/<pid>/clear_refs`; where the kernel refuses, the old peak
stays, which can only overstate the growth); `growth_bytes()` is then the sum of the peaks
(VmHWM) minus that starting point. Children that appear in between count with their whole
peak.
"""

from __future__ import annotations

from pathlib import Path


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (via /proc/<pid>/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo.extend(int(c) for c in (task / "children").read_text().split())
            except OSError:
                continue
    return out


def status_kb(pid: int, key: str) -> int:
    """A `kB` field of /proc/<pid>/status (`VmRSS`, `VmHWM`); 0 if the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class PeakMeter:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.rss_before_kb = 0
        self.reset_ok = False

    def start(self) -> PeakMeter:
        pids = descendants(self.pid)
        self.rss_before_kb = sum(status_kb(p, "VmRSS") for p in pids)
        self.reset_ok = True
        for p in pids:
            try:
                Path(f"/proc/{p}/clear_refs").write_text("5")
            except OSError:
                self.reset_ok = False
        return self

    def peak_kb(self) -> int:
        return sum(status_kb(p, "VmHWM") for p in descendants(self.pid))

    def growth_bytes(self) -> int:
        return max(0, self.peak_kb() - self.rss_before_kb) * 1024
