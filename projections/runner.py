"""`metastore projector`: the single active folder of the log into the read models.

One process at a time is active: it holds a session advisory lock (LEADER_LOCK), its lease,
on a connection it renews every HEARTBEAT_S; PostgreSQL ends that session after LEASE_S
without a statement (idle_session_timeout), so a hung or stopped leader loses the lock
within LEASE_S. A standby polls for the lock and, on taking it, ends every session of the
projector it took over from, so a leader that wakes up again can no longer write. Every
folding transaction also takes FOLD_LOCK, which `metastore replay` takes to swap rebuilt
tables in while nothing moves.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, ModuleType
from typing import Any

import psycopg
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from psycopg.conninfo import make_conninfo

from metastore import __version__, login
from metastore.catalogs import NO_CATALOGS, CatalogMap
from metastore.config import Settings
from metastore.eventlog import NOTIFY_CHANNEL, catch_up_order
from metastore.exit import one_line
from metastore.listen import unavailable
from metastore.metrics import FOLD_BATCH_SECONDS, LEADER
from metastore.migrations import missing_migrations, wait_for_current_schema
from metastore.stalls import stalled_projections
from metastore.store_health import (
    LEADER_LOCK,
    LEASE_HOLDERS,
    STALL_LOG,
    publish,
    read_store_health,
)
from metastore.tls import CertificateReloader, server_context
from projections.fold import (
    BATCH_SIZE,
    BatchResult,
    Prefetcher,
    batch_transaction,
    collector_for_batches,
    fold_batch,
    open_batch,
    tune_session,
)
from projections.replay import RebuildStopped, prepare_tables, rebuild
from projections.schema import (
    FOLD_LOCK,
    LIVE_SCHEMA,
    PROJECTIONS,
    RULES_LOCK,
    adopt_rules,
    outdated_projections,
    rules_key,
)
from projections.settle import Settler

log = logging.getLogger("metastore.projector")


def fold_live_batch(
    conn: psycopg.Connection[Any],
    projections: Sequence[ModuleType] = PROJECTIONS,
    limit: int = BATCH_SIZE,
    prefetcher: Prefetcher | None = None,
    side: psycopg.Connection[Any] | None = None,
    catalogs: CatalogMap = NO_CATALOGS,
    leader_pid: int | None = None,
) -> BatchResult:
    """Folds one batch into the live tables and moves the cursors, in one transaction.

    (Two with a `side` connection: see projections.schema.SIDE_PROJECTIONS.) The datasets'
    names are joined by the catalog map `catalogs`; a projection derived with another map
    is not folded into (it waits for its rebuild). With `leader_pid` (the backend of the
    leader session), raises LeaseLost when that session no longer holds LEADER_LOCK.
    Returns what was read (not `full`: caught up).
    """

    def fenced(on: psycopg.Connection[Any]) -> Callable[[], None]:
        # The side connection folds under this lock too: its statements come after the
        # lock is taken and its commit (one without waits) right after it is released.
        on.execute("SELECT pg_advisory_xact_lock(%s)", (FOLD_LOCK,))
        lease = None if leader_pid is None else on.execute(HOLDS_LEASE, (leader_pid, LEADER_LOCK))

        def check() -> None:
            row = lease.fetchone() if lease is not None else (True,)
            if not (row and row[0]):
                raise LeaseLost

        return check

    with batch_transaction(conn, LIVE_SCHEMA, side, search_path=False):
        cursors = open_batch(conn, projections, LIVE_SCHEMA, side, catalogs, fenced)
        projections = [p for p in projections if p.NAME in cursors]
        if not projections:
            return BatchResult()
        result = fold_batch(
            conn,
            projections,
            cursors,
            limit,
            prefetcher=prefetcher,
            side=side,
            catalogs=catalogs,
            save=True,
        )
    return result


def catch_up(
    conn_or_url: psycopg.Connection[Any] | str,
    limit: int = BATCH_SIZE,
    catalogs: CatalogMap = NO_CATALOGS,
) -> int:
    """Folds everything committed to the log so far into the live tables; returns the count.

    For tests, benchmarks and tools: what the projector process does, once, synchronously
    (on one connection when given one), without the rebuild a changed map needs.
    """
    with collector_for_batches():
        if isinstance(conn_or_url, str):
            with (
                psycopg.connect(conn_or_url) as conn,
                psycopg.connect(conn_or_url) as side,
                Prefetcher(conn_or_url, catalogs) as prefetcher,
            ):
                tune_session(conn)
                tune_session(side)
                return _catch_up(conn, limit, prefetcher, side, catalogs)
        return _catch_up(conn_or_url, limit, None, None, catalogs)


def _catch_up(
    conn: psycopg.Connection[Any],
    limit: int,
    prefetcher: Prefetcher | None,
    side: psycopg.Connection[Any] | None,
    catalogs: CatalogMap,
) -> int:
    with conn.transaction():
        adopt_rules(conn, catalogs)  # (fresh tables; others wait for a rebuild)
    total = 0
    while True:
        result = fold_live_batch(conn, PROJECTIONS, limit, prefetcher, side, catalogs)
        total += result.read
        if not result.full:
            return total


# How long the projector sleeps without a NOTIFY before it looks at the log anyway (a lost
# notification, or events held back behind a long transaction, only delay by this much).
POLL_INTERVAL_S = 1.0
# How often a standby tries to take the leader lock.
STANDBY_RETRY_S = 1.0
# The lease: PostgreSQL ends the leader's session after LEASE_S without a statement, and the
# leader renews it every HEARTBEAT_S from a thread of its own (a long batch keeps it), so a
# standby takes over within LEASE_S + STANDBY_RETRY_S of a leader hanging.
LEASE_S = 10
HEARTBEAT_S = 2.0
# How often the active projector looks for projections swapped in with other rules.
RULES_CHECK_EVERY_S = 2.0
# A client of the HTTPS health port that has not finished its handshake by then is dropped.
HANDSHAKE_TIMEOUT_S = 10.0
# /readyz answers within this whatever the database does (the chart's probe: 3 s).
READY_TIMEOUT_S = 0.9
READY_CONNECT_TIMEOUT_S = 3

# A scrape of the projector's /metrics waits this long for the database's figures, then
# answers with the last ones.
SCRAPE_TIMEOUT_S = 2.5

# Ends every session of the projector this one took over from: its fold transactions hold
# FOLD_LOCK and row locks, and its connections would write again if it woke up.
END_SESSIONS_OF = """
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE application_name = %s AND datname = current_database() AND pid <> pg_backend_pid()
"""
# The fence: every folding transaction checks that its leader session still holds the lock.
HOLDS_LEASE = """
SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = %s
               AND classid = 0 AND objid = %s::bigint::oid AND objsubid = 1)
"""


class LeaseLost(Exception):
    """This projector's leader session no longer holds LEADER_LOCK: it must stop folding."""


def application_name(base: str, host: str, pid: int) -> str:
    """Names one projector process on each of its sessions: its pod (the host name), for
    the lease metric, and its pid, for the standby that ends its sessions. PostgreSQL keeps
    63 bytes: past that the pod and pid alone."""
    process = f"{host}:{pid}"
    name = f"{base} {process}"
    return name if len(name) <= 63 else process[-63:]


class LeaseKeeper:
    """Renews the lease: a statement on the leader connection every HEARTBEAT_S, on a
    thread of its own; `lost` is set when that fails (the session was ended)."""

    def __init__(self, leader: psycopg.Connection[Any]) -> None:
        self.leader = leader
        self.lost = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="lease", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(HEARTBEAT_S):
            try:
                self.leader.execute("SELECT 1")
            except psycopg.Error:
                self.lost.set()
                return

    def close(self) -> None:
        self.stop.set()
        self.thread.join(HEARTBEAT_S + 5)


class BackgroundRebuild:
    """A rebuild of outdated projections (replay.rebuild) on a thread of its own, with its
    own connections, while the projector folds the others: the projections it rebuilds
    are skipped by the live fold (their stored version or rules differ, see
    fold.load_cursors) until it swaps them in."""

    def __init__(self, database_url: str, names: list[str], catalogs: CatalogMap) -> None:
        self.names = names
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=self._run, args=(database_url, catalogs), name="rebuild", daemon=True
        )
        self.thread.start()

    def _run(self, database_url: str, catalogs: CatalogMap) -> None:
        try:
            rebuild(database_url, self.names, catalogs=catalogs, stop=self.stop)
        except RebuildStopped:
            log.info("rebuild stopped", extra={"projections": ",".join(self.names)})
        except BaseException as exc:
            self.error = exc

    @property
    def running(self) -> bool:
        return self.thread.is_alive()

    def check(self) -> None:
        """Raises the rebuild's error, if it failed (in the folding thread: the database
        gone, `lead` starts over; anything else stops the projector, as a failed rebuild
        at start did)."""
        if self.error is not None:
            raise self.error

    def close(self, timeout: float = 10.0) -> None:
        self.stop.set()
        self.thread.join(timeout)


class ProjectorStatus:
    """What /readyz and the logs say about the running projector (shared with the server)."""

    def __init__(self, database_url: str, stall_timeout: float = 60.0) -> None:
        self.database_url = database_url
        self.stall_timeout = stall_timeout
        # starting | standby | rebuilding (folding the projections not being rebuilt) |
        # active | unavailable
        self.role = "starting"
        self.rebuild: BackgroundRebuild | None = None
        self._check: SchemaCheck | None = None
        self._check_lock = threading.Lock()

    def check_schema(self) -> SchemaCheck:
        """/readyz's database check: the one in flight (shared by concurrent probes, so a
        hung database holds one thread, not one per probe) or a new one."""
        with self._check_lock:
            if self._check is None or self._check.done.is_set():
                self._check = SchemaCheck(self.database_url, self.stall_timeout)
            return self._check

    def folding(self) -> None:
        """Active: `rebuilding` while a rebuild runs beside the fold, `active` after."""
        rebuilding = self.rebuild
        if rebuilding is not None and not rebuilding.running:
            self.rebuild = None  # (a failed one is started again by the next `lead`)
            rebuilding.check()
        self.role = "rebuilding" if self.rebuild is not None else "active"

    def rebuild_outdated(self, outdated: list[str], catalogs: CatalogMap) -> None:
        """Starts rebuilding `outdated` beside the fold, unless a rebuild runs already."""
        if not outdated or self.rebuild is not None:
            return
        log.info(
            "projections of another version or catalog map found; rebuilding them "
            "while folding the others",
            extra={"projections": ",".join(outdated)},
        )
        self.rebuild = BackgroundRebuild(self.database_url, outdated, catalogs)
        self.role = "rebuilding"


class SchemaCheck:
    """The missing migrations and the stalled projections, looked up on a daemon thread of
    its own: a probe waits for it at most READY_TIMEOUT_S, whatever the database does."""

    def __init__(self, database_url: str, stall_timeout: float) -> None:
        self.done = threading.Event()
        self.missing: list[str] = []
        self.stalled: list[str] = []
        self.error: psycopg.Error | None = None
        threading.Thread(
            target=self._run, args=(database_url, stall_timeout), name="readyz", daemon=True
        ).start()

    def _run(self, database_url: str, stall_timeout: float) -> None:
        try:
            with login.connect(
                database_url, connect_timeout=READY_CONNECT_TIMEOUT_S, autocommit=True
            ) as conn:
                self.missing = missing_migrations(conn)
                if not self.missing:
                    self.stalled = stalled_projections(conn, stall_timeout)
        except psycopg.Error as exc:
            self.error = exc
        finally:
            self.done.set()


def run_projector(settings: Settings) -> None:
    """`metastore projector`: blocks until SIGTERM/SIGINT; serves /healthz /readyz /metrics."""
    assert settings.database_url is not None
    # Every session of this process carries its own name, whatever PGAPPNAME or the URL
    # say (the chart gives every projector pod one): the lease metric names the pod, and a
    # new leader ends the sessions of the one it took over from by it.
    base = os.environ.get("PGAPPNAME") or "metastore-projector"
    database_url = make_conninfo(
        settings.database_url,
        application_name=application_name(base, socket.gethostname(), os.getpid()),
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("stopping", extra={"signal": signal.Signals(signum).name})
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    LEADER.set(0)
    status = ProjectorStatus(database_url, settings.stall_timeout)
    tls = None
    if settings.tls is not None:
        tls = CertificateReloader(settings.tls).attach(server_context(settings.tls))
    server = start_health_server(settings.host, settings.projector_port, status, tls)
    log.info("projector listening", extra={"port": settings.projector_port, "version": __version__})
    if settings.catalogs:
        log.info(
            "catalog map read",
            extra={
                "file": settings.catalogs.source,
                "entries": len(settings.catalogs.entries),
                "fingerprint": settings.catalogs.fingerprint[:16],
            },
        )
    backoff = 0.5
    try:
        # Up and answering /healthz (and /readyz 503) while the database cannot be reached
        # yet, rather than a crash loop; a schema behind the code still stops it.
        if not wait_for_current_schema(database_url, stop):
            return
        while not stop.is_set():
            try:
                lead(database_url, status, stop, settings.catalogs)
                backoff = 0.5
            except psycopg.OperationalError as exc:
                status.role = "unavailable"
                if login.gate(settings.database_url).reason is None:  # (logged at each refusal)
                    log.warning(
                        "database unavailable; retrying",
                        extra={"error": one_line(exc), "retry_in_s": backoff},
                    )
                stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)
    finally:
        if status.rebuild is not None:
            status.rebuild.close()
        server.shutdown()
        server.server_close()
        log.info("projector stopped")


def lead(
    database_url: str,
    status: ProjectorStatus,
    stop: threading.Event,
    catalogs: CatalogMap = NO_CATALOGS,
) -> None:
    """Waits to become the active projector, then folds until `stop` (or the DB goes away,
    or the lease is lost: then it returns, to stand by again)."""
    with login.connect(database_url, autocommit=True, connect_timeout=10) as leader:
        me = leader.info.parameter_status("application_name")
        leader.execute(f"SET idle_session_timeout = {LEASE_S * 1000}")
        holders: list[str] = []
        while not stop.is_set():
            row = leader.execute("SELECT pg_try_advisory_lock(%s)", (LEADER_LOCK,)).fetchone()
            if row and row[0]:
                break
            holders = [r[0] for r in leader.execute(LEASE_HOLDERS, (LEADER_LOCK,)).fetchall()]
            if status.role != "standby":
                log.info("another projector is active; standing by", extra={"leader": holders})
            status.role = "standby"
            stop.wait(STANDBY_RETRY_S)
        if stop.is_set():
            return
        keeper = LeaseKeeper(leader)
        settler = Settler(database_url)
        try:
            LEADER.set(1)
            log.info("this projector is now active", extra={"lease_s": LEASE_S})
            catch_up_order(leader)  # a restored store: read past the restored positions
            end_sessions_of(leader, [h for h in holders if h.encode() != me])
            # Held as long as this projector leads: `metastore replay` reads the map from it.
            leader.execute("SELECT pg_advisory_lock(%s, %s)", (RULES_LOCK, rules_key(catalogs)))
            leader.execute(f"LISTEN {NOTIFY_CHANNEL}")
            status.rebuild_outdated(prepare_tables(database_url, catalogs), catalogs)
            status.folding()
            with (
                login.connect(database_url, connect_timeout=10) as conn,
                login.connect(database_url, connect_timeout=10) as side,
                Prefetcher(database_url, catalogs) as prefetcher,
            ):
                tune_session(conn)
                tune_session(side)
                fold_until_stopped(
                    conn, side, leader, stop, prefetcher, catalogs, status, keeper, settler
                )
        except LeaseLost:
            log.warning("this projector lost its lease; standing by")
        finally:
            LEADER.set(0)
            keeper.close()
            settler.close()


def end_sessions_of(leader: psycopg.Connection[Any], previous: list[str]) -> None:
    """Ends the sessions of the projector that held the lease before (seen while standing
    by): its open fold transactions would hold FOLD_LOCK and row locks, and its
    connections would fold again if it woke up."""
    for name in previous:
        try:
            row = leader.execute(END_SESSIONS_OF, (name,)).fetchone()
        except psycopg.Error as exc:  # another role's sessions: the fence still holds
            log.warning(
                "sessions of the previous projector not ended",
                extra={"previous": name, "error": one_line(exc)},
            )
            continue
        log.info(
            "sessions of the previous projector ended",
            extra={"previous": name, "sessions": row[0] if row else 0},
        )


def fold_until_stopped(
    conn: psycopg.Connection[Any],
    side: psycopg.Connection[Any],
    leader: psycopg.Connection[Any],
    stop: threading.Event,
    prefetcher: Prefetcher,
    catalogs: CatalogMap = NO_CATALOGS,
    status: ProjectorStatus | None = None,
    keeper: LeaseKeeper | None = None,
    settler: Settler | None = None,
) -> None:
    last_check = 0.0
    leader_pid = leader.info.backend_pid
    # What start-up made (modules, connections) lives as long as the process: out of the
    # collector's sight, a full collection no longer walks it in the middle of a batch
    # (30-47 ms a time, that batch's lag; docs/PERFORMANCE.md, "The lag's tail traced").
    gc.collect()
    gc.freeze()
    with collector_for_batches():
        while not stop.is_set():
            if keeper is not None and keeper.lost.is_set():
                raise LeaseLost
            started = time.monotonic()
            result = fold_live_batch(
                conn, prefetcher=prefetcher, side=side, catalogs=catalogs, leader_pid=leader_pid
            )
            if status is not None:
                status.folding()  # (a failed rebuild raises here, and the projector stops)
            if result.read:
                FOLD_BATCH_SECONDS.observe(time.monotonic() - started)
            if settler is not None:
                settler.batch(result.read, result.full)
            if time.monotonic() - last_check > RULES_CHECK_EVERY_S:
                if status is not None and status.rebuild is None:
                    # Tables swapped in by a replay with another map (or version) are not
                    # folded into (see fold.load_cursors): rebuilt with this projector's.
                    with conn.transaction():
                        outdated = outdated_projections(conn, catalogs)
                    status.rebuild_outdated(outdated, catalogs)
                last_check = time.monotonic()
            if result.full:
                continue
            # Caught up: sleep until a NOTIFY (or the poll interval), then drain the others.
            for _ in leader.notifies(timeout=POLL_INTERVAL_S, stop_after=1):
                pass
            # What has arrived besides, without waiting: the wait (it was 5 ms, in which
            # more NOTIFYs came at 1,000 events/s) added to every batch's lag.
            for _ in leader.notifies(timeout=0):
                pass


def start_health_server(
    host: str, port: int, status: ProjectorStatus, tls: ssl.SSLContext | None = None
) -> ThreadingHTTPServer:
    """/healthz (alive), /readyz (database reachable, schema current), /metrics; HTTPS only
    when given a TLS context."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                self.reply(200, {"status": "ok", "role": status.role})
            elif path == "/readyz":
                code, body = readiness(status)
                self.reply(code, body)
            elif path == "/metrics":
                observe_store(status)
                payload = generate_latest()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE_LATEST)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            else:
                self.reply(404, {"status": "not found"})

        def reply(self, code: int, body: dict[str, Any]) -> None:
            payload = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # probes every few seconds are not news

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def finish_request(self, request: Any, client_address: Any) -> None:
            if tls is None:
                super().finish_request(request, client_address)
                return
            # The handshake runs in the connection's own thread, never in the accept loop.
            request.settimeout(HANDSHAKE_TIMEOUT_S)
            try:
                secure = tls.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return  # plain HTTP on the HTTPS port, or a client that gave up
            try:
                super().finish_request(secure, client_address)
            finally:
                secure.close()

    try:
        server = Server((host, port), Handler)
    except OSError as exc:  # a port in use: one line naming the variable, not a traceback
        raise unavailable("METASTORE_PROJECTOR_PORT", host, port, exc) from None
    threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
    return server


def observe_store(status: ProjectorStatus) -> None:
    """Sets the projections' and the lease's gauges from the database (metastore.
    store_health), on a connection of the scrape's own, waiting SCRAPE_TIMEOUT_S at most."""
    done = threading.Event()

    def read() -> None:
        try:
            with login.connect(
                status.database_url, connect_timeout=READY_CONNECT_TIMEOUT_S, autocommit=True
            ) as conn:
                publish(read_store_health(conn), status.stall_timeout)
        except psycopg.Error as exc:
            log.warning("projections not measured", extra={"error": one_line(exc)})
        finally:
            done.set()

    threading.Thread(target=read, name="scrape", daemon=True).start()
    done.wait(SCRAPE_TIMEOUT_S)


def readiness(status: ProjectorStatus) -> tuple[int, dict[str, Any]]:
    """Ready when the database answers with a current schema and, on the active projector,
    no projection is stalled (metastore.stalls) but those it is rebuilding."""
    check = status.check_schema()
    if not check.done.wait(READY_TIMEOUT_S):
        reason = f"database did not answer within {READY_TIMEOUT_S} s"
        return 503, {"status": "unavailable", "reason": reason}
    if check.error is not None:
        reason = login.gate(status.database_url).unavailable_reason()
        return 503, {"status": "unavailable", "reason": reason}
    missing, stalled = check.missing, check.stalled
    if not missing:
        STALL_LOG.observe(stalled, status.stall_timeout)
    if missing:
        return 503, {
            "status": "unavailable",
            "reason": "schema behind; run `metastore migrate`",
            "missing_migrations": missing,
        }
    rebuild = status.rebuild
    rebuilding = rebuild.names if rebuild is not None and rebuild.running else []
    body: dict[str, Any] = {"status": "ok", "role": status.role}
    if rebuilding:
        body["rebuilding"] = rebuilding
    if stalled:
        body["stalled_projections"] = stalled
    if status.role in ("active", "rebuilding") and set(stalled) - set(rebuilding):
        body["status"] = "stalled"
        body["reason"] = (
            f"projections not moved for over {status.stall_timeout:g} s while events wait"
        )
        return 503, body
    return 200, body
