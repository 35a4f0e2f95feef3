# Benchmarks.  Included by the top-level Makefile (which defines VENV, PY and STAMP).
#
#   make bench                          every figure, full sizes (17-22 min on 2 cores), into
#                                       docs/BENCHMARKS.md; not part of `make test`
#   make bench BENCH_ARGS=--quick       tiny sizes, seconds (what tests/test_bench_smoke.py runs)
#   make bench BENCH_ARGS='--only lag'  one group: ingest, batch, lag, log
BENCH_ARGS ?=

.PHONY: bench

## bench: the performance checks against same-run baselines, written to docs/BENCHMARKS.md
bench: $(STAMP)
	$(PY) -m bench.run $(BENCH_ARGS)
