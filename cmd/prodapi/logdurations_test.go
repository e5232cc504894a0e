package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The service's log writes durations as Go does, whoever logs them, in
// groups too; other values as they are.
func TestLogDurations(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: goDurations}))
	l.Info("m", "in", 1500*time.Millisecond, slog.Duration("every", time.Minute), slog.Group("g", "delay", time.Duration(0)), "n", 3)
	want := `"msg":"m","in":"1.5s","every":"1m0s","g":{"delay":"0s"},"n":3}`
	if got := buf.String(); !strings.HasSuffix(strings.TrimSpace(got), want) {
		t.Errorf("got %s\nwant …%s", got, want)
	}
}
