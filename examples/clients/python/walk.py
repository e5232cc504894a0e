"""Walk a running prodapi with the client openapi-python-client generates.

    PRODAPI_URL=http://localhost:5500/prodapi/v1 PRODAPI_TOKEN=... python walk.py

The generated package (prodapi_client) must be importable. From the home
document, every resource is paged through, two documents a page, by its
typed list operation, following `_links.next`; then every link of every
document (`self`, `assignment`, `plannings`, an assignment's delivered
`content_href`, ...) is followed through the typed detail operation of
the resource it names, and so on from each detail reached. Then items are
walked by cursor (`cursor=` first, then the cursor of each `_links.next`)
to the page without a next, and /changes is read once. Last, the
JSON-valued parameters (where, projection, source, filter) are sent as
the JSON text the document describes. Any status but 200, a page that
repeats or misses a document, or a link to nowhere stops it.
"""

import json
import os
import sys
from urllib.parse import parse_qsl, unquote, urlsplit

from prodapi_client import AuthenticatedClient
from prodapi_client.api.assignments import get_assignment, list_assignments
from prodapi_client.api.changes import get_changes
from prodapi_client.api.contacts import get_contact, list_contacts
from prodapi_client.api.desks import get_desk, list_desks
from prodapi_client.api.events import get_event, list_events
from prodapi_client.api.events_files import get_events_file, list_events_files
from prodapi_client.api.events_history import get_events_history, list_events_history
from prodapi_client.api.home import get_home
from prodapi_client.api.items import get_item, list_items
from prodapi_client.api.planning import get_planning, list_planning
from prodapi_client.api.users import get_user, list_users
from prodapi_client.types import UNSET

# Each resource's list and detail operations.
RESOURCES = {
    "items": (list_items, get_item),
    "desks": (list_desks, get_desk),
    "assignments": (list_assignments, get_assignment),
    "events": (list_events, get_event),
    "events_history": (list_events_history, get_events_history),
    "events_files": (list_events_files, get_events_file),
    "planning": (list_planning, get_planning),
    "contacts": (list_contacts, get_contact),
    "users": (list_users, get_user),
}
PAGE = 2  # small pages, so that paging is walked everywhere


class WalkError(Exception):
    pass


class Walker:
    def __init__(self, client):
        self.client = client
        self.requests = 0
        self.pages = 0
        self.links = 0
        self.details = {}  # "resource/id" -> the document, once fetched

    def call(self, op, **params):
        """Runs a generated operation; anything but 200 is an error."""
        self.requests += 1
        res = op.sync_detailed(client=self.client, **params)
        if res.status_code != 200:
            raise WalkError(f"{op.__name__.rsplit('.', 1)[-1]}({params}): {int(res.status_code)} {res.content[:300]!r}")
        return res.parsed

    def walk_list(self, name, by="page"):
        """Pages through a resource by _links.next, by page number or, with
        by="cursor", by cursor from cursor= (empty); returns its documents."""
        list_op = RESOURCES[name][0]
        params = {"max_results": PAGE}
        if by == "cursor":
            params["cursor"] = ""
        docs = []
        while True:
            page = self.call(list_op, **params)
            self.pages += 1
            docs.extend(page.field_items)
            nxt = page.field_links.next_
            if nxt is UNSET:
                break
            params = self.list_params(nxt.href, name, by)
        total = page.field_meta.total
        ids = [d.field_id for d in docs]
        if len(ids) != total or len(set(ids)) != total:
            raise WalkError(f"{name} by {by}: {len(ids)} documents ({len(set(ids))} distinct) over the pages, _meta.total {total}")
        return docs

    @staticmethod
    def list_params(href, name, by):
        """The typed parameters of a next link ("items?max_results=2&page=3",
        "items?max_results=2&cursor=AcSP...")."""
        u = urlsplit(href)
        if u.path != name:
            raise WalkError(f"{name}: next link {href} leaves the resource")
        params = {}
        for key, value in parse_qsl(u.query, strict_parsing=True):
            if key not in (by, "max_results"):
                raise WalkError(f"{name}: next link {href} carries {key}, which the walk by {by} never sent")
            params[key] = value if key == "cursor" else int(value)
        if by not in params:
            raise WalkError(f"{name}: next link {href} carries no {by}")
        return params

    def follow(self, href):
        """Fetches the document an href names ("planning/<guid>"), then
        follows its own links."""
        self.links += 1
        name, _, raw_id = href.partition("/")
        if name not in RESOURCES or not raw_id or "/" in raw_id or "?" in raw_id:
            raise WalkError(f"a link to {href}, which names no document")
        if href in self.details:
            return
        doc = self.call(RESOURCES[name][1], id=unquote(raw_id))
        self.details[href] = doc
        if doc.field_id != unquote(raw_id):
            raise WalkError(f"{href} answered the document {doc.field_id}")
        self.follow_links(doc)

    def follow_links(self, doc):
        """Follows every link of a document but the way back up
        (parent, collection)."""
        links = doc.to_dict().get("_links", {})  # contacts have none
        for rel, value in links.items():
            if rel in ("parent", "collection", "prev"):
                continue
            for link in value if isinstance(value, list) else [value]:
                self.follow(link["href"])
                if "content_href" in link:  # the content delivered for an assignment
                    self.follow(link["content_href"])


def read_changes(w):
    """Reads /changes once: where the log stands, and the link to what
    follows."""
    changes = w.call(get_changes)
    since, nxt = changes.field_meta.since, urlsplit(changes.field_links.next_.href)
    if not since or nxt.path != "changes" or parse_qsl(nxt.query) != [("since", since)]:
        raise WalkError(f"changes: _meta.since {since!r}, next {changes.field_links.next_.href}")
    for e in changes.field_items:
        if e.resource.value not in RESOURCES:
            raise WalkError(f"changes: an entry of {e.resource.value}, which the home does not list")
    return changes


def json_parameters(w, desks):
    """Sends where, projection, source and filter as JSON text and checks
    what comes back."""
    usable = w.call(list_items, where=json.dumps({"pubstatus": "usable"}), max_results=50)
    if not usable.field_items or any(i.pubstatus != "usable" for i in usable.field_items):
        raise WalkError("items where pubstatus is usable: " + str([i.pubstatus for i in usable.field_items]))

    name = desks[0].name
    named = w.call(list_desks, where=json.dumps({"name": name}))
    if [d.name for d in named.field_items] != [d.name for d in desks if d.name == name]:
        raise WalkError(f"desks where name is {name}: {[d.name for d in named.field_items]}")

    headlines = w.call(list_items, projection=json.dumps({"headline": 1}), max_results=5)
    for i in headlines.field_items:
        if i.body_html is not UNSET or i.headline is UNSET:
            raise WalkError(f"projection headline: item {i.field_id} has body_html or lacks its headline")

    source = {"query": {"term": {"type": "picture"}}, "aggs": {"states": {"terms": {"field": "state"}}}}
    pictures = w.call(list_items, source=json.dumps(source))
    buckets = pictures.field_aggregations.to_dict()["states"]["buckets"]
    if not pictures.field_items or any(i.type_ != "picture" for i in pictures.field_items):
        raise WalkError("source: a term query on type picture answered other types")
    if sum(b["doc_count"] for b in buckets) != pictures.field_meta.total:
        raise WalkError(f"source: the states aggregation counts {buckets}, the list {pictures.field_meta.total}")

    filtered = w.call(list_items, filter_=json.dumps({"terms": {"type": ["picture"]}}))
    if filtered.field_meta.total != pictures.field_meta.total:
        raise WalkError(f"filter: {filtered.field_meta.total} pictures, source found {pictures.field_meta.total}")


def main():
    client = AuthenticatedClient(base_url=os.environ["PRODAPI_URL"], token=os.environ["PRODAPI_TOKEN"],
                                 raise_on_unexpected_status=True)
    w = Walker(client)
    home = w.call(get_home)
    names = [link.href for link in home.field_links.child]
    if sorted(names) != sorted(RESOURCES):
        raise WalkError(f"the home lists {names}; the walk knows {sorted(RESOURCES)}")
    listed = {name: w.walk_list(name) for name in names}
    for docs in listed.values():
        for doc in docs:
            w.follow_links(doc)
    by_cursor = w.walk_list("items", by="cursor")
    if sorted(d.field_id for d in by_cursor) != sorted(d.field_id for d in listed["items"]):
        raise WalkError("items: the walk by cursor and the walk by page found different documents")
    changes = read_changes(w)
    json_parameters(w, listed["desks"])
    print(f"python: {len(names)} resources, {w.pages} pages, {sum(map(len, listed.values()))} documents listed, "
          f"{w.links} links followed to {len(w.details)} documents, {len(by_cursor)} items by cursor, "
          f"{len(changes.field_items)} changes, {w.requests} requests: ok")


if __name__ == "__main__":
    try:
        main()
    except WalkError as e:
        sys.exit(f"python: {e}")
