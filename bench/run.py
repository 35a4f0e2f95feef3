"""`make bench`: runs every performance check and writes docs/BENCHMARKS.md.

    python -m bench.run            # the full run (17-22 minutes on 2 cores)
    python -m bench.run --quick    # tiny sizes, seconds (the smoke test)
    python -m bench.run --only ingest,batch,lag,log,bounded,chain,authz,search
    python -m bench.run --scale    # a platform's year at growing sizes (bench/scale.py)

Every figure gets a row even when it cannot be measured (a piece not landed, a process
that failed): the value is n/a and the notes say why, so the table always has them all.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

from bench import (
    fig_authz,
    fig_batch,
    fig_bounded,
    fig_chain,
    fig_find,
    fig_ingest,
    fig_lag,
    fig_log,
    loadgen,
)
from bench.context import Context
from bench.harness import ROOT, Missing
from bench.report import Report, Row, load_average, machine, now, render
from bench.sizes import FULL, QUICK, SEED
from metastore.embedded_pg import EmbeddedPostgresError, find_bindir

GROUPS = ("ingest", "batch", "lag", "log", "bounded", "chain", "authz", "search")


def _postgres_version() -> str:
    try:
        done = subprocess.run(
            [str(find_bindir() / "postgres"), "--version"],
            capture_output=True,
            text=True,
            check=False,
        )
    except (OSError, EmbeddedPostgresError):
        return ""
    return "PostgreSQL " + done.stdout.split()[-1] if done.stdout.strip() else ""


def _run_group(ctx: Context, rows: list[Row], measure: Callable[[list[Row]], None]) -> None:
    try:
        measure(rows)
    except Exception as exc:  # the report says what failed, the run goes on
        if not isinstance(exc, Missing):
            traceback.print_exc()
        reason = f"n/a: {type(exc).__name__}: {str(exc).strip()[:300]}"
        ctx.say(f"failed: {reason}")
        for row in rows:
            if row.value is None and not row.note.startswith("n/a"):
                row.note = reason


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes (seconds)")
    parser.add_argument(
        "--only",
        default=",".join(GROUPS),
        help=f"comma-separated groups to run ({', '.join(GROUPS)})",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="where to write the markdown (default docs/BENCHMARKS.md, with --scale "
        "docs/BENCHMARKS-SCALE.md and its pictures in docs/scale/)",
    )
    parser.add_argument("--seed", type=int, default=SEED)
    scale_args = parser.add_argument_group("the scale mode (make bench-scale)")
    scale_args.add_argument(
        "--scale", action="store_true", help="a platform's year, measured at growing sizes"
    )
    scale_args.add_argument(
        "--max-events",
        type=int,
        help="the largest size (the default steps 1M, 2.5M, 5M scaled to it)",
    )
    scale_args.add_argument("--sizes", help="the sizes to measure at, comma-separated")
    scale_args.add_argument(
        "--keep", action="store_true", help="leave the loaded store running (for analysis)"
    )
    scale_args.add_argument(
        "--replay-every",
        action="store_true",
        help="replay at every size (default: at the first and the largest)",
    )
    args = parser.parse_args(argv)
    command = "python -m bench.run " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    if args.scale:
        return _scale(args, command.strip())
    if args.max_events or args.sizes or args.keep or args.replay_every:
        parser.error("--max-events, --sizes, --keep and --replay-every go with --scale")
    args.out = args.out or str(ROOT / "docs" / "BENCHMARKS.md")
    only = [g.strip() for g in args.only.split(",") if g.strip()]
    unknown = set(only) - set(GROUPS)
    if unknown:
        parser.error(f"unknown groups: {', '.join(sorted(unknown))}")

    sizes = QUICK if args.quick else FULL
    log_dir = Path(tempfile.mkdtemp(prefix="metastore-bench-logs-"))
    ctx = Context(sizes=sizes, log_dir=log_dir, seed=args.seed, quick=args.quick)
    report = Report(
        mode=sizes.name,
        command=command.strip(),
        machine=machine(),
        started=now(),
        load_before=load_average(),
    )
    report.machine.postgres = _postgres_version()
    ctx.say(f"{sizes.name} run, logs in {log_dir}, load {report.load_before}")

    groups: dict[str, tuple[list[Row], Callable[[list[Row]], None]]] = {
        "ingest": (fig_ingest.rows(ctx), lambda rows: fig_ingest.measure(ctx, rows)),
        "batch": (fig_batch.rows(ctx), lambda rows: fig_batch.measure(ctx, rows)),
        "lag": (fig_lag.rows(ctx), lambda rows: fig_lag.measure(ctx, rows)),
        "log": (fig_log.rows(ctx), lambda rows: fig_log.measure(ctx, rows, report.notes)),
        "bounded": (fig_bounded.rows(ctx), lambda rows: fig_bounded.measure(ctx, rows)),
        "chain": (fig_chain.rows(ctx), lambda rows: fig_chain.measure(ctx, rows)),
        "authz": (fig_authz.rows(ctx), lambda rows: fig_authz.measure(ctx, rows)),
        "search": (fig_find.rows(ctx), lambda rows: fig_find.measure(ctx, rows)),
    }
    for name in GROUPS:
        rows, measure = groups[name]
        report.rows += rows
        if name not in only:
            for row in rows:
                row.note = row.note or f"n/a: not run (--only {args.only})"
            continue
        _run_group(ctx, rows, measure)
        report.load_samples.append(f"{load_average()} (after {name})")

    tool = (
        "wrk (one thread, a Lua script making each body a distinct event)"
        if loadgen.have_wrk()
        else "the asyncio load generator, because wrk is not installed (`make bench-tools`): "
        "its figures and its bare-route baseline are bound by that client"
    )
    report.notes.append(
        f"Load generators (the `client` column): single-event ingest and its bare-route "
        f"baseline use {tool}; batches, the fixed-rate lag run and the read queries use "
        "bench/loadgen.py (raw HTTP/1.1 over asyncio streams on uvloop). The client runs on "
        "the same 2 cores as the server and PostgreSQL, so it is kept cheap and its CPU is "
        "reported beside each ingest figure; the baselines run under the same client."
    )
    report.notes.append(
        "Every benchmark group starts its own throwaway PostgreSQL (fsync on, "
        "shared_buffers 256MB, the settings of metastore.embedded_pg, plus min_wal_size "
        "1GB with 1 GB of WAL segments written and recycled before anything is measured, "
        "as on a server that has been running: see bench/harness.py) and the real "
        "`python -m metastore api` / `projector` / `replay` processes."
    )
    report.finished = now()
    report.load_after = load_average()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(report), encoding="utf-8")
    ctx.say(f"wrote {out}")
    if all(
        row.value is not None or row.note.startswith("n/a: not run")
        for row in report.rows
        if not row.figure.startswith("as-of")
    ):
        shutil.rmtree(log_dir, ignore_errors=True)
    else:
        ctx.say(f"some figures are n/a; the processes' logs are kept in {log_dir}")
    return 0


def _scale(args: argparse.Namespace, command: str) -> int:
    from bench import scale

    sizes, disk = scale.plan_sizes(args.max_events, args.sizes)
    out = Path(args.out or ROOT / "docs" / "BENCHMARKS-SCALE.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    log_dir = Path(tempfile.mkdtemp(prefix="metastore-bench-scale-logs-"))
    scale.run(
        sizes,
        args.seed,
        out,
        log_dir,
        command,
        keep=args.keep,
        disk=disk,
        replay_every=args.replay_every,
    )
    shutil.rmtree(log_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
