package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
)

// The kinds sources.FailureKind names are the ones the error counter
// declares at 0: a kind outside the list would have no series until its
// first failure.
func TestFailureKinds(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("mongo: get items: %w", sources.ErrNotFound), ""},
		{context.Canceled, ""},
		{fmt.Errorf("mongo: find items: %w", sources.ErrUnavailable), metrics.KindUnavailable},
		{fmt.Errorf("elastic: search: %w", sources.ErrPartial), metrics.KindUnavailable},
		{fmt.Errorf("elastic: search: %w", sources.ErrTimeout), metrics.KindTimeout},
		{context.DeadlineExceeded, metrics.KindTimeout},
		{fmt.Errorf("elastic: search: %w", sources.ErrInvalid), metrics.KindInvalid},
		{errors.New("mongo: corrupt GridFS file"), metrics.KindOther},
	} {
		got := sources.FailureKind(tc.err)
		if got != tc.want {
			t.Errorf("FailureKind(%v) = %q, want %q", tc.err, got, tc.want)
		}
		if got != "" && !slices.Contains(metrics.ErrorKinds[:], got) {
			t.Errorf("FailureKind(%v) = %q, not one of metrics.ErrorKinds", tc.err, got)
		}
	}
}
