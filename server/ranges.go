package server

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Limits on a Range header, in the manner of Apache's MaxRanges and
// nginx's max_ranges: a request for many small or overlapping pieces of a
// file costs far more to answer than the file itself.
const (
	// maxRangeSpecs is the most byte-range specs a header may list; more
	// is answered with the whole file (200).
	maxRangeSpecs = 100
	// maxRanges is the most ranges left once overlapping and adjacent
	// ones are merged; more is answered with the whole file (200).
	maxRanges = 16
)

// sanitizeRange rewrites the Range header of r for a file of size bytes
// before http.ServeContent reads it: unsatisfiable ranges are dropped,
// overlapping and adjacent ones merged (in ascending order), and a request
// over the limits loses its Range header, so the whole file is answered
// once with 200. A header that does not parse, or whose ranges are all
// unsatisfiable, is left as it is: ServeContent answers it (416).
// It returns r, or a copy of r with the new header.
func sanitizeRange(r *http.Request, size int64) *http.Request {
	h := r.Header.Get("Range")
	if h == "" || size < 0 {
		return r
	}
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok {
		return r
	}
	var ranges [][2]int64 // [start, end] inclusive
	n := 0
	for part := range strings.SplitSeq(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if n++; n > maxRangeSpecs {
			return withRange(r, "")
		}
		first, last, ok := strings.Cut(part, "-")
		if !ok {
			return r
		}
		first, last = strings.TrimSpace(first), strings.TrimSpace(last)
		var start, end int64
		if first == "" {
			// A suffix: the last n bytes.
			n, err := strconv.ParseInt(last, 10, 64)
			if err != nil || n < 0 {
				return r
			}
			if n == 0 || size == 0 {
				continue // unsatisfiable
			}
			start, end = max(size-n, 0), size-1
		} else {
			s, err := strconv.ParseInt(first, 10, 64)
			if err != nil || s < 0 {
				return r
			}
			e := size - 1
			if last != "" {
				if e, err = strconv.ParseInt(last, 10, 64); err != nil || e < s {
					return r
				}
			}
			if s >= size {
				continue // unsatisfiable
			}
			start, end = s, min(e, size-1)
		}
		ranges = append(ranges, [2]int64{start, end})
	}
	if len(ranges) == 0 {
		return r
	}
	slices.SortFunc(ranges, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	merged := ranges[:1]
	for _, rg := range ranges[1:] {
		if last := &merged[len(merged)-1]; rg[0] <= last[1]+1 {
			last[1] = max(last[1], rg[1])
			continue
		}
		merged = append(merged, rg)
	}
	if len(merged) > maxRanges {
		return withRange(r, "")
	}
	b := []byte("bytes=")
	for i, rg := range merged {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, rg[0], 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, rg[1], 10)
	}
	if string(b) == h {
		return r
	}
	return withRange(r, string(b))
}

// withRange returns a shallow copy of r whose Range header is v (none
// when v is empty).
func withRange(r *http.Request, v string) *http.Request {
	c := *r
	c.Header = r.Header.Clone()
	if v == "" {
		c.Header.Del("Range")
	} else {
		c.Header.Set("Range", v)
	}
	return &c
}
