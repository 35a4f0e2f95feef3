"""The `metastore` command line: dev, migrate, api, projector, replay."""

from __future__ import annotations

import argparse
import gc
import ipaddress
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from metastore import __version__
from metastore.config import ConfigError, Settings, load_settings
from metastore.exit import Exit, one_line
from metastore.logs import configure_logging

log = logging.getLogger("metastore")


def _database_url(settings: Settings) -> str:
    if not settings.database_url:
        raise Exit("METASTORE_DATABASE_URL is not set (the PostgreSQL URL to use)")
    return settings.database_url


def cmd_migrate(settings: Settings, args: argparse.Namespace) -> None:
    from metastore.migrations import apply_migrations

    applied = apply_migrations(
        _database_url(settings),
        api_role=settings.api_role,
        projector_role=settings.projector_role,
    )
    # (its version on the line that ends it: a migrate that fails says why in one line)
    log.info("schema is current", extra={"applied": len(applied), "version": __version__})
    print(f"applied {len(applied)} migration(s); the schema is current (metastore {__version__})")


def cmd_api(settings: Settings, args: argparse.Namespace) -> None:
    import uvicorn

    from metastore.app import create_app
    from metastore.http_protocol import api_http_protocol
    from metastore.listen import listening_socket
    from metastore.migrations import wait_for_current_schema
    from metastore.tls import CertificateReloader, server_context

    url = _database_url(settings)
    # A configuration mistake is reported before the database is asked anything.
    if not settings.auth_configured and not settings.auth_disabled:
        raise Exit(
            "no tokens configured (METASTORE_INGEST_TOKENS, METASTORE_READ_TOKENS, "
            "METASTORE_EXPORT_TOKENS or their _FILE variants); set METASTORE_AUTH=disabled "
            "to run without authentication"
        )
    # Bound before anything starts, so a port in use is one line naming METASTORE_PORT.
    sock = listening_socket(settings.host, settings.port, "METASTORE_PORT")
    app = create_app(settings)
    log.info("api starting", extra={"version": __version__, "port": settings.port})
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,
        proxy_headers=True,
        timeout_keep_alive=15,
        timeout_graceful_shutdown=10,
        # METASTORE_REQUEST_TIMEOUT, the head limit, one send per answer
        # (metastore/http_protocol.py).
        http=api_http_protocol(settings.request_timeout),
        # The API serves no WebSocket: an upgrade request is answered as plain HTTP.
        ws="none",
        # With TLS the port speaks HTTPS only: a plain-HTTP client fails its handshake.
        ssl_certfile=settings.tls.cert_file if settings.tls else None,
        ssl_keyfile=settings.tls.key_file if settings.tls else None,
    )
    config.load()
    if settings.tls is not None:
        # Our context rather than uvicorn's: the same one the projector serves, and one that
        # serves a renewed certificate without a restart (metastore/tls.py).
        config.ssl = CertificateReloader(settings.tls).attach(server_context(settings.tls))
    # What start-up made lives as long as the process: out of the collector's sight, a full
    # collection under load no longer pauses every request in flight (docs/PERFORMANCE.md,
    # "gc.freeze() after start-up").
    gc.collect()
    gc.freeze()
    server = uvicorn.Server(config)
    # The API serves (/healthz 200, /readyz 503) while it waits for a database that cannot
    # be reached yet, rather than exiting into a crash loop; a schema behind the code
    # still stops it, once the database answers.
    refused: list[Exception] = []
    stop_waiting = threading.Event()

    def wait_for_schema() -> None:
        try:
            wait_for_current_schema(url, stop_waiting)
        except Exception as exc:
            refused.append(exc)
            server.should_exit = True

    waiter = threading.Thread(target=wait_for_schema, name="wait-for-database", daemon=True)
    waiter.start()
    try:
        server.run(sockets=[sock])
    finally:
        stop_waiting.set()
    waiter.join(timeout=5)
    if refused:
        raise refused[0]
    if not server.started:
        raise Exit("the API did not start (the log above says why)")


def with_kubernetes_catalogs(settings: Settings) -> Settings:
    """`settings` with the entries of METASTORE_CATALOGS_FROM_KUBERNETES's TrinoCatalogs."""
    if not settings.catalogs_from_kubernetes:
        return settings
    import dataclasses

    from metastore.catalogs import CatalogFileError
    from metastore.trino_catalogs import catalogs_with_kubernetes

    try:
        catalogs = catalogs_with_kubernetes(
            settings.catalogs, list(settings.catalogs_from_kubernetes), os.environ
        )
    except CatalogFileError as exc:
        raise Exit(str(exc)) from None
    log.info(
        "catalog map with TrinoCatalogs",
        extra={"entries": len(catalogs.entries), "from_file": len(settings.catalogs.entries)},
    )
    return dataclasses.replace(settings, catalogs=catalogs)


def cmd_projector(settings: Settings, args: argparse.Namespace) -> None:
    settings = with_kubernetes_catalogs(settings)
    _database_url(settings)
    from projections.runner import run_projector

    run_projector(settings)


def cmd_replay(settings: Settings, args: argparse.Namespace) -> None:
    from metastore.migrations import require_current_schema

    settings = with_kubernetes_catalogs(settings)
    require_current_schema(_database_url(settings))
    from projections.replay import run_replay

    run_replay(settings, projection=args.projection, progress=not args.no_progress)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _exit_status(code: int) -> str:
    return f"signal {signal.Signals(-code).name}" if code < 0 else f"status {code}"


def cmd_dev(settings: Settings, args: argparse.Namespace) -> None:
    """PostgreSQL (embedded unless a URL is given), migrations, API and projector.

    Runs until Ctrl-C or SIGTERM (then exits 0), or until a child process dies: then the
    others are stopped too and the command fails naming it.
    """
    from metastore.embedded_pg import EmbeddedPostgres
    from metastore.listen import check_free, listening_socket
    from metastore.migrations import apply_migrations

    if not settings.auth_configured and not _is_loopback(args.host):
        raise Exit(
            f"no tokens configured and --host {args.host} is not loopback; configure "
            "METASTORE_*_TOKENS or listen on 127.0.0.1"
        )
    port = settings.port if args.port is None else args.port
    port_variable = "METASTORE_PORT" if args.port is None else "--port"
    # The projector's port: the one set, else a free one. Its default, 9090, is also
    # Prometheus's, and a second `metastore dev` must not collide with the first.
    if os.environ.get("METASTORE_PROJECTOR_PORT", "").strip():
        projector_port = settings.projector_port
        check_free(args.host, projector_port, "METASTORE_PROJECTOR_PORT")
    else:
        with listening_socket(args.host, 0, "METASTORE_HOST") as sock:
            projector_port = int(sock.getsockname()[1])
    # Checked before PostgreSQL starts, so a port in use is one line naming its variable.
    check_free(args.host, port, port_variable)
    env = dict(os.environ)
    env["METASTORE_HOST"] = args.host
    env["METASTORE_PORT"] = str(port)
    env["METASTORE_PROJECTOR_PORT"] = str(projector_port)
    if not settings.auth_configured:
        env["METASTORE_AUTH"] = "disabled"
        log.warning("no tokens configured: the API is open to anyone on this machine")
    pg: EmbeddedPostgres | None = None
    children: dict[str, subprocess.Popen[bytes]] = {}
    stopping = False
    died: tuple[str, int] | None = None

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        url = settings.database_url
        if not url:
            pg = EmbeddedPostgres(Path(args.data_dir))
            url = pg.start()
            log.info("embedded PostgreSQL started", extra={"data_dir": str(pg.data_dir)})
        env["METASTORE_DATABASE_URL"] = url
        apply_migrations(url)
        for command in ("api", "projector"):
            children[command] = subprocess.Popen(
                [sys.executable, "-m", "metastore", command], env=env
            )
        scheme = "https" if settings.tls else "http"
        log.info(
            "metastore is running",
            extra={
                "url": f"{scheme}://{args.host}:{port}",
                "projector": f"{scheme}://{args.host}:{projector_port}",
            },
        )
        while not stopping and died is None:
            for command, child in children.items():
                if child.poll() is not None:
                    died = (command, child.returncode)
                    break
            else:
                time.sleep(0.2)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for child in children.values():
            if child.poll() is None:
                child.terminate()
        for child in children.values():
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        if pg is not None:
            pg.stop()
            log.info("embedded PostgreSQL stopped")
    if died is not None and not stopping:
        command, code = died
        raise Exit(f"metastore {command} exited ({_exit_status(code)}); stopped the others")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="metastore",
        description="The Stackable metadata store: OpenLineage in, lineage out. "
        "Configuration comes from METASTORE_* environment variables (see README).",
    )
    parser.add_argument("--version", action="version", version=f"metastore {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    dev = sub.add_parser(
        "dev",
        help="run PostgreSQL (embedded unless METASTORE_DATABASE_URL is set), "
        "migrations, the API and the projector in the foreground",
        description="Everything a laptop needs. Ctrl-C stops it all, PostgreSQL included.",
    )
    dev.add_argument("--host", default="127.0.0.1", help="API address (default 127.0.0.1)")
    dev.add_argument(
        "--port", type=int, help="API port (default METASTORE_PORT, which defaults to 8080)"
    )
    dev.add_argument(
        "--data-dir",
        default=".metastore",
        help="where the embedded PostgreSQL keeps its data (default .metastore)",
    )
    dev.set_defaults(func=cmd_dev)
    sub.add_parser(
        "migrate",
        help="apply the pending schema migrations (safe to run twice, or in parallel)",
        description="Applies the yoyo migrations in sql/ to METASTORE_DATABASE_URL.",
    ).set_defaults(func=cmd_migrate)
    sub.add_parser(
        "api",
        help="serve ingest, the read API and the export feed",
        description="Serves /ingest, /api/v1 and /export on METASTORE_HOST:METASTORE_PORT.",
    ).set_defaults(func=cmd_api)
    sub.add_parser(
        "projector",
        help="fold the event log into the read models (one active at a time)",
        description="Folds the log into the read models; a second projector waits as standby. "
        "Serves /healthz, /readyz and /metrics on METASTORE_PROJECTOR_PORT.",
    ).set_defaults(func=cmd_projector)
    replay = sub.add_parser(
        "replay",
        help="rebuild the read models from the whole log, then switch over atomically",
        description="Rebuilds every projection (or one) into fresh tables while the API keeps "
        "serving the current ones, and swaps them in once caught up.",
    )
    replay.add_argument("--projection", metavar="NAME", help="rebuild only this projection")
    replay.add_argument("--no-progress", action="store_true", help="no progress bar")
    replay.set_defaults(func=cmd_replay)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"metastore: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    import psycopg

    from metastore.embedded_pg import EmbeddedPostgresError
    from metastore.listen import PortUnavailable
    from metastore.migrations import SchemaBehind

    try:
        args.func(settings, args)
    except Exit as exc:
        print(f"metastore: {exc}", file=sys.stderr)
        return exc.status
    except (SchemaBehind, EmbeddedPostgresError, PortUnavailable) as exc:
        print(f"metastore: {exc}", file=sys.stderr)
        return 1
    except psycopg.OperationalError as exc:
        print(f"metastore: cannot reach the database: {one_line(exc)}", file=sys.stderr)
        return 1
    except psycopg.Error as exc:  # one line, never a traceback
        print(f"metastore: database error: {one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
