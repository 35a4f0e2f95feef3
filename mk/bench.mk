# Benchmarks.  Included by the top-level Makefile (which defines VENV, PY and STAMP).
#
#   make bench                          every figure, full sizes (17-22 min on 2 cores), into
#                                       docs/BENCHMARKS.md; not part of `make test`
#   make bench BENCH_ARGS=--quick       tiny sizes, seconds (what tests/test_bench_smoke.py runs)
#   make bench BENCH_ARGS='--only lag'  one group: ingest, batch, lag, log, chain
#   make bench-tools                    install wrk (Debian), which drives single-event ingest
#                                       and its bare-route baseline; without it the Python
#                                       client does, and the bare route is bound by it
BENCH_ARGS ?=

.PHONY: bench bench-tools

## bench: the performance checks against same-run baselines, written to docs/BENCHMARKS.md
bench: $(STAMP)
	@command -v wrk >/dev/null || echo "bench: wrk not installed (make bench-tools); single-event ingest falls back to the Python client" >&2
	$(PY) -m bench.run $(BENCH_ARGS)

bench-tools:
	command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
