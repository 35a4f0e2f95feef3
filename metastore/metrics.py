"""Prometheus metrics of the API and projector processes (Prometheus naming conventions)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, Info

from metastore import __version__

# Every process (api, projector) reports the release it runs: metastore_build_info{version}.
BUILD_INFO = Info("metastore_build", "The metastore release this process runs.")
BUILD_INFO.info({"version": __version__})

# Ingest
INGEST_REQUESTS = Counter(
    "metastore_ingest_requests_total",
    "Ingest requests by endpoint and outcome.",
    ["endpoint", "outcome"],
)
INGEST_EVENTS = Counter(
    "metastore_ingest_events_total",
    "Events received by outcome (stored, duplicate, invalid, failed, forbidden).",
    ["outcome"],
)
INGEST_PAYLOAD_BYTES = Histogram(
    "metastore_ingest_payload_bytes",
    "Size of ingest request bodies after decompression.",
    buckets=(512, 2048, 8192, 32768, 131072, 524288, 2097152, 8388608, 33554432),
)
INGEST_INFLIGHT_BYTES = Gauge(
    "metastore_ingest_inflight_bytes",
    "Request body bytes held by ingest requests now (of METASTORE_MAX_INFLIGHT_BYTES).",
)
INGEST_INFLIGHT_LIMIT_BYTES = Gauge(
    "metastore_ingest_inflight_limit_bytes",
    "The budget of request body bytes in flight (METASTORE_MAX_INFLIGHT_BYTES).",
)
GROUP_COMMIT_EVENTS = Histogram(
    "metastore_group_commit_events",
    "Events per group-commit transaction.",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096),
)

# HTTP
REQUEST_DURATION = Histogram(
    "metastore_http_request_duration_seconds",
    "HTTP request latency by route and status.",
    ["method", "route", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)

# Database
# By pool: "api" (reads, export), "reserved" (/readyz, /api/v1/status, the scrape) and
# "ingest" (the group committer's).
POOL_SIZE = Gauge("metastore_db_pool_connections", "Connections in the pool.", ["pool"])
POOL_IN_USE = Gauge("metastore_db_pool_connections_in_use", "Connections handed out.", ["pool"])
POOL_WAITING = Gauge(
    "metastore_db_pool_requests_waiting", "Requests waiting for a connection.", ["pool"]
)
LOG_EVENTS = Gauge("metastore_log_events", "Events in the log (estimate from the sequence).")
READS_BUSY = Counter(
    "metastore_reads_busy_total",
    "Expensive reads refused because their share of the read pool was busy (answered 503 "
    "reads-busy), by route.",
    ["route"],
)
READ_TIMEOUTS = Counter(
    "metastore_read_timeouts_total",
    "Reads stopped at METASTORE_READ_TIMEOUT (answered 503 read-timeout), by route.",
    ["route"],
)

# Projections and the projector lease: every process reads them from the database at scrape
# time (metastore.store_health).
PROJECTION_POSITION = Gauge(
    "metastore_projection_position_seq", "Log seq of the last folded event.", ["projection"]
)
PROJECTION_LAG_EVENTS = Gauge(
    "metastore_projection_lag_events", "Committed events not yet folded.", ["projection"]
)
PROJECTION_LAG_SECONDS = Gauge(
    "metastore_projection_lag_seconds",
    "Age of the oldest committed event not yet folded (0 when caught up).",
    ["projection"],
)
PROJECTION_STALLED = Gauge(
    "metastore_projection_stalled",
    "1 while the projection has not moved for over METASTORE_STALL_TIMEOUT while events wait.",
    ["projection"],
)
PROJECTION_DEAD_LETTERS = Gauge(
    "metastore_projection_dead_letters",
    "Events the projection could not fold, stored in dead_letters (all time).",
    ["projection"],
)
LEASE_HELD = Gauge(
    "metastore_projector_lease_held", "1 while some projector holds the leader lease."
)
LEASE_HOLDER = Gauge(
    "metastore_projector_lease_holder",
    "1 for the projector holding the leader lease, by its pod (application_name).",
    ["holder"],
)
LEADER = Gauge("metastore_projector_leader", "1 while this projector holds the leader lease.")
FOLDED_EVENTS = Counter(
    "metastore_projector_folded_events_total", "Events folded, by projection.", ["projection"]
)
FOLD_BATCH_SECONDS = Histogram(
    "metastore_projector_batch_duration_seconds",
    "Time to fold one batch and move the cursor.",
)
DEAD_LETTERS = Counter(
    "metastore_projector_dead_letters_total", "Events whose fold failed.", ["projection"]
)
PARENT_CHAINS_CUT = Counter(
    "metastore_projector_parent_chains_cut_total",
    "Runs whose parent chain was cut: by a cycle, or past 100 runs up (their root is the "
    "run where it was cut).",
    ["reason"],
)
FOLD_FALLBACKS = Counter(
    "metastore_projector_fold_fallbacks_total",
    "Batches a projection folded event by event, to find the events whose fold fails.",
    ["projection"],
)
MALFORMED_FACETS = Counter(
    "metastore_projector_malformed_facets_total",
    "Facets ignored because they were malformed.",
    ["facet"],
)

# Authorization (metastore.opa)
AUTHZ_OPA_SECONDS = Histogram(
    "metastore_authz_opa_request_duration_seconds",
    "Time OPA took to decide, by rule (allow: one decision, batch: a request's namespaces).",
    ["rule"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
AUTHZ_OPA_FAILURES = Counter(
    "metastore_authz_opa_failures_total",
    "OPA requests without a decision: timeout and error (answered 503 "
    "authorization-unavailable), undefined (a wrong package or rule: denied).",
    ["reason"],
)
AUTHZ_CACHE_LOOKUPS = Counter(
    "metastore_authz_cache_lookups_total",
    "Decisions looked up in the decision cache, by result (hit, miss: asked of OPA).",
    ["result"],
)

# Read API
MALFORMED_PARTS = Counter(
    "metastore_api_malformed_parts_total",
    "Parts of stored facets left out of (or nulled in) read answers because they break the "
    "OpenAPI document: a whole facet, schema fields, columnLineage transformations.",
    ["part"],
)

# Database (read at scrape time by metastore.metrics_endpoint)
POOL_MAX = Gauge(
    "metastore_db_pool_max_connections", "Largest size the pool may grow to.", ["pool"]
)
LOG_BYTES = Gauge("metastore_log_bytes", "On-disk size of the event log partitions.")

# Export feed
EXPORT_EVENTS = Counter(
    "metastore_export_events_total", "Events sent by the export feed, by format.", ["format"]
)
EXPORT_WAITING = Gauge(
    "metastore_export_waiting_requests", "Export long-polls waiting for the next append."
)
