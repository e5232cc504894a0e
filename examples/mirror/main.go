// Command mirror keeps a copy of a prodapi newsroom in a directory, as a
// third-party app would: one file per document,
// <dir>/<resource>/<_id>.json (the _id path-escaped), holding the
// document as the API served it. It uses the standard library only.
//
//	PRODAPI_URL=http://localhost:5500/prodapi/v1 PRODAPI_TOKEN=$TOKEN go run ./examples/mirror -dir /tmp/mirror
//
// It takes the change log's position first (/changes?since=now), then
// walks every list the token may read by cursor, then follows /changes
// from that position with include=doc, as an event stream (-follow
// stream, the default) or with long polls (-follow poll), and applies
// each entry: a delete removes the document's file, a flush walks that
// resource again, any other entry writes the document it carries (or
// removes the file when it carries null: deleted since). A 410 (the log
// can no longer follow the position) starts it all over; any other
// failure, after a pause, resumes from the last entry applied (a stream
// with Last-Event-ID).
//
// The position comes before the walk so that no change is lost: one
// made during the walk is in the log after that position, and is
// applied once the walk is over. The walk may have read it already;
// writing a document twice only writes its file twice. The documents
// come with the entries (include=doc), at least as new as they are,
// whichever replica answers: fetched apart, each would need
// min_position, which the mirror sends when an entry comes without one.
//
// It prints a line per resource walked and per entry applied, and
// stops on Ctrl-C.
package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	dir := flag.String("dir", "mirror", "the directory the copy is kept in")
	pageSize := flag.Int("max-results", 500, "documents per page of a walk (at most 500)")
	follow := flag.String("follow", "stream", "how to follow /changes: stream (Server-Sent Events) or poll (long polls)")
	flag.Parse()
	if *follow != "stream" && *follow != "poll" {
		fmt.Fprintln(os.Stderr, "mirror: -follow is stream or poll")
		os.Exit(2)
	}
	m := &mirror{
		api:      strings.TrimSuffix(cmp.Or(os.Getenv("PRODAPI_URL"), "http://localhost:5500/prodapi/v1"), "/"),
		token:    os.Getenv("PRODAPI_TOKEN"),
		dir:      *dir,
		pageSize: *pageSize,
		stream:   *follow == "stream",
		// Long enough for a long poll's 60 s.
		client: &http.Client{Timeout: 2 * time.Minute},
		// A stream has no end: it is watched for silence instead (idle).
		streams: &http.Client{},
		idle:    time.Minute,
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m.run(ctx)
}

// A mirror is a copy of the newsroom behind api in dir.
type mirror struct {
	api      string // the API's root, e.g. http://localhost:5500/prodapi/v1
	token    string
	dir      string
	pageSize int
	stream   bool // follow the event stream; otherwise long polls
	client   *http.Client
	streams  *http.Client
	// idle is the longest a stream may stay silent (the server writes a
	// keepalive every 15 s): past it, the mirror reconnects.
	idle time.Duration
}

// run mirrors the newsroom, then follows its changes until ctx ends. It
// starts over when the log no longer holds its position (410), and on
// any other failure (the server restarting, say) tries again from the
// same position after a pause.
func (m *mirror) run(ctx context.Context) {
	since := ""
	for {
		var err error
		if since == "" {
			since, err = m.sync(ctx)
		}
		if err == nil {
			since, err = m.follow(ctx, since)
		}
		if ctx.Err() != nil {
			return
		}
		if status(err) == http.StatusGone {
			log.Printf("%v: mirroring again", err)
			since = ""
			continue
		}
		log.Printf("%v: trying again in 5 s", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}

// sync takes the log's position, then walks every resource the token
// may read, and returns the position to follow the log from.
func (m *mirror) sync(ctx context.Context) (string, error) {
	var now changesPage
	if err := m.get(ctx, "changes?since=now", &now); err != nil {
		return "", err
	}
	var home struct {
		Links struct {
			Child []link `json:"child"`
		} `json:"_links"`
	}
	if err := m.get(ctx, "", &home); err != nil {
		return "", err
	}
	for _, res := range home.Links.Child {
		err := m.walk(ctx, res.Href)
		if status(err) == http.StatusForbidden {
			log.Printf("%s: the token may not read it: left out", res.Href)
			continue
		}
		if err != nil {
			return "", err
		}
	}
	return now.Meta.Since, nil
}

// walk stores every document of a resource, following the cursor from
// page to page, then removes the files of the documents it did not see
// (deleted while the mirror was not following).
func (m *mirror) walk(ctx context.Context, resource string) error {
	seen := map[string]bool{}
	n := 0
	next := fmt.Sprintf("%s?max_results=%d&cursor=", resource, m.pageSize)
	for next != "" {
		var page struct {
			Items []json.RawMessage `json:"_items"`
			Links struct {
				Next *link `json:"next"` // absent on the last page
			} `json:"_links"`
		}
		if err := m.get(ctx, next, &page); err != nil {
			return err
		}
		for _, doc := range page.Items {
			var d struct {
				ID string `json:"_id"`
			}
			if err := json.Unmarshal(doc, &d); err != nil {
				return fmt.Errorf("%s: a document without an _id: %w", resource, err)
			}
			if err := m.store(resource, d.ID, doc); err != nil {
				return err
			}
			seen[d.ID] = true
			n++
		}
		next = ""
		if page.Links.Next != nil {
			next = page.Links.Next.Href
		}
	}
	files, err := os.ReadDir(filepath.Join(m.dir, resource))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, f := range files {
		name, isDoc := strings.CutSuffix(f.Name(), ".json") // not a .tmp left behind
		id, err := url.PathUnescape(name)
		if isDoc && err == nil && !seen[id] {
			if err := m.remove(resource, id); err != nil {
				return err
			}
		}
	}
	fmt.Printf("walked %s: %d documents\n", resource, n)
	return nil
}

// follow follows /changes from since and applies each entry, until ctx
// ends or something fails. It returns the position reached: entries
// after it were not all applied, and will be read again.
func (m *mirror) follow(ctx context.Context, since string) (string, error) {
	if m.stream {
		fmt.Printf("following /changes from %s, streamed\n", since)
		return m.followStream(ctx, since)
	}
	fmt.Printf("following /changes from %s, polled\n", since)
	for {
		var page changesPage
		if err := m.get(ctx, "changes?include=doc&wait=60&max_results=500&since="+url.QueryEscape(since), &page); err != nil {
			return since, err
		}
		for _, e := range page.Items {
			if err := m.apply(ctx, e, page.Meta.Since); err != nil {
				return since, err
			}
		}
		since = page.Meta.Since
	}
}

// followStream follows the event stream of /changes from since, each
// event's id the position after its entry, until ctx ends, the stream
// fails or the server ends it. It returns the position of the last entry
// applied: a stream that ends without a close event (the server shut
// down) resumes from there at once, with Last-Event-ID.
func (m *mirror) followStream(ctx context.Context, since string) (string, error) {
	for {
		var err error
		since, err = m.stream1(ctx, since)
		if err != nil || ctx.Err() != nil {
			return since, err
		}
		select { // a moment, for the next replica to take over
		case <-ctx.Done():
			return since, nil
		case <-time.After(time.Second):
		}
	}
}

// stream1 reads one event stream from since.
func (m *mirror) stream1(ctx context.Context, since string) (string, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// Silence for longer than idle (the server's keepalives stopped
	// coming: a dead connection, a proxy that holds them) ends the stream.
	silent := errors.New("the stream was silent for too long")
	watchdog := time.AfterFunc(m.idle, func() { cancel(silent) })
	defer watchdog.Stop()
	req, err := m.request(ctx, "changes?include=doc&max_results=500")
	if err != nil {
		return since, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", since) // a position, which a stream resumes after
	res, err := m.streams.Do(req)
	if err != nil {
		return since, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return since, answerError("changes", res)
	}
	r := bufio.NewReader(res.Body)
	var id, event string
	var data []byte
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
				err = cause
			}
			if errors.Is(err, io.EOF) {
				return since, nil // the server ended it: reconnect
			}
			return since, err
		}
		watchdog.Reset(m.idle)
		line = strings.TrimSuffix(line, "\n")
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "" && event == "close": // the envelope saying why
			return since, envelopeError("changes", data)
		case line == "" && event == "change":
			var e entry
			if err := json.Unmarshal(data, &e); err != nil {
				return since, fmt.Errorf("changes: an event that is not an entry: %w", err)
			}
			if err := m.apply(ctx, e, id); err != nil {
				return since, err
			}
			since = id
			id, event, data = "", "", nil
		case line == "":
			id, event, data = "", "", nil
		case field == "id":
			id = value
		case field == "event":
			event = value
		case field == "data":
			data = append(data, value...)
		}
	}
}

// apply brings the copy up to date with one entry of the change log: the
// document it carries (include=doc), or, when it carries none, the
// document read at least as new as pos, the position after it.
func (m *mirror) apply(ctx context.Context, e entry, pos string) error {
	var err error
	switch e.Op {
	case "flush": // anything of the resource may have changed
		err = m.walk(ctx, e.Resource)
	case "delete":
		err = m.remove(e.Resource, e.ID)
	default: // insert, update, replace: the document as it is now
		doc := e.Doc
		if doc == nil {
			err = m.get(ctx, e.Links.Self.Href+"?min_position="+url.QueryEscape(pos), &doc)
			if status(err) == http.StatusNotFound {
				doc, err = json.RawMessage("null"), nil
			}
		}
		switch {
		case err != nil:
		case string(doc) == "null": // deleted since: its delete comes later
			err = m.remove(e.Resource, e.ID)
		default:
			err = m.store(e.Resource, e.ID, doc)
		}
	}
	if err != nil {
		return err
	}
	fmt.Println(e.Op, path.Join(e.Resource, e.ID))
	return nil
}

// store writes a document's file, whole or not at all.
func (m *mirror) store(resource, id string, doc []byte) error {
	file := m.file(resource, id)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(file+".tmp", doc, 0o644); err != nil {
		return err
	}
	return os.Rename(file+".tmp", file)
}

func (m *mirror) remove(resource, id string) error {
	if err := os.Remove(m.file(resource, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (m *mirror) file(resource, id string) string {
	return filepath.Join(m.dir, resource, url.PathEscape(id)+".json")
}

// get reads href, relative to the API's root as the API's own hrefs are,
// into v. An answer other than 200 is a *statusError carrying the
// message of the API's error envelope.
func (m *mirror) get(ctx context.Context, href string, v any) error {
	req, err := m.request(ctx, href)
	if err != nil {
		return err
	}
	res, err := m.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return answerError(href, res)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		return fmt.Errorf("%s: %w", href, err)
	}
	return nil
}

// request is a GET of href, relative to the API's root, with the token.
func (m *mirror) request(ctx context.Context, href string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.api+"/"+href, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+m.token)
	return req, nil
}

// answerError is the *statusError of an answer other than 200.
func answerError(href string, res *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
	err := envelopeError(href, body)
	err.status = res.StatusCode
	return err
}

// envelopeError is the *statusError the API's error envelope describes
// (a body that is not the envelope leaves it empty).
func envelopeError(href string, body []byte) *statusError {
	var envelope struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"_error"`
	}
	json.Unmarshal(body, &envelope)
	return &statusError{href: href, status: envelope.Error.Code, message: envelope.Error.Message}
}

// A statusError is an answer of the API other than 200.
type statusError struct {
	href    string
	status  int
	message string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s: %d %s", e.href, e.status, e.message)
}

// status is the HTTP status err carries: 200 for nil, 0 for a failure
// that got no answer.
func status(err error) int {
	var se *statusError
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &se):
		return se.status
	}
	return 0
}

type link struct {
	Href string `json:"href"`
}

// changesPage is an answer of /changes.
type changesPage struct {
	Items []entry `json:"_items"`
	Meta  struct {
		Since string `json:"since"` // the position to resume from
	} `json:"_meta"`
}

// An entry of the change log: a flush has neither ID nor Links; with
// include=doc, an insert, update or replace has Doc (null when the
// document answers 404).
type entry struct {
	Resource string `json:"resource"`
	ID       string `json:"_id"`
	Op       string `json:"op"`
	Links    struct {
		Self link `json:"self"`
	} `json:"_links"`
	Doc json.RawMessage `json:"doc"`
}
