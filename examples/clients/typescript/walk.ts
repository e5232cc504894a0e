// Walk a running prodapi with openapi-fetch and the types openapi-typescript
// generates from its document (schema.d.ts, beside this file):
//
//	PRODAPI_URL=http://localhost:5500/prodapi/v1 PRODAPI_TOKEN=... node out/walk.js
//
// The same walk as python/walk.py: from the home document, every resource is
// paged through two documents a page by its typed list operation, following
// _links.next; every link of every document is followed through the typed
// detail operation of the resource it names, and on from each detail; items
// are walked by cursor (cursor= first, then the cursor of each _links.next) to
// the page without a next, and /changes is read once; then where, projection,
// source and filter are sent as JSON text. Any status but 200, a page that
// repeats or misses a document, or a link to nowhere stops it.

import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Schemas = components["schemas"];

const baseUrl = process.env["PRODAPI_URL"];
const token = process.env["PRODAPI_TOKEN"];
if (!baseUrl || !token) {
  throw new Error("set PRODAPI_URL and PRODAPI_TOKEN");
}
const client = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });

const PAGE = 2; // small pages, so that paging is walked everywhere

let requests = 0;

// An answer is what openapi-fetch resolves to.
interface Answer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

// ok returns a successful answer's body; anything but 200 stops the walk.
function ok<T>(res: Answer<T>, what: string): T {
  requests++;
  if (res.response.status !== 200 || res.data === undefined) {
    throw new Error(`${what}: ${res.response.status} ${JSON.stringify(res.error)}`);
  }
  return res.data;
}

// What the walk reads of any document and any list.
interface Doc {
  _id: string;
  _links?: object;
}
interface Listed {
  _items: Doc[];
  _links: Schemas["ListLinks"];
  _meta: Schemas["Meta"];
}
interface ListQuery {
  page?: number;
  cursor?: string;
  max_results?: number;
}

// How a list is walked: by page number, or by cursor.
type By = "page" | "cursor";
interface Operations {
  list(query: ListQuery): Promise<Listed>;
  get(id: string): Promise<Doc>;
}

// ops makes a resource's operations from its typed calls.
function ops(name: string, list: (query: ListQuery) => Promise<Answer<Listed>>, get: (id: string) => Promise<Answer<Doc>>): Operations {
  return {
    list: async (query) => ok(await list(query), name),
    get: async (id) => ok(await get(id), `${name}/${id}`),
  };
}

// Each resource's typed list and detail operations.
const resources: Record<string, Operations> = {
  items: ops("items", (query) => client.GET("/items", { params: { query } }), (id) => client.GET("/items/{id}", { params: { path: { id } } })),
  desks: ops("desks", (query) => client.GET("/desks", { params: { query } }), (id) => client.GET("/desks/{id}", { params: { path: { id } } })),
  assignments: ops("assignments", (query) => client.GET("/assignments", { params: { query } }),
    (id) => client.GET("/assignments/{id}", { params: { path: { id } } })),
  events: ops("events", (query) => client.GET("/events", { params: { query } }), (id) => client.GET("/events/{id}", { params: { path: { id } } })),
  events_history: ops("events_history", (query) => client.GET("/events_history", { params: { query } }),
    (id) => client.GET("/events_history/{id}", { params: { path: { id } } })),
  events_files: ops("events_files", (query) => client.GET("/events_files", { params: { query } }),
    (id) => client.GET("/events_files/{id}", { params: { path: { id } } })),
  planning: ops("planning", (query) => client.GET("/planning", { params: { query } }), (id) => client.GET("/planning/{id}", { params: { path: { id } } })),
  contacts: ops("contacts", (query) => client.GET("/contacts", { params: { query } }), (id) => client.GET("/contacts/{id}", { params: { path: { id } } })),
  users: ops("users", (query) => client.GET("/users", { params: { query } }), (id) => client.GET("/users/{id}", { params: { path: { id } } })),
};

let pages = 0;
let links = 0;
const details = new Map<string, Doc>(); // by href, once fetched

// listParams reads a next link ("items?max_results=2&page=3",
// "items?max_results=2&cursor=AcSP...").
function listParams(href: string, name: string, by: By): ListQuery {
  const [path, query = ""] = href.split("?", 2);
  if (path !== name) {
    throw new Error(`${name}: next link ${href} leaves the resource`);
  }
  const params: ListQuery = {};
  for (const [key, value] of new URLSearchParams(query)) {
    if (key === "cursor" && by === "cursor") {
      params.cursor = value;
    } else if ((key === "page" && by === "page") || key === "max_results") {
      params[key] = Number(value);
    } else {
      throw new Error(`${name}: next link ${href} carries ${key}, which the walk by ${by} never sent`);
    }
  }
  if (params[by] === undefined) {
    throw new Error(`${name}: next link ${href} carries no ${by}`);
  }
  return params;
}

// walkList pages through a resource by _links.next, by page number or by
// cursor from cursor= (empty).
async function walkList(name: string, by: By = "page"): Promise<Doc[]> {
  const ops = resources[name];
  if (!ops) {
    throw new Error(`no operations for ${name}`);
  }
  let query: ListQuery = by === "cursor" ? { max_results: PAGE, cursor: "" } : { max_results: PAGE };
  const docs: Doc[] = [];
  for (;;) {
    const page = await ops.list(query);
    pages++;
    docs.push(...page._items);
    const next = page._links.next;
    if (next === undefined) {
      const ids = new Set(docs.map((d) => d._id));
      if (docs.length !== page._meta.total || ids.size !== page._meta.total) {
        throw new Error(`${name} by ${by}: ${docs.length} documents (${ids.size} distinct) over the pages, _meta.total ${page._meta.total}`);
      }
      return docs;
    }
    query = listParams(next.href, name, by);
  }
}

interface AnyLink {
  href: string;
  content_href?: string;
}

function isLink(v: unknown): v is AnyLink {
  return typeof v === "object" && v !== null && typeof (v as { href?: unknown }).href === "string";
}

// follow fetches the document an href names, then follows its own links.
async function follow(href: string): Promise<void> {
  links++;
  const slash = href.indexOf("/");
  const name = href.slice(0, slash);
  const id = decodeURIComponent(href.slice(slash + 1));
  const ops = resources[name];
  if (slash < 0 || !ops || id === "" || href.slice(slash + 1).includes("/") || href.includes("?")) {
    throw new Error(`a link to ${href}, which names no document`);
  }
  if (details.has(href)) {
    return;
  }
  const doc = await ops.get(id);
  details.set(href, doc);
  if (doc._id !== id) {
    throw new Error(`${href} answered the document ${doc._id}`);
  }
  await followLinks(doc);
}

// followLinks follows every link of a document but the way back up.
async function followLinks(doc: Doc): Promise<void> {
  for (const [rel, value] of Object.entries(doc._links ?? {})) {
    if (rel === "parent" || rel === "collection" || rel === "prev") {
      continue;
    }
    for (const link of Array.isArray(value) ? value : [value]) {
      if (!isLink(link)) {
        throw new Error(`${doc._id}: _links.${rel} is not a link: ${JSON.stringify(link)}`);
      }
      await follow(link.href);
      if (link.content_href !== undefined) {
        await follow(link.content_href); // the content delivered for an assignment
      }
    }
  }
}

// readChanges reads /changes once: where the log stands, and the link to
// what follows.
async function readChanges(): Promise<Schemas["ChangesPage"]> {
  const changes = ok(await client.GET("/changes", {}), "changes");
  if (typeof changes === "string") { // the text/event-stream answer, never sent without Accept
    throw new Error("changes: an event stream, not the JSON answer");
  }
  const since = changes._meta.since;
  const [path, query = ""] = changes._links.next.href.split("?", 2);
  if (since === "" || path !== "changes" || [...new URLSearchParams(query)].join() !== ["since", since].join()) {
    throw new Error(`changes: _meta.since ${JSON.stringify(since)}, next ${changes._links.next.href}`);
  }
  for (const e of changes._items) {
    if (!(e.resource in resources)) {
      throw new Error(`changes: an entry of ${e.resource}, which the home does not list`);
    }
  }
  return changes;
}

// jsonParameters sends where, projection, source and filter as JSON text.
async function jsonParameters(desks: Doc[]): Promise<void> {
  const usable = ok(await client.GET("/items", { params: { query: { where: JSON.stringify({ pubstatus: "usable" }), max_results: 50 } } }), "where");
  if (usable._items.length === 0 || usable._items.some((i) => i.pubstatus !== "usable")) {
    throw new Error(`items where pubstatus is usable: ${usable._items.map((i) => i.pubstatus).join(",")}`);
  }

  const first = ok(await client.GET("/desks/{id}", { params: { path: { id: desks[0]?._id ?? "" } } }), "a desk");
  const named = ok(await client.GET("/desks", { params: { query: { where: JSON.stringify({ name: first.name }) } } }), "where");
  if (!named._items.some((d) => d._id === first._id) || named._items.some((d) => d.name !== first.name)) {
    throw new Error(`desks where name is ${first.name}: ${named._items.map((d) => d.name).join(",")}`);
  }

  const headlines = ok(await client.GET("/items", { params: { query: { projection: JSON.stringify({ headline: 1 }), max_results: 5 } } }), "projection");
  for (const i of headlines._items) {
    if (i.body_html !== undefined || i.headline === undefined) {
      throw new Error(`projection headline: item ${i._id} has body_html or lacks its headline`);
    }
  }

  const source = { query: { term: { type: "picture" } }, aggs: { states: { terms: { field: "state" } } } };
  const pictures = ok(await client.GET("/items", { params: { query: { source: JSON.stringify(source) } } }), "source");
  const buckets = pictures._aggregations?.["states"]?.buckets ?? [];
  if (pictures._items.length === 0 || pictures._items.some((i) => i.type !== "picture")) {
    throw new Error("source: a term query on type picture answered other types");
  }
  if (buckets.reduce((n, b) => n + b.doc_count, 0) !== pictures._meta.total) {
    throw new Error(`source: the states aggregation counts ${JSON.stringify(buckets)}, the list ${pictures._meta.total}`);
  }

  const filtered = ok(await client.GET("/items", { params: { query: { filter: JSON.stringify({ terms: { type: ["picture"] } }) } } }), "filter");
  if (filtered._meta.total !== pictures._meta.total) {
    throw new Error(`filter: ${filtered._meta.total} pictures, source found ${pictures._meta.total}`);
  }
}

async function main(): Promise<void> {
  const home = ok(await client.GET("/", {}), "home");
  const names = home._links.child.map((l) => l.href);
  if ([...names].sort().join() !== Object.keys(resources).sort().join()) {
    throw new Error(`the home lists ${names.join(",")}; the walk knows ${Object.keys(resources).join(",")}`);
  }
  const listed = new Map<string, Doc[]>();
  for (const name of names) {
    listed.set(name, await walkList(name));
  }
  for (const docs of listed.values()) {
    for (const doc of docs) {
      await followLinks(doc);
    }
  }
  const byCursor = await walkList("items", "cursor");
  const idsOf = (docs: Doc[]): string => docs.map((d) => d._id).sort().join();
  if (idsOf(byCursor) !== idsOf(listed.get("items") ?? [])) {
    throw new Error("items: the walk by cursor and the walk by page found different documents");
  }
  const changes = await readChanges();
  await jsonParameters(listed.get("desks") ?? []);
  const documents = [...listed.values()].reduce((n, docs) => n + docs.length, 0);
  console.log(`typescript: ${names.length} resources, ${pages} pages, ${documents} documents listed, ` +
    `${links} links followed to ${details.size} documents, ${byCursor.length} items by cursor, ` +
    `${changes._items.length} changes, ${requests} requests: ok`);
}

main().catch((err: unknown) => {
  console.error(`typescript: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
