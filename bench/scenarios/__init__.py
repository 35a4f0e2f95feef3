"""The scenarios of `python -m bench.scenario` (bench/scenario.py lists them), one a module."""
