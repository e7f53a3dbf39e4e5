"""Benchmarks (`make bench`: `python -m tests.bench.run_bench`) and the trace-format test.

Only `test_*.py` modules here are collected by pytest; the benchmark modules are not.
"""
