// A small Cockpit-like client on types generated from metastore/openapi.json
// A small Cockpit-like client on types generated from metastore/openapi.json
// (openapi-typescript), type-checked under `tsc --strict` (with noUncheckedIndexedAccess
// and exactOptionalPropertyTypes) with no casts: it draws the namespaces screen, a
// namespace's recent failures, a lineage graph with jobs coloured by their latest run and
// what lies beyond its edge, a dataset list with stale datasets coloured, a dataset page,
// a job page and a search, reads a problem,
// draws "what broke" (everything a failed run reaches) and "what changed" (the graph's
// diff between two moments), and counts the calls each screen takes.
// tests/test_openapi_client.py compiles it and runs it against a server loaded with the
// conformance scenarios and a failed Trino run.
//
//   node build/js/client/screens.js <base url of /api/v1> <graph node> <dataset id>
//        <as_of> <job id> <edge node> <failed run id> <diff node> <from> <to> <namespace>
import type { components, paths } from "../build/schema";

type Schemas = components["schemas"];
type Problem = Schemas["Problem"];
type Ok<P extends keyof paths> = paths[P] extends {
  get: { responses: { 200: { content: { "application/json": infer Body } } } };
}
  ? Body
  : never;

let calls = 0;

function url(base: string, path: string, fill: Record<string, string>, query: Record<string, string>) {
  let concrete: string = path;
  for (const [name, value] of Object.entries(fill)) {
    concrete = concrete.replace(`{${name}}`, encodeURIComponent(value));
  }
  const found = new URL(base + concrete.replace(/^\/api\/v1/, ""));
  for (const [name, value] of Object.entries(query)) found.searchParams.set(name, value);
  return found;
}

async function get<P extends keyof paths>(
  base: string,
  path: P,
  fill: Record<string, string>,
  query: Record<string, string> = {},
): Promise<Ok<P>> {
  calls += 1;
  const response = await fetch(url(base, path, fill, query));
  if (!response.ok) {
    const problem: Problem = await response.json();
    throw new Error(`${problem.type}: ${problem.detail ?? problem.title}`);
  }
  const body: Ok<P> = await response.json();
  return body;
}

// What a client shows for each kind of problem: the `type` is an enum of the documented
// URIs, so this switch is exhaustive (a plain string would not compile below).
function advice(problem: Problem): string {
  switch (problem.type) {
    case "https://stackable.tech/metastore/problems/invalid-request":
    case "https://stackable.tech/metastore/problems/invalid-cursor":
      return "fix the request";
    case "https://stackable.tech/metastore/problems/unauthorized":
    case "https://stackable.tech/metastore/problems/forbidden":
      return "sign in again";
    case "https://stackable.tech/metastore/problems/policy-forbidden":
      return "not yours to see";
    case "https://stackable.tech/metastore/problems/not-found":
    case "https://stackable.tech/metastore/problems/not-yet":
      return "nothing here";
    case "https://stackable.tech/metastore/problems/method-not-allowed":
    case "https://stackable.tech/metastore/problems/not-acceptable":
    case "https://stackable.tech/metastore/problems/request-timeout":
    case "https://stackable.tech/metastore/problems/conflict":
    case "https://stackable.tech/metastore/problems/precondition-failed":
    case "https://stackable.tech/metastore/problems/too-large":
    case "https://stackable.tech/metastore/problems/unsupported-media-type":
    case "https://stackable.tech/metastore/problems/unprocessable":
    case "https://stackable.tech/metastore/problems/header-too-large":
    case "https://stackable.tech/metastore/problems/not-implemented":
    case "about:blank":
      return "a client bug";
    case "https://stackable.tech/metastore/problems/too-many-requests":
    case "https://stackable.tech/metastore/problems/unavailable":
    case "https://stackable.tech/metastore/problems/issuer-unavailable":
    case "https://stackable.tech/metastore/problems/authorization-unavailable":
    case "https://stackable.tech/metastore/problems/read-models-rebuilding":
    case "https://stackable.tech/metastore/problems/reads-busy":
    case "https://stackable.tech/metastore/problems/internal":
      return "retry later";
    case "https://stackable.tech/metastore/problems/read-timeout":
      return "ask for less";
    default: {
      const unknown: never = problem.type;
      return unknown;
    }
  }
}

// A request the API refuses: the problem as the schema types it, every member present.
async function refused(base: string, query: Record<string, string>) {
  calls += 1;
  const response = await fetch(url(base, "/api/v1/runs", {}, query));
  const problem: Problem = await response.json();
  const named: string[] = (problem["invalid-params"] ?? []).map(
    (p: Schemas["InvalidParam"]) => p.name,
  );
  return {
    status: problem.status,
    advice: advice(problem),
    named,
    // null, not left out: the members the schema requires are always sent
    pointer: problem.pointer === null ? "null" : problem.pointer,
    instance: problem.instance,
    members: Object.keys(problem).sort(),
  };
}

type RunState = Schemas["LatestRun"]["state"];
const COLOURS: Record<RunState, string> = {
  START: "blue",
  RUNNING: "blue",
  COMPLETE: "green",
  FAIL: "red",
  ABORT: "orange",
  OTHER: "grey",
};

function colour(run: Schemas["LatestRun"] | null): string {
  return run ? COLOURS[run.state] : "white";
}

function total(page: { total: number; total_is_exact: boolean }): string {
  return page.total_is_exact ? `${page.total}` : `${page.total}+`;
}

interface Screen<T> {
  calls: number;
  view: T;
}

async function screen<T>(draw: () => Promise<T>): Promise<Screen<T>> {
  const before = calls;
  const view = await draw();
  return { calls: calls - before, view };
}

// Namespaces with their job and dataset counts.
async function namespaces(base: string) {
  const page = await get(base, "/api/v1/namespaces", {}, { limit: "500" });
  return {
    total: page.total,
    more: page.next_cursor !== null,
    rows: page.items.map((ns: Schemas["Namespace"]) => ({
      name: ns.name,
      jobs: ns.job_count,
      datasets: ns.dataset_count,
    })),
  };
}

// A namespace's recent failures, newest first, with how many there are.
async function failures(base: string, namespace: string) {
  const page = await get(
    base,
    "/api/v1/runs",
    {},
    { namespace, state: "FAIL,ABORT", sort: "started", limit: "10" },
  );
  return {
    count: total(page),
    rows: page.items.map((r: Schemas["RunSummary"]) => `${r.job.name} ${r.state}`),
  };
}

function beyond(more: Schemas["Beyond"]): string {
  const parts: string[] = [];
  if (more.upstream > 0) parts.push(`+${more.upstream} up`);
  if (more.downstream > 0) parts.push(`+${more.downstream} down`);
  return parts.join(" ");
}

// A dataset's colour wherever it is drawn (graph node or list row): dropped, stale, or not.
function datasetColour(dataset: {
  lifecycle: Schemas["Lifecycle"] | null;
  freshness: Schemas["DatasetFreshness"];
}): string {
  return dataset.lifecycle?.state === "DROP" ? "black" : dataset.freshness.stale ? "amber" : "white";
}

function nodeLabel(node: Schemas["JobNode"] | Schemas["DatasetNode"]) {
  switch (node.type) {
    case "job": {
      const run: Schemas["LatestRun"] | null = node.latest_run;
      return {
        key: node.key,
        label: `${node.name} [${node.integration ?? "?"}]`,
        colour: colour(run),
        seconds: run?.duration_seconds ?? null,
        depth: node.depth,
        beyond: beyond(node.beyond),
      };
    }
    case "dataset":
      return {
        key: node.key,
        label: `${node.namespace}/${node.name} (${node.name_count} names)`,
        colour: datasetColour(node),
        seconds: null,
        depth: node.depth,
        beyond: beyond(node.beyond),
      };
  }
}

// An edge as drawn: both ends by name and the state of the run that made it, from the
// edge alone (no lookup in the node list).
function edgeLabel(e: Schemas["LineageEdge"]): string {
  return `${e.from.type} ${e.from.name} -> ${e.to.type} ${e.to.name} (${e.last_run?.state ?? "static"})`;
}

// The lineage graph around a node, jobs coloured by the state of their latest run.
async function graph(base: string, node: string, depth: string, asOf?: string) {
  const query: Record<string, string> = { node, depth };
  if (asOf !== undefined) query["as_of"] = asOf;
  const answer = await get(base, "/api/v1/lineage", {}, query);
  return {
    nodes: answer.nodes.map(nodeLabel),
    edges: answer.edges.map(edgeLabel),
  };
}

// A namespace's datasets, stale ones coloured, from the list's one call (no call per row).
async function datasetList(base: string, namespace: string) {
  const page = await get(base, "/api/v1/datasets", {}, { namespace, limit: "100" });
  return {
    count: total(page),
    rows: page.items.map((d: Schemas["DatasetSummary"]) => ({
      name: d.name,
      colour: datasetColour(d),
      freshness: freshnessLabel(d.freshness),
    })),
  };
}

function jobWithRun(job: Schemas["JobRefWithRun"]): string {
  return `${job.name} ${colour(job.latest_run)}`;
}

// The dataset page: names, schema, history, readers and writers with the state of their
// latest runs, column lineage.
async function dataset(base: string, id: string) {
  const page = await get(base, "/api/v1/datasets/{dataset_id}", { dataset_id: id });
  const columns = await get(base, "/api/v1/datasets/{dataset_id}/column-lineage", {
    dataset_id: id,
  });
  const fields: Schemas["SchemaField"][] = page.fields ?? [];
  // A facet's field and a schema field's type, read as typed values.
  const documentation: string | null | undefined = page.facets.documentation?.description;
  const firstSymlink: string | undefined = page.facets.symlinks?.identifiers?.[0]?.name;
  const facetProducer: string | undefined = page.facets["schema"]?._producer;
  return {
    title: `${page.namespace}/${page.name}`,
    names: page.names.map((n: Schemas["DatasetName"]) => `${n.kind}: ${n.namespace}/${n.name}`),
    schema: fields.map((f) => `${f.name}: ${f.type ?? "?"}`),
    documentation: documentation ?? page.description,
    firstSymlink: firstSymlink ?? null,
    facetProducer: facetProducer ?? null,
    lifecycle: page.lifecycle?.state ?? null,
    versions: page.versions.items.map((v: Schemas["DatasetVersion"]) => v.version),
    runs: page.runs.items.map((r: Schemas["RunOfDataset"]) => `${r.role} ${r.job.name} ${r.state}`),
    writers: page.producers.map((w: Schemas["DatasetWriter"]) => jobWithRun(w.job)),
    readers: page.consumers.map((r: Schemas["DatasetReader"]) => jobWithRun(r.job)),
    columns: columns.edges.map(
      (e: Schemas["ColumnEdge"]) =>
        `${e.from.dataset?.name ?? e.from.name}.${e.from.field} -> ${e.to.field} by ${e.jobs
          .map((j: Schemas["JobRef"]) => j.name)
          .join(",")}`,
    ),
  };
}

// The job page: its parent and children coloured by their latest runs, its runs.
async function job(base: string, id: string) {
  const page = await get(base, "/api/v1/jobs/{job_id}", { job_id: id });
  const runs = await get(base, "/api/v1/runs", {}, { job_id: id, limit: "10" });
  return {
    title: `${page.namespace}/${page.name} ${colour(page.latest_run)}`,
    parent: page.parent ? jobWithRun(page.parent) : null,
    children: page.children.map(jobWithRun),
    runs: `${total(runs)} runs`,
  };
}

// Search: each kind of hit drawn its own way.
async function search(base: string, q: string) {
  const page = await get(base, "/api/v1/search", {}, { q, type: "namespace,dataset" });
  return {
    count: total(page),
    hits: page.items.map((hit) => {
      switch (hit.type) {
        case "namespace":
          return `namespace ${hit.name}`;
        case "dataset":
          // a dataset found by a field of its schema has no matched name
          return hit.matched_name
            ? `dataset ${hit.namespace}/${hit.name} (as ${hit.matched_name.name})`
            : `dataset ${hit.namespace}/${hit.name} (field ${hit.matched_field?.name})`;
        case "job":
          return `job ${hit.namespace}/${hit.name}`;
      }
    }),
  };
}

function freshnessLabel(fresh: Schemas["DatasetFreshness"]): string {
  const write: Schemas["Write"] | null = fresh.last_write;
  const written = write ? `written ${write.at} by ${write.run.job?.name ?? "?"}` : "never written";
  const attempt: Schemas["FailedAttempt"] | null = fresh.failed_attempt;
  const failed = attempt ? `, ${attempt.state} at ${attempt.at}` : "";
  const why = fresh.stale_reasons.map((r: Schemas["StaleReason"]) =>
    r.reason === "input_rewritten"
      ? `input ${r.dataset?.name ?? "?"} rewritten`
      : r.reason === "upstream_failed"
        ? `${r.run?.job?.name ?? "?"} failed upstream, via ${r.dataset?.name ?? "?"}`
        : `writer failed`,
  );
  return `${written}${failed}${fresh.stale ? ` (stale: ${why.join("; ")})` : ""}`;
}

// What broke: everything a failed run reaches downstream, in one call.
async function whatBroke(base: string, runId: string) {
  const impact = await get(base, "/api/v1/impact", {}, { node: `run:${runId}` });
  const datasets: string[] = [];
  const jobs: string[] = [];
  for (const node of impact.nodes) {
    switch (node.type) {
      case "dataset":
        datasets.push(
          `${node.name} [${node.owners.map((o: Schemas["Owner"]) => o.name).join(",")}]: ` +
            freshnessLabel(node.freshness),
        );
        break;
      case "job":
        jobs.push(`${node.name}: ${colour(node.latest_run)}`);
        break;
    }
  }
  return { run: impact.run?.state ?? null, datasets, jobs, truncated: impact.truncated };
}

// What changed: the graph around a node between two moments, and schema changes.
async function whatChanged(base: string, node: string, from: string, to: string) {
  const diff = await get(base, "/api/v1/lineage/diff", {}, { node, from, to });
  const label = (n: Schemas["JobNode"] | Schemas["DatasetNode"]) => `${n.type} ${n.name}`;
  return {
    added: diff.nodes_added.map(label),
    removed: diff.nodes_removed.map(label),
    edgesAdded: diff.edges_added.length,
    edgesRemoved: diff.edges_removed.length,
    edgeLabels: [...diff.edges_added, ...diff.edges_removed].map(edgeLabel),
    schema: diff.schema_changes.map(
      (c: Schemas["SchemaChange"]) =>
        `${c.dataset.name} v${c.from_version} -> v${c.to_version}: ` +
        `+${c.added.map((f: Schemas["FieldType"]) => f.name).join(",")} ` +
        `-${c.removed.map((f: Schemas["FieldType"]) => f.name).join(",")} ` +
        `~${c.type_changed
          .map((t: Schemas["TypeChange"]) => `${t.name}:${t.from_type}>${t.to_type}`)
          .join(",")}`,
    ),
  };
}

async function main(): Promise<void> {
  const [base, node, datasetId, asOf, jobId, edgeNode, failedRun, diffNode, from, to, ns] =
    process.argv.slice(2);
  if (
    base === undefined ||
    node === undefined ||
    datasetId === undefined ||
    jobId === undefined ||
    edgeNode === undefined ||
    failedRun === undefined ||
    diffNode === undefined ||
    from === undefined ||
    to === undefined ||
    ns === undefined
  ) {
    throw new Error(
      "usage: screens.js <base> <node> <dataset id> <as_of> <job id> <edge node> " +
        "<failed run> <diff node> <from> <to> <namespace>",
    );
  }
  const result = {
    namespaces: await screen(() => namespaces(base)),
    failures: await screen(() => failures(base, "prod-lineage")),
    graph: await screen(() => graph(base, node, "3")),
    graphAsOf: await screen(() => graph(base, node, "3", asOf)),
    graphEdge: await screen(() => graph(base, edgeNode, "1")),
    datasetList: await screen(() => datasetList(base, ns)),
    dataset: await screen(() => dataset(base, datasetId)),
    job: await screen(() => job(base, jobId)),
    search: await screen(() => search(base, "hive")),
    problem: await screen(() => refused(base, { stat: "FAIL" })),
    whatBroke: await screen(() => whatBroke(base, failedRun)),
    whatChanged: await screen(() => whatChanged(base, diffNode, from, to)),
  };
  process.stdout.write(JSON.stringify(result) + "\n");
}

await main();
