// A small Cockpit-like client on types generated from metastore/openapi.json
// (openapi-typescript), type-checked under `tsc --strict` with no casts: it draws the
// namespaces screen, a lineage graph with jobs coloured by their latest run, a dataset
// page, "what broke" (everything a failed run reaches) and "what changed" (the graph's
// diff between two moments), and counts the calls each screen takes.
// tests/test_openapi_client.py compiles it and runs it against a server loaded with the
// conformance scenarios and a failed Trino run.
//
//   node build/js/client/screens.js <base url of /api/v1> <graph node> <dataset id> <as_of>
//        <failed run id> <diff node> <from> <to>
import type { components, paths } from "../build/schema";

type Schemas = components["schemas"];
type Ok<P extends keyof paths> = paths[P] extends {
  get: { responses: { 200: { content: { "application/json": infer Body } } } };
}
  ? Body
  : never;

let calls = 0;

async function get<P extends keyof paths>(
  base: string,
  path: P,
  fill: Record<string, string>,
  query: Record<string, string> = {},
): Promise<Ok<P>> {
  let concrete: string = path;
  for (const [name, value] of Object.entries(fill)) {
    concrete = concrete.replace(`{${name}}`, encodeURIComponent(value));
  }
  const url = new URL(base + concrete.replace(/^\/api\/v1/, ""));
  for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value);
  calls += 1;
  const response = await fetch(url);
  if (!response.ok) {
    const problem: Schemas["Problem"] = await response.json();
    throw new Error(`${problem.type}: ${problem.detail ?? problem.title}`);
  }
  const body: Ok<P> = await response.json();
  return body;
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

function nodeLabel(node: Schemas["JobNode"] | Schemas["DatasetNode"]) {
  switch (node.type) {
    case "job": {
      const run: Schemas["LatestRun"] | null = node.latest_run;
      return {
        key: node.key,
        label: `${node.name} [${node.integration ?? "?"}]`,
        colour: run ? COLOURS[run.state] : "white",
        seconds: run?.duration_seconds ?? null,
      };
    }
    case "dataset":
      return {
        key: node.key,
        label: `${node.namespace}/${node.name} (${node.name_count} names)`,
        colour:
          node.lifecycle_state === "DROP" ? "black" : node.freshness.stale ? "amber" : "white",
        seconds: null,
      };
  }
}

// The lineage graph around a node, jobs coloured by the state of their latest run.
async function graph(base: string, node: string, asOf?: string) {
  const query: Record<string, string> = { node, depth: "3" };
  if (asOf !== undefined) query["as_of"] = asOf;
  const answer = await get(base, "/api/v1/lineage", {}, query);
  return {
    nodes: answer.nodes.map(nodeLabel),
    edges: answer.edges.map((e: Schemas["LineageEdge"]) => `${e.from} -> ${e.to}`),
  };
}

// The dataset page: names, schema, history, readers and writers, column lineage.
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
    writers: page.producers.map((w: Schemas["DatasetWriter"]) => w.job.name),
    readers: page.consumers.map((j: Schemas["JobRef"]) => j.name),
    columns: columns.edges.map(
      (e: Schemas["ColumnEdge"]) =>
        `${e.from.dataset?.name ?? e.from.name}.${e.from.field} -> ${e.to.field} by ${e.jobs
          .map((j: Schemas["JobRef"]) => j.name)
          .join(",")}`,
    ),
  };
}

function freshnessLabel(fresh: Schemas["DatasetFreshness"]): string {
  const write: Schemas["Write"] | null = fresh.last_write;
  const written = write ? `written ${write.at} by ${write.run.job?.name ?? "?"}` : "never written";
  const attempt: Schemas["FailedAttempt"] | null = fresh.failed_attempt;
  const failed = attempt ? `, ${attempt.state} at ${attempt.at}` : "";
  const why = fresh.stale_reasons.map((r: Schemas["StaleReason"]) =>
    r.reason === "input_rewritten" ? `input ${r.dataset?.name ?? "?"} rewritten` : `writer failed`,
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
        jobs.push(`${node.name}: ${node.latest_run ? COLOURS[node.latest_run.state] : "white"}`);
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
  const [base, node, datasetId, asOf, failedRun, diffNode, from, to] = process.argv.slice(2);
  if (
    base === undefined ||
    node === undefined ||
    datasetId === undefined ||
    failedRun === undefined ||
    diffNode === undefined ||
    from === undefined ||
    to === undefined
  ) {
    throw new Error(
      "usage: screens.js <base> <node> <dataset id> <as_of> <failed run> <diff node> <from> <to>",
    );
  }
  const result = {
    namespaces: await screen(() => namespaces(base)),
    graph: await screen(() => graph(base, node)),
    graphAsOf: await screen(() => graph(base, node, asOf)),
    dataset: await screen(() => dataset(base, datasetId)),
    whatBroke: await screen(() => whatBroke(base, failedRun)),
    whatChanged: await screen(() => whatChanged(base, diffNode, from, to)),
  };
  process.stdout.write(JSON.stringify(result) + "\n");
}

await main();
