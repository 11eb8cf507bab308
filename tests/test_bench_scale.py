"""The measuring helpers of ``bench --scale`` (issue 12): a peak-RSS window per scale, Chroma's size on disk, and
the scale table. Not timed: they check what is reported, never how fast anything was."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.evaluation.bench import format_scale_table
from retrieval.evaluation.machine import disk_usage_mb, peak_rss_mb, reset_peak_rss


def test_disk_usage_counts_allocated_bytes_of_every_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.bin").write_bytes(np.random.default_rng(0).bytes(3 * 2**20))
    (tmp_path / "sub" / "b.bin").write_bytes(np.random.default_rng(1).bytes(2**20))
    assert 4.0 <= disk_usage_mb(tmp_path) <= 4.2
    assert disk_usage_mb(tmp_path / "missing") == 0.0


def test_peak_rss_window_restarts_at_the_current_rss():
    # The window must start at the current RSS: without a reset, peak_rss_mb() is the process's peak so far, which
    # in a worker that ran heavier tests first can lie above the RSS the 300 MB below is added to.
    if not reset_peak_rss():
        pytest.skip("this kernel does not allow resetting the peak RSS (/proc/self/clear_refs)")
    before = peak_rss_mb()
    block = np.ones(300 * 2**20 // 8)  # 300 MB, touched
    assert peak_rss_mb() >= before + 250
    del block
    assert reset_peak_rss()
    assert peak_rss_mb() < before + 250 - 100


def test_scale_table_has_one_line_per_scale_with_every_measure():
    row = {
        "chunks": 1_000_000,
        "stages_ms": {"bm25": {"p50": 31.26, "p95": 88.0}},
        "dense_ms": {"p50": 40.0, "p95": 61.5},
        "turn_ms": {"p50": 900.0, "p95": 1200.25},
        "bm25_build_ms": 45_120.0,
        "index_s": 3600.0,
        "peak_rss_mb": 5123.4,
        "chroma_disk_mb": 4321.0,
    }
    header, rule, line = format_scale_table([row])
    assert header.count("|") == rule.count("|") == line.count("|") == 9
    assert line == ("| 1,000,000 | 31.3 / 88.0 | 40.0 / 61.5 | 900.0 / 1,200.2 | 45.12 | 3,600.0 | 5,123 | 4,321.0 |")
