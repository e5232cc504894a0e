//go:build ignore

// Command walk walks a running prodapi with the Go client openapi-generator
// generates from its document. It builds beside that client, in the module
// make clients-test assembles (examples/clients/run.sh), which replaces
// example.com/prodapi/client with the generated code. prodapi's own module
// never builds it, and go mod tidy does not read it (the ignore build tag;
// named on the command line, the file builds all the same):
//
//	PRODAPI_URL=http://localhost:5500/prodapi/v1 PRODAPI_TOKEN=... go run walk.go
//
// The same walk as python/walk.py: from the home document, every resource
// is paged through two documents a page by its typed list operation,
// following _links.next; every link of every document is followed through
// the typed detail operation of the resource it names, and on from each
// detail; items are walked by cursor (cursor= first, then the cursor of
// each _links.next) to the page without a next, and /changes is read once;
// then where, projection, source and filter are sent as JSON text.
// Any status but 200, a page that repeats or misses a document, or a link
// to nowhere stops it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	prodapi "example.com/prodapi/client"
)

const pageSize = 2 // small pages, so that paging is walked everywhere

// A page is what the walk reads of a list: its documents (each as JSON),
// the next link and the total.
type page struct {
	Docs  []map[string]any `json:"_items"`
	Links struct {
		Next *struct {
			Href string `json:"href"`
		} `json:"next"`
	} `json:"_links"`
	Meta struct {
		Total int `json:"total"`
	} `json:"_meta"`
}

func check(res *http.Response, err error) error {
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", res.Request.URL, res.Status)
	}
	return nil
}

// reread gives a model the generated client decoded back as the JSON it
// read into v: the walk follows links by name, whatever the model calls
// them.
func reread(model, v any) error {
	b, err := json.Marshal(model)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// operations are a resource's typed list and detail operations.
type operations struct {
	list func(ctx context.Context, q listQuery) (page, error)
	get  func(ctx context.Context, id string) (map[string]any, error)
}

// A listQuery is where a walk stands: a page number, or a cursor ("" for
// the first page of a walk by cursor).
type listQuery struct {
	by         string // "page" or "cursor"
	page       int32
	cursor     string
	maxResults int32
}

// A listRequest is a generated list request (ApiListItemsRequest, ...),
// answered with an L (ItemList, ...).
type listRequest[R, L any] interface {
	Page(int32) R
	Cursor(string) R
	MaxResults(int32) R
	Execute() (*L, *http.Response, error)
}

// A getRequest is a generated detail request, answered with a D.
type getRequest[D any] interface {
	Execute() (*D, *http.Response, error)
}

// ops makes a resource's operations from its generated ones.
func ops[L, D any, LR listRequest[LR, L], GR getRequest[D]](list func(context.Context) LR, get func(context.Context, string) GR) operations {
	return operations{
		list: func(ctx context.Context, q listQuery) (page, error) {
			req := list(ctx).MaxResults(q.maxResults)
			if q.by == "cursor" {
				req = req.Cursor(q.cursor)
			} else {
				req = req.Page(q.page)
			}
			l, res, err := req.Execute()
			if err := check(res, err); err != nil {
				return page{}, err
			}
			var pg page
			return pg, reread(l, &pg)
		},
		get: func(ctx context.Context, id string) (map[string]any, error) {
			d, res, err := get(ctx, id).Execute()
			if err := check(res, err); err != nil {
				return nil, err
			}
			var doc map[string]any
			return doc, reread(d, &doc)
		},
	}
}

func resources(c *prodapi.APIClient) map[string]operations {
	return map[string]operations{
		"items":          ops[prodapi.ItemList, prodapi.ItemDetail](c.ItemsAPI.ListItems, c.ItemsAPI.GetItem),
		"desks":          ops[prodapi.DeskList, prodapi.DeskDetail](c.DesksAPI.ListDesks, c.DesksAPI.GetDesk),
		"assignments":    ops[prodapi.AssignmentList, prodapi.AssignmentDetail](c.AssignmentsAPI.ListAssignments, c.AssignmentsAPI.GetAssignment),
		"events":         ops[prodapi.EventList, prodapi.EventDetail](c.EventsAPI.ListEvents, c.EventsAPI.GetEvent),
		"events_history": ops[prodapi.EventsHistoryList, prodapi.EventsHistoryDetail](c.EventsHistoryAPI.ListEventsHistory, c.EventsHistoryAPI.GetEventsHistory),
		"events_files":   ops[prodapi.EventsFileList, prodapi.EventsFileDetail](c.EventsFilesAPI.ListEventsFiles, c.EventsFilesAPI.GetEventsFile),
		"planning":       ops[prodapi.PlanningList, prodapi.PlanningDetail](c.PlanningAPI.ListPlanning, c.PlanningAPI.GetPlanning),
		"contacts":       ops[prodapi.ContactList, prodapi.Contact](c.ContactsAPI.ListContacts, c.ContactsAPI.GetContact),
		"users":          ops[prodapi.UserList, prodapi.UserDetail](c.UsersAPI.ListUsers, c.UsersAPI.GetUser),
	}
}

type walker struct {
	c                      *prodapi.APIClient
	ops                    map[string]operations
	requests, pages, links int
	details                map[string]bool // hrefs fetched
}

// walkList pages through a resource by _links.next, by page number or
// (by "cursor") by cursor from cursor= (empty).
func (w *walker) walkList(ctx context.Context, name, by string) ([]map[string]any, error) {
	var docs []map[string]any
	q := listQuery{by: by, page: 1, maxResults: pageSize}
	for {
		w.requests++
		pg, err := w.ops[name].list(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("%s by %s, %+v: %w", name, by, q, err)
		}
		w.pages++
		docs = append(docs, pg.Docs...)
		if pg.Links.Next == nil {
			ids := map[any]bool{}
			for _, d := range docs {
				ids[d["_id"]] = true
			}
			if len(docs) != pg.Meta.Total || len(ids) != pg.Meta.Total {
				return nil, fmt.Errorf("%s by %s: %d documents (%d distinct) over the pages, _meta.total %d", name, by, len(docs), len(ids), pg.Meta.Total)
			}
			return docs, nil
		}
		if q, err = listParams(pg.Links.Next.Href, name, by); err != nil {
			return nil, err
		}
	}
}

// listParams reads a next link ("items?max_results=2&page=3",
// "items?max_results=2&cursor=AcSP...").
func listParams(href, name, by string) (listQuery, error) {
	u, err := url.Parse(href)
	if err != nil || u.Path != name {
		return listQuery{}, fmt.Errorf("%s: next link %s leaves the resource", name, href)
	}
	q := listQuery{by: by, maxResults: 25}
	values := u.Query()
	if !values.Has(by) {
		return listQuery{}, fmt.Errorf("%s: next link %s carries no %s", name, href, by)
	}
	for key, vs := range values {
		if key == "cursor" && by == "cursor" {
			q.cursor = vs[0]
			continue
		}
		v, err := strconv.ParseInt(vs[0], 10, 32)
		switch {
		case key == "page" && by == "page" || key == "max_results":
			if err != nil {
				return listQuery{}, fmt.Errorf("%s: next link %s: %w", name, href, err)
			}
			if key == "page" {
				q.page = int32(v)
			} else {
				q.maxResults = int32(v)
			}
		default:
			return listQuery{}, fmt.Errorf("%s: next link %s carries %s, which the walk by %s never sent", name, href, key, by)
		}
	}
	return q, nil
}

// readChanges reads /changes once: where the log stands, and the link to
// what follows; it returns the number of entries.
func (w *walker) readChanges(ctx context.Context) (int, error) {
	w.requests++
	changes, res, err := w.c.ChangesAPI.GetChanges(ctx).Execute()
	if err := check(res, err); err != nil {
		return 0, fmt.Errorf("changes: %w", err)
	}
	since, next := changes.Meta.Since, changes.Links.Next.Href
	u, err := url.Parse(next)
	if since == "" || err != nil || u.Path != "changes" || !maps.EqualFunc(u.Query(), url.Values{"since": {since}}, slices.Equal) {
		return 0, fmt.Errorf("changes: _meta.since %q, next %s", since, next)
	}
	for _, e := range changes.Items {
		if _, ok := w.ops[string(e.Resource)]; !ok {
			return 0, fmt.Errorf("changes: an entry of %s, which the home does not list", e.Resource)
		}
	}
	return len(changes.Items), nil
}

// follow fetches the document an href names, then follows its own links.
func (w *walker) follow(ctx context.Context, href string) error {
	w.links++
	name, rawID, _ := strings.Cut(href, "/")
	ops, ok := w.ops[name]
	if !ok || rawID == "" || strings.ContainsAny(rawID, "/?") {
		return fmt.Errorf("a link to %s, which names no document", href)
	}
	if w.details[href] {
		return nil
	}
	id, err := url.PathUnescape(rawID)
	if err != nil {
		return fmt.Errorf("a link to %s: %w", href, err)
	}
	w.requests++
	doc, err := ops.get(ctx, id)
	if err != nil {
		return fmt.Errorf("%s: %w", href, err)
	}
	w.details[href] = true
	if doc["_id"] != id {
		return fmt.Errorf("%s answered the document %v", href, doc["_id"])
	}
	return w.followLinks(ctx, doc)
}

// followLinks follows every link of a document but the way back up.
func (w *walker) followLinks(ctx context.Context, doc map[string]any) error {
	links, _ := doc["_links"].(map[string]any) // contacts have none
	for _, rel := range slices.Sorted(maps.Keys(links)) {
		if rel == "parent" || rel == "collection" || rel == "prev" {
			continue
		}
		list, ok := links[rel].([]any)
		if !ok {
			list = []any{links[rel]}
		}
		for _, l := range list {
			link, _ := l.(map[string]any)
			href, ok := link["href"].(string)
			if !ok {
				return fmt.Errorf("%v: _links.%s is not a link: %v", doc["_id"], rel, l)
			}
			if err := w.follow(ctx, href); err != nil {
				return err
			}
			if content, ok := link["content_href"].(string); ok { // the content delivered for an assignment
				if err := w.follow(ctx, content); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// jsonParameters sends where, projection, source and filter as JSON text.
func (w *walker) jsonParameters(ctx context.Context, desks []map[string]any) error {
	c := w.c
	text := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	w.requests += 5

	usable, res, err := c.ItemsAPI.ListItems(ctx).Where(text(map[string]any{"pubstatus": "usable"})).MaxResults(50).Execute()
	if err := check(res, err); err != nil {
		return fmt.Errorf("where: %w", err)
	}
	for _, it := range usable.Items {
		if it.Pubstatus.Get() == nil || *it.Pubstatus.Get() != "usable" {
			return fmt.Errorf("items where pubstatus is usable: item %s is %v", it.Id, it.Pubstatus.Get())
		}
	}
	if len(usable.Items) == 0 {
		return errors.New("items where pubstatus is usable: none")
	}

	name, _ := desks[0]["name"].(string)
	named, res, err := c.DesksAPI.ListDesks(ctx).Where(text(map[string]any{"name": name})).Execute()
	if err := check(res, err); err != nil {
		return fmt.Errorf("where: %w", err)
	}
	for _, d := range named.Items {
		if d.Name == nil || *d.Name != name {
			return fmt.Errorf("desks where name is %s: %v", name, d.Name)
		}
	}

	headlines, res, err := c.ItemsAPI.ListItems(ctx).Projection(text(map[string]any{"headline": 1})).MaxResults(5).Execute()
	if err := check(res, err); err != nil {
		return fmt.Errorf("projection: %w", err)
	}
	for _, it := range headlines.Items {
		if it.BodyHtml.IsSet() || !it.Headline.IsSet() {
			return fmt.Errorf("projection headline: item %s has body_html or lacks its headline", it.Id)
		}
	}

	source := map[string]any{"query": map[string]any{"term": map[string]any{"type": "picture"}},
		"aggs": map[string]any{"states": map[string]any{"terms": map[string]any{"field": "state"}}}}
	pictures, res, err := c.ItemsAPI.ListItems(ctx).Source(text(source)).Execute()
	if err := check(res, err); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	counted := 0
	for _, b := range pictures.Aggregations["states"].Buckets {
		counted += int(b.DocCount)
	}
	if len(pictures.Items) == 0 || counted != int(pictures.Meta.Total) {
		return fmt.Errorf("source: %d pictures listed, %d counted by state, total %d", len(pictures.Items), counted, pictures.Meta.Total)
	}

	filtered, res, err := c.ItemsAPI.ListItems(ctx).Filter(text(map[string]any{"terms": map[string]any{"type": []string{"picture"}}})).Execute()
	if err := check(res, err); err != nil {
		return fmt.Errorf("filter: %w", err)
	}
	if filtered.Meta.Total != pictures.Meta.Total {
		return fmt.Errorf("filter: %d pictures, source found %d", filtered.Meta.Total, pictures.Meta.Total)
	}
	return nil
}

func run() error {
	cfg := prodapi.NewConfiguration()
	cfg.Servers = prodapi.ServerConfigurations{{URL: os.Getenv("PRODAPI_URL")}}
	c := prodapi.NewAPIClient(cfg)
	ctx := context.WithValue(context.Background(), prodapi.ContextAccessToken, os.Getenv("PRODAPI_TOKEN"))
	w := &walker{c: c, ops: resources(c), details: map[string]bool{}}

	home, res, err := c.HomeAPI.GetHome(ctx).Execute()
	if err := check(res, err); err != nil {
		return fmt.Errorf("home: %w", err)
	}
	w.requests++
	var names []string
	for _, l := range home.Links.Child {
		names = append(names, l.Href)
	}
	known := slices.Sorted(maps.Keys(w.ops))
	if !slices.Equal(slices.Sorted(slices.Values(names)), known) {
		return fmt.Errorf("the home lists %v; the walk knows %v", names, known)
	}
	listed := map[string][]map[string]any{}
	documents := 0
	for _, name := range names {
		docs, err := w.walkList(ctx, name, "page")
		if err != nil {
			return err
		}
		listed[name] = docs
		documents += len(docs)
	}
	for _, name := range names {
		for _, doc := range listed[name] {
			if err := w.followLinks(ctx, doc); err != nil {
				return err
			}
		}
	}
	byCursor, err := w.walkList(ctx, "items", "cursor")
	if err != nil {
		return err
	}
	if !slices.Equal(sortedIDs(byCursor), sortedIDs(listed["items"])) {
		return errors.New("items: the walk by cursor and the walk by page found different documents")
	}
	changes, err := w.readChanges(ctx)
	if err != nil {
		return err
	}
	if err := w.jsonParameters(ctx, listed["desks"]); err != nil {
		return err
	}
	fmt.Printf("go: %d resources, %d pages, %d documents listed, %d links followed to %d documents, %d items by cursor, %d changes, %d requests: ok\n",
		len(names), w.pages, documents, w.links, len(w.details), len(byCursor), changes, w.requests)
	return nil
}

// sortedIDs are the documents' ids, sorted.
func sortedIDs(docs []map[string]any) []string {
	var ids []string
	for _, d := range docs {
		id, _ := d["_id"].(string)
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "go:", err)
		os.Exit(1)
	}
}
