"""Benchmarks, each runnable as `python -m benchmarks.<name>`; results go under results/bench/."""
