"""Benchmark scripts: each compares plnt with the limit beneath it in one run (see README.md)."""
