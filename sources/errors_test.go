package sources_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
)

// refusal is an error that states its own status, as the server's answers
// and server/query's refusals do.
type refusal struct {
	status int
	err    error
}

func (r *refusal) Error() string   { return fmt.Sprintf("refused (%d)", r.status) }
func (r *refusal) Unwrap() error   { return r.err }
func (r *refusal) HTTPStatus() int { return r.status }

// adapterError wraps a sentinel as the adapters' error types do
// (elastic.Error, mongo's opError): Unwrap returns the sentinel.
type adapterError struct{ kind error }

func (e *adapterError) Error() string { return "adapter: " + e.kind.Error() }
func (e *adapterError) Unwrap() error { return e.kind }

// sentinels are the errors of package sources callers test for, by name.
var sentinels = map[string]error{
	"ErrNotFound":    sources.ErrNotFound,
	"ErrInvalid":     sources.ErrInvalid,
	"ErrUnavailable": sources.ErrUnavailable,
	"ErrTimeout":     sources.ErrTimeout,
	"ErrPartial":     sources.ErrPartial,
	"ErrCursor":      sources.ErrCursor,
	"ErrExpired":     sources.ErrExpired,
}

// Every kind of error the service produces, as it produces it, is
// classified by the one table: the adapters' sentinels, the change log's
// expiry, the contexts' ends, the refusals that carry their own status,
// and anything else.
func TestClassify(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	timedOut, cancel := context.WithTimeout(context.Background(), -1)
	defer cancel()
	type class struct {
		Kind    string
		Status  int
		Failure string
	}
	for _, tc := range []struct {
		name string
		err  error
		want class
	}{
		{"nil", nil, class{"none", 200, ""}},
		{"not found", fmt.Errorf("mongo: get items: %w", sources.ErrNotFound), class{"not_found", 404, ""}},
		{"not found, bare", sources.ErrNotFound, class{"not_found", 404, ""}},
		{"invalid", &adapterError{sources.ErrInvalid}, class{"invalid", 400, "invalid"}},
		{"invalid, sandbox", fmt.Errorf("sandbox: time_zone %q: %w", "Mars", sources.ErrInvalid), class{"invalid", 400, "invalid"}},
		{"cursor", fmt.Errorf("mongo: walk: %w", sources.ErrCursor), class{"cursor", 400, "invalid"}},
		{"cursor, elastic", &adapterError{sources.ErrCursor}, class{"cursor", 400, "invalid"}},
		{"unavailable", &adapterError{sources.ErrUnavailable}, class{"unavailable", 503, "unavailable"}},
		{"unavailable, objstore", fmt.Errorf("objstore: head: %w: %v", sources.ErrUnavailable, errors.New("403 Forbidden")), class{"unavailable", 503, "unavailable"}},
		{"partial", &adapterError{sources.ErrPartial}, class{"unavailable", 503, "unavailable"}},
		{"timeout", &adapterError{sources.ErrTimeout}, class{"timeout", 504, "timeout"}},
		{"deadline", context.DeadlineExceeded, class{"timeout", 504, "timeout"}},
		{"deadline, a context's", fmt.Errorf("cache: waiting for a load: %w", context.Cause(timedOut)), class{"timeout", 504, "timeout"}},
		{"canceled", context.Canceled, class{"canceled", 499, ""}},
		{"canceled, a context's", fmt.Errorf("elastic: search items: %w", canceled.Err()), class{"canceled", 499, ""}},
		{"expired, the change log's", fmt.Errorf("changelog: read: %q: %w", "1-0", sources.ErrExpired), class{"expired", 410, "other"}},
		{"refused", &refusal{status: 414}, class{"refused", 414, "invalid"}},
		{"refused, wrapping an invalid query", fmt.Errorf("%w: %w", &refusal{status: 400}, sources.ErrInvalid), class{"refused", 400, "invalid"}},
		{"refused, wrapped", fmt.Errorf("server: %w", &refusal{status: 503, err: sources.ErrUnavailable}), class{"refused", 503, "invalid"}},
		{"other", errors.New("mongo: corrupt GridFS file"), class{"internal", 500, "other"}},
		{"a panic", fmt.Errorf("server: panic: %v", "boom"), class{"internal", 500, "other"}},
		// An error that wraps several: the table's order decides, the
		// client's answer before the backend's state.
		{"not found and unavailable", errors.Join(sources.ErrUnavailable, sources.ErrNotFound), class{"not_found", 404, ""}},
		{"timeout and unavailable", errors.Join(sources.ErrUnavailable, sources.ErrTimeout), class{"timeout", 504, "timeout"}},
		{"unavailable and canceled", errors.Join(context.Canceled, sources.ErrUnavailable), class{"unavailable", 503, "unavailable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, status := sources.Classify(tc.err)
			got := class{kind.String(), status, sources.FailureKind(tc.err)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Classify(%v) (-want +got):\n%s", tc.err, diff)
			}
		})
	}
}

// Every sentinel package sources declares is in Classify's table, so a
// new one cannot fall through to 500: declare it, add it to the table in
// errors.go and to sentinels above.
func TestClassifyKnowsEverySentinel(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") {
						declared = append(declared, n.Name)
					}
				}
			}
		}
	}
	slices.Sort(declared)
	var known []string
	for name, err := range sentinels {
		known = append(known, name)
		if kind, _ := sources.Classify(err); kind == sources.KindInternal || kind == sources.KindNone {
			t.Errorf("Classify(sources.%s) = %v: it is not in the table", name, kind)
		}
	}
	slices.Sort(known)
	if diff := cmp.Diff(declared, known); diff != "" {
		t.Errorf("the sentinels of package sources (-declared +tested):\n%s", diff)
	}
}

func TestKinds(t *testing.T) {
	var names []string
	for _, k := range sources.Kinds() {
		names = append(names, k.String())
	}
	want := []string{"none", "refused", "not_found", "expired", "cursor", "invalid", "timeout", "unavailable", "canceled", "internal"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("Kinds (-want +got):\n%s", diff)
	}
}
