package elastic

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/prodapi/prodapi/sources"
)

// What the platform's Elasticsearch is, for `prodapi check`: GET / and
// searches of no documents, never a write.

// A Node is what the cluster says of itself at GET /, and whether the
// client takes it for Elasticsearch.
type Node struct {
	Version      string // "7.10.2"
	BuildFlavor  string // "default", "oss"; "" from 8.x on
	Distribution string // "opensearch" for OpenSearch, "" for Elasticsearch
	Tagline      string
	// Accepted reports that the client's product check passes: the node
	// sends X-Elastic-Product (7.14 on), or, from 7.0 to 7.13, its GET /
	// passes the 7.x client's check (Config). The client refuses every
	// answer of a node that fails it.
	Accepted bool
}

// Legacy reports that the node passes the product check by its GET /, as
// the 7.x client checked it, not by the X-Elastic-Product header.
func (n Node) Legacy() bool {
	major, minor, ok := sources.MajorMinor(n.Version)
	return n.Accepted && ok && major == 7 && minor < 14
}

// Tested reports whether the adapter is tested against this node: an
// Elasticsearch the client accepts, 7.10 to 7.17 or 8.x (older 7.x and
// newer majors may work, untested).
func (n Node) Tested() bool {
	major, minor, ok := sources.MajorMinor(n.Version)
	return n.Accepted && ok && (major == 7 && minor >= 10 || major == 8)
}

// Node asks the cluster for its root document (GET /), past the client's
// product check, so that a node the client refuses is described rather
// than reported unreachable. Errors wrap ErrUnavailable or ErrTimeout.
func (s *Store) Node(ctx context.Context) (Node, error) {
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(tctx, http.MethodGet, "/", nil)
	if err != nil {
		return Node{}, transportError(ctx, tctx, "info", "", err)
	}
	// The transport, not the client: the client's product check would
	// refuse the answer of a node that fails it.
	res, err := s.client.Transport.Perform(req)
	if err != nil {
		return Node{}, transportError(ctx, tctx, "info", "", err)
	}
	defer res.Body.Close()
	data, err := readBounded(res.Body, maxInfoBody)
	if err != nil {
		return Node{}, transportError(ctx, tctx, "info", "", err)
	}
	if res.StatusCode != http.StatusOK {
		e := parseError(data)
		return Node{}, &Error{Op: "info", Status: res.StatusCode, Type: e.typ, Reason: e.text(), Kind: sources.ErrUnavailable}
	}
	var info struct {
		Tagline string `json:"tagline"`
		Version struct {
			Number       string `json:"number"`
			BuildFlavor  string `json:"build_flavor"`
			Distribution string `json:"distribution"`
		} `json:"version"`
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return Node{}, &Error{Op: "info", Status: res.StatusCode, Reason: "GET / is not a cluster's info: " + clip(err.Error()), Kind: sources.ErrUnavailable}
	}
	return Node{
		Version:      info.Version.Number,
		BuildFlavor:  info.Version.BuildFlavor,
		Distribution: info.Version.Distribution,
		Tagline:      info.Tagline,
		Accepted:     res.Header.Get(productHeader) == productName,
	}, nil
}

// Count reports how many documents the index of collection holds, up to
// sources.MaxTotal, with a search of no documents; exists is false when
// there is no such index (its lists read as empty).
func (s *Store) Count(ctx context.Context, collection string) (n int, exists bool, err error) {
	r, err := s.search(ctx, "count", collection, []byte(`{"size":0,"track_total_hits":10000}`), false)
	if err != nil {
		return 0, false, err
	}
	return r.total, !r.missing, nil
}
