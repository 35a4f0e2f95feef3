"""Where a replay's time goes: `metastore replay` under py-spy, summed by part of the fold.

    pip install py-spy    # (not a dependency: a sampling profiler, in any venv or on PATH)
    python -m bench.scale_profile postgresql://... [--catalogs FILE] [--rate 50]

Samples every thread, idle ones included (`--idle`), so the folding thread's waits on
PostgreSQL show as such. Each sample is put under the innermost frame of the fold's own
code (projections/, metastore/) it passed through, by module and function; the
prefetching thread (reading and decoding the next batch) apart. Prints the shares.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FRAME = re.compile(r"^(?P<func>.+?) \((?P<file>[^:()]+)(?::\d+)?\)$")
OURS = ("projections/", "metastore/")


def bucket(stack: list[str]) -> tuple[str, str]:
    """(thread, part) of one sample's stack (outermost frame first): the prefetching
    thread or the main one; the innermost frame of our code, and whether the sample is in
    psycopg waiting for the server."""
    thread = "prefetch" if any("Prefetcher._read" in f for f in stack) else "main"
    ours = None
    waiting = False
    for frame in stack:
        m = FRAME.match(frame.strip())
        if m is None:
            continue
        if any(o in m["file"] for o in OURS):
            ours = f"{Path(m['file']).parent.name}/{Path(m['file']).name}:{m['func']}"
        elif "psycopg" in m["file"] and ("wait" in m["func"] or "_communicate" in m["func"]):
            waiting = True
    idle = bool(stack) and any(w in stack[-1] for w in ("wait (threading", "_worker (concurrent"))
    part = (ours or "other") + (" (waiting for PostgreSQL)" if waiting else "")
    return thread, "idle" if idle and not ours else part


def summarize(raw: Path, top: int = 25) -> str:
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack_text, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        stack = [f for f in stack_text.split(";") if f]
        counts[bucket(stack)] += int(n)
    total = sum(counts.values()) or 1
    lines = [f"{total:,} samples"]
    by_thread: collections.Counter[str] = collections.Counter()
    for (thread, _), samples in counts.items():
        by_thread[thread] += samples
    for thread, samples in by_thread.most_common():
        lines.append(f"thread {thread}: {samples / total:.1%}")
        parts = [(part, m) for (t, part), m in counts.most_common() if t == thread]
        lines += [f"  {m / total:6.1%}  {part}" for part, m in parts[:top]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("url")
    parser.add_argument("--catalogs", help="METASTORE_CATALOGS_FILE for the replay")
    parser.add_argument("--rate", type=int, default=50, help="samples a second")
    parser.add_argument("--raw", type=Path, help="keep py-spy's raw stacks here")
    args = parser.parse_args(argv)
    spy = os.environ.get("PY_SPY") or shutil.which("py-spy")
    if not spy:
        print("py-spy not found: pip install py-spy (or set PY_SPY)", file=sys.stderr)
        return 2
    raw = args.raw or Path(tempfile.mkdtemp()) / "replay.txt"
    env = {**os.environ, "METASTORE_DATABASE_URL": args.url, "METASTORE_LOG_LEVEL": "warning"}
    if args.catalogs:
        env["METASTORE_CATALOGS_FILE"] = args.catalogs
    subprocess.run(
        [
            spy,
            "record",
            "--idle",
            "--rate",
            str(args.rate),
            "--format",
            "raw",
            "-o",
            str(raw),
            "--",
            sys.executable,
            "-m",
            "metastore",
            "replay",
            "--no-progress",
        ],
        env=env,
        check=True,
    )
    print(summarize(raw))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
