"""Finished runs read and compared: report, compare, export (what benchmarks and
trackers import)."""
