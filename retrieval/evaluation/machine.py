"""What a benchmark report says about the machine and its samples: percentiles, peak memory, disk use, CPU."""

from __future__ import annotations

import gc
import math
import os
import platform
import resource
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass


# ----------------------------------------------------------------------------------------------- statistics
def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation; NaN for no values."""
    data = sorted(values)
    if not data:
        return math.nan
    pos = (len(data) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def summary(values: Sequence[float], digits: int = 3) -> dict[str, float | None]:
    """``{"p50", "p95", "mean", "n"}`` of ``values``, rounded."""
    if not values:
        return {"p50": None, "p95": None, "mean": None, "n": 0}
    return {
        "p50": round(percentile(values, 50), digits),
        "p95": round(percentile(values, 95), digits),
        "mean": round(sum(values) / len(values), digits),
        "n": len(values),
    }


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MB (Linux reports KiB); since ``reset_peak_rss`` where
    that worked."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def reset_peak_rss() -> bool:
    """Start a new peak-RSS window at the current RSS (Linux: ``5`` to /proc/self/clear_refs), so each scale's peak
    is its own; False where the kernel does not allow it (the peak is then the process's so far)."""
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def disk_usage_mb(path: Path) -> float:
    """Bytes a folder takes on disk (allocated blocks, as ``du``), in MB."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return round(total / 2**20, 1)


def hardware() -> dict[str, Any]:
    """CPU count and model, OS and library versions the numbers were measured with."""
    model = ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        model = next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "")
    except (OSError, subprocess.SubprocessError):
        pass
    if not model and Path("/proc/cpuinfo").exists():
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    versions = {}
    for name in ("onnxruntime", "chromadb", "rank_bm25", "scipy"):
        try:
            from importlib.metadata import version

            versions[name] = version(name.replace("_", "-"))
        except Exception:
            versions[name] = "?"
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model or platform.processor() or "unknown",
        "python": platform.python_version(),
        "os": platform.platform(),
        **versions,
    }
