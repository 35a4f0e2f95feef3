# Benchmarks.  Included by the top-level Makefile (which defines VENV, PY and STAMP).
#
#   make bench                          every figure, full sizes (17-22 min on 2 cores), into
#                                       docs/BENCHMARKS.md; not part of `make test`
#   make bench BENCH_ARGS=--quick       tiny sizes, seconds (what tests/test_bench_smoke.py runs)
#   make bench BENCH_ARGS='--only lag'  one group: ingest, batch, lag, log, bounded, chain
#   make bench-scale                    a platform's year (5,000,000 events, about 1.5 hours and
#                                       51 GB of disk on 2 cores) measured at 1M, 2.5M and 5M
#                                       events (the replay at 1M and 5M; --replay-every for all),
#                                       into docs/BENCHMARKS-SCALE.md and docs/scale/*.png
#   make bench-scale SCALE_ARGS='--max-events 250000'   the same steps, scaled down
#   make bench-tools                    install wrk (Debian), which drives single-event ingest
#                                       and its bare-route baseline; without it the Python
#                                       client does, and the bare route is bound by it
BENCH_ARGS ?=
SCALE_ARGS ?=

.PHONY: bench bench-scale bench-tools

## bench: the performance checks against same-run baselines, written to docs/BENCHMARKS.md
bench: $(STAMP)
	@command -v wrk >/dev/null || echo "bench: wrk not installed (make bench-tools); single-event ingest falls back to the Python client" >&2
	$(PY) -m bench.run $(BENCH_ARGS)

## bench-scale: a platform's year at growing sizes, written to docs/BENCHMARKS-SCALE.md
bench-scale: $(STAMP)
	$(PY) -m bench.run --scale $(SCALE_ARGS)

bench-tools:
	command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
