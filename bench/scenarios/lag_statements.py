"""Where the lag run's CPU goes: each process's share and the server's statements.

    python -m bench.scenario lag-statements [--rate 1000] [--seconds 60] [--top 30]

Runs make bench's lag figure (bench/fig_lag.py: `metastore api` and `metastore projector` on
a throwaway PostgreSQL loading pg_stat_statements, an open-loop client at `--rate` events/s)
and prints the lag's p50 and p99; the CPU each process used over the middle of the run, as a
share of one core (the api, the projector, the server's backends of each, this client); and
the server's statements by time, planning and executing, with their calls and rows. At
1,000 events/s on 2 cores the processes' shares add up to nearly both cores, so what a batch
costs anyone is what the lag waits for.
"""

from __future__ import annotations

import collections
import os
import tempfile
import threading
import time
from pathlib import Path

import psycopg

from bench import datagen, fig_lag, loadgen
from bench.harness import WARM_WAL_SEGMENTS, cluster
from bench.scenario import parser

STATEMENTS = """
SELECT calls, rows, round(total_plan_time::numeric), round(total_exec_time::numeric),
       left(regexp_replace(query, '\\s+', ' ', 'g'), 100)
FROM pg_stat_statements ORDER BY total_plan_time + total_exec_time DESC LIMIT %s
"""
TOTALS = "SELECT sum(calls), sum(total_plan_time), sum(total_exec_time) FROM pg_stat_statements"
# the server's backends by the client they serve (the projector names its connections)
BACKENDS = (
    "SELECT pid, application_name FROM pg_stat_activity WHERE backend_type = 'client backend'"
)


def main(argv: list[str]) -> int:
    cli = parser("lag-statements", __doc__, other=False, rounds=None)
    cli.add_argument("--rate", type=int, default=1_000)
    cli.add_argument("--seconds", type=float, default=60.0)
    cli.add_argument("--seed", type=int, default=20241017)
    cli.add_argument("--top", type=int, default=30)
    args = cli.parse_args(argv)
    bodies = list(datagen.events(100_000, int(args.rate * args.seconds), args.seed + 3))
    with cluster("lag-statements", WARM_WAL_SEGMENTS) as pg, tempfile.TemporaryDirectory() as logs:
        url = pg.database()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        pg.pg.stop()
        pg.pg.restart_stopped()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET pg_stat_statements.track_planning = on")
            conn.execute("SELECT pg_reload_conf()")
            conn.execute("CREATE EXTENSION pg_stat_statements")
            conn.execute("SELECT pg_stat_statements_reset()")
        shares: dict[str, float] = {}
        sampler = threading.Thread(
            target=_cpu_shares, args=(url, args.seconds * 0.25, args.seconds * 0.5, shares)
        )
        sampler.start()
        found = fig_lag.run(url, bodies, args.rate, args.seconds, Path(logs))
        sampler.join()
        with psycopg.connect(url, autocommit=True) as conn:
            calls, plan, execute = conn.execute(TOTALS).fetchone() or (0, 0.0, 0.0)
            statements = conn.execute(STATEMENTS, (args.top,)).fetchall()
    lags, missing = fig_lag.lags_of(found)
    values = [lag for _, lag in lags]
    print(
        f"lag p50 {loadgen.percentile(values, 50):.3f} s, p99 {loadgen.percentile(values, 99):.3f}"
        f" s, max {max(values):.3f} s; {missing} never visible"
    )
    print(
        f"CPU over seconds {args.seconds * 0.25:.0f}-{args.seconds * 0.75:.0f} of the run,"
        f" % of one core ({sum(shares.values()):.0f} % in all):"
    )
    for name, share in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f"  {share:6.1f}  {name}")
    print(
        f"the server's statements: {calls:,} calls, planning {plan / 1000:.1f} s, executing"
        f" {execute / 1000:.1f} s; the top {args.top} (calls, rows, planning ms, executing ms):"
    )
    for count, rows, planned, executed, text in statements:
        print(f"  {count:7,} {rows:9,} {planned:7,} {executed:7,}  {text}")
    return 0


def _cpu_shares(url: str, after: float, seconds: float, shares: dict[str, float]) -> None:
    """Fills `shares`: each process group's CPU over `seconds` from `after` seconds on, as a
    percentage of one core (from /proc: user and system time)."""
    time.sleep(after)
    with psycopg.connect(url, autocommit=True) as conn:
        backends = {pid: name for pid, name in conn.execute(BACKENDS).fetchall()}
    before, started = _ticks(backends), time.perf_counter()
    time.sleep(seconds)
    after_ticks, elapsed = _ticks(backends), time.perf_counter() - started
    hz = os.sysconf("SC_CLK_TCK")
    for group, ticks in after_ticks.items():
        shares[group] = (ticks - before.get(group, 0)) / hz / elapsed * 100


def _ticks(backends: dict[int, str]) -> collections.Counter[str]:
    """CPU ticks so far of the api, the projector, the server's backends (by their client:
    the projector's, the others') and other server processes, and this process."""
    ticks: collections.Counter[str] = collections.Counter()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        pid = int(entry.name)
        if pid == os.getpid():
            group = "this client (bench: the open-loop posts and the watcher)"
        elif "metastore api" in command or "metastore projector" in command:
            group = "the " + command.split("metastore ", 1)[1].split()[0] + " process"
        elif pid in backends:
            group = "backends of the " + (
                "projector" if "projector" in backends[pid] else "api and the watcher"
            )
        elif command.startswith("postgres:"):
            group = "the server's other processes (WAL writer, checkpointer, autovacuum)"
        else:
            continue
        ticks[group] += int(fields[11]) + int(fields[12])
    return ticks
