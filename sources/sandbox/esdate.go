package sandbox

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// Layouts of full datetimes as Superdesk and its clients write them; a
// string in one of them is a date to range, term, sort and aggregations
// (Superdesk maps them as ES date fields).
var storedLayouts = []string{
	"2006-01-02T15:04:05.999999999Z07:00", // 2019-09-10T15:00:00.000Z, +00:00
	"2006-01-02T15:04:05.999999999Z0700",  // 2019-09-10T15:00:00+0000 (DateLayout)
}

// parseStoredDate recognises a full datetime with a zone in a stored
// string. It is cheap on strings that are not dates.
func parseStoredDate(s string) (time.Time, bool) {
	if len(s) < 20 || len(s) > 40 || s[4] != '-' || s[10] != 'T' || s[0] < '0' || s[0] > '9' {
		return time.Time{}, false
	}
	for _, l := range storedLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// A dateParser turns range bounds and term values into instants, as an ES
// date field does: date math, the field's format, a time zone.
type dateParser struct {
	now     time.Time
	loc     *time.Location // for values without a zone and for rounding
	layouts []dateLayout   // from "format"; nil: the default formats
}

type dateLayout struct {
	layout string // Go layout, or "epoch_millis"/"epoch_second"
	// Which fields the layout has, to fill the missing ones when rounding up.
	hasMonth, hasDay, hasTime bool
}

// newDateParser reads an ES format ("yyyy-MM-dd||epoch_millis") and
// time_zone ("+01:00", "UTC", "Europe/Prague").
func newDateParser(now time.Time, format, tz string) (*dateParser, error) {
	p := &dateParser{now: now, loc: time.UTC}
	if tz != "" {
		loc, err := parseTimeZone(tz)
		if err != nil {
			return nil, err
		}
		p.loc = loc
	}
	if format != "" {
		for _, f := range strings.Split(format, "||") {
			l, err := javaLayout(strings.TrimSpace(f))
			if err != nil {
				return nil, err
			}
			p.layouts = append(p.layouts, l...)
		}
	}
	return p, nil
}

func parseTimeZone(tz string) (*time.Location, error) {
	switch tz {
	case "Z", "UTC", "utc", "GMT", "Etc/UTC":
		return time.UTC, nil
	}
	if tz[0] == '+' || tz[0] == '-' {
		digits := strings.ReplaceAll(tz[1:], ":", "")
		if len(digits) == 2 {
			digits += "00"
		}
		if len(digits) == 4 {
			h, err1 := strconv.Atoi(digits[:2])
			m, err2 := strconv.Atoi(digits[2:])
			if err1 == nil && err2 == nil && h <= 18 && m < 60 {
				off := h*3600 + m*60
				if tz[0] == '-' {
					off = -off
				}
				return time.FixedZone(tz, off), nil
			}
		}
		return nil, fmt.Errorf("sandbox: time_zone %q: %w", tz, sources.ErrInvalid)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("sandbox: time_zone %q: %w", tz, sources.ErrInvalid)
	}
	return loc, nil
}

// javaLayout converts the ES (java.time) date formats we support to Go
// layouts.
func javaLayout(f string) ([]dateLayout, error) {
	switch f {
	case "epoch_millis", "epoch_second":
		return []dateLayout{{layout: f}}, nil
	case "strict_date_optional_time", "date_optional_time", "strict_date_optional_time_nanos",
		"date_time", "strict_date_time", "date_time_no_millis", "strict_date_time_no_millis":
		return defaultLayouts, nil
	case "date", "strict_date", "yyyy-MM-dd":
		return []dateLayout{{layout: "2006-01-02", hasMonth: true, hasDay: true}}, nil
	case "basic_date":
		return []dateLayout{{layout: "20060102", hasMonth: true, hasDay: true}}, nil
	}
	var b strings.Builder
	var l dateLayout
	for i := 0; i < len(f); {
		c := f[i]
		n := 1
		for i+n < len(f) && f[i+n] == c {
			n++
		}
		switch {
		case c == '\'':
			j := strings.IndexByte(f[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("sandbox: date format %q: %w", f, sources.ErrInvalid)
			}
			b.WriteString(f[i+1 : i+1+j])
			i += j + 2
			continue
		case (c == 'y' || c == 'u') && n == 4:
			b.WriteString("2006")
		case (c == 'y' || c == 'u') && n == 2:
			b.WriteString("06")
		case c == 'M' && n <= 4:
			b.WriteString([]string{"1", "01", "Jan", "January"}[n-1])
			l.hasMonth = true
		case c == 'd' && n <= 2:
			b.WriteString([]string{"2", "02"}[n-1])
			l.hasDay = true
		case c == 'H' && n <= 2:
			b.WriteString("15")
			l.hasTime = true
		case c == 'h' && n <= 2:
			b.WriteString([]string{"3", "03"}[n-1])
			l.hasTime = true
		case c == 'm' && n <= 2:
			b.WriteString([]string{"4", "04"}[n-1])
		case c == 's' && n <= 2:
			b.WriteString([]string{"5", "05"}[n-1])
		case c == 'S' && n <= 9:
			b.WriteString(strings.Repeat("0", n))
		case c == 'a' && n == 1:
			b.WriteString("PM")
		case c == 'E' && n == 3:
			b.WriteString("Mon")
		case c == 'E' && n == 4:
			b.WriteString("Monday")
		case c == 'Z' && n <= 2:
			b.WriteString([]string{"-0700", "-07:00"}[n-1])
		case c == 'X' && n <= 3:
			b.WriteString([]string{"Z07", "Z0700", "Z07:00"}[n-1])
		case (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
			return nil, fmt.Errorf("sandbox: date format %q: %w", f, sources.ErrInvalid)
		default:
			b.WriteString(f[i : i+n])
		}
		i += n
	}
	l.layout = b.String()
	if l.hasDay && !l.hasMonth {
		l.hasMonth = true
	}
	return []dateLayout{l}, nil
}

// defaultLayouts are strict_date_optional_time's forms, longest first.
var defaultLayouts = []dateLayout{
	{layout: "2006-01-02T15:04:05.999999999Z07:00", hasMonth: true, hasDay: true, hasTime: true},
	{layout: "2006-01-02T15:04:05.999999999Z0700", hasMonth: true, hasDay: true, hasTime: true},
	{layout: "2006-01-02T15:04:05.999999999", hasMonth: true, hasDay: true, hasTime: true},
	{layout: "2006-01-02T15:04Z07:00", hasMonth: true, hasDay: true, hasTime: true},
	{layout: "2006-01-02T15:04", hasMonth: true, hasDay: true, hasTime: true},
	{layout: "2006-01-02T15", hasMonth: true, hasDay: true, hasTime: true},
	{layout: "2006-01-02", hasMonth: true, hasDay: true},
	{layout: "2006-01", hasMonth: true},
	{layout: "2006"},
}

// parse turns a bound into an instant. roundUp is set for gt and lte:
// missing components and /unit rounding then go to the last millisecond
// of the period, as ES does.
func (p *dateParser) parse(v any, roundUp bool) (time.Time, bool, error) {
	switch v := v.(type) {
	case time.Time:
		return v, true, nil
	case int64:
		return p.fromNumber(float64(v)), true, nil
	case float64:
		return p.fromNumber(v), true, nil
	case string:
		return p.parseString(v, roundUp)
	}
	return time.Time{}, false, nil
}

func (p *dateParser) fromNumber(n float64) time.Time {
	if len(p.layouts) > 0 && p.layouts[0].layout == "epoch_second" {
		return time.UnixMilli(int64(n * 1000)).UTC()
	}
	return time.UnixMilli(int64(n)).UTC()
}

// parseString parses date math: "now-1d/d", "2019-01-01||+1M", or a plain
// date. It reports false for a string that is not a date; malformed math
// is an error.
func (p *dateParser) parseString(s string, roundUp bool) (time.Time, bool, error) {
	var t time.Time
	var math string
	switch {
	case strings.HasPrefix(s, "now"):
		t, math = p.now, s[3:]
	default:
		anchor := s
		if i := strings.Index(s, "||"); i >= 0 {
			anchor, math = s[:i], s[i+2:]
		}
		var ok bool
		t, ok = p.parseAnchor(anchor, roundUp && math == "")
		if !ok {
			if math != "" {
				return time.Time{}, false, fmt.Errorf("sandbox: date %q: %w", s, sources.ErrInvalid)
			}
			return time.Time{}, false, nil
		}
	}
	t, err := p.applyMath(t, math, roundUp)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("sandbox: date math %q: %w", s, sources.ErrInvalid)
	}
	return t, true, nil
}

func (p *dateParser) parseAnchor(s string, roundUp bool) (time.Time, bool) {
	layouts := p.layouts
	if layouts == nil {
		layouts = defaultLayouts
	}
	for _, l := range layouts {
		switch l.layout {
		case "epoch_millis", "epoch_second":
			if n, err := strconv.ParseFloat(s, 64); err == nil {
				if l.layout == "epoch_second" {
					n *= 1000
				}
				return time.UnixMilli(int64(n)).UTC(), true
			}
			continue
		}
		t, err := time.ParseInLocation(l.layout, s, p.loc)
		if err != nil {
			continue
		}
		if roundUp {
			t = fillUp(t, l)
		}
		return t, true
	}
	if p.layouts == nil && s != "" && strings.Trim(s, "0123456789") == "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.UnixMilli(n).UTC(), true // epoch_millis, the default's second form
		}
	}
	return time.Time{}, false
}

// fillUp sets the components a layout lacks to their last value.
func fillUp(t time.Time, l dateLayout) time.Time {
	switch {
	case !l.hasMonth:
		return t.AddDate(1, 0, 0).Add(-time.Millisecond)
	case !l.hasDay:
		return t.AddDate(0, 1, 0).Add(-time.Millisecond)
	case !l.hasTime:
		return t.AddDate(0, 0, 1).Add(-time.Millisecond)
	}
	return t
}

func (p *dateParser) applyMath(t time.Time, math string, roundUp bool) (time.Time, error) {
	t = t.In(p.loc)
	for len(math) > 0 {
		op := math[0]
		math = math[1:]
		switch op {
		case '+', '-':
			i := 0
			for i < len(math) && math[i] >= '0' && math[i] <= '9' {
				i++
			}
			n := 1
			if i > 0 {
				var err error
				if n, err = strconv.Atoi(math[:i]); err != nil {
					return t, err
				}
			}
			if i >= len(math) {
				return t, fmt.Errorf("no unit")
			}
			if op == '-' {
				n = -n
			}
			var err error
			if t, err = addUnit(t, n, math[i]); err != nil {
				return t, err
			}
			math = math[i+1:]
		case '/':
			if len(math) == 0 {
				return t, fmt.Errorf("no unit")
			}
			var err error
			if t, err = roundUnit(t, math[0], roundUp); err != nil {
				return t, err
			}
			math = math[1:]
		default:
			return t, fmt.Errorf("unexpected %q", op)
		}
	}
	return t.UTC(), nil
}

func addUnit(t time.Time, n int, unit byte) (time.Time, error) {
	switch unit {
	case 'y':
		return t.AddDate(n, 0, 0), nil
	case 'M':
		return t.AddDate(0, n, 0), nil
	case 'w':
		return t.AddDate(0, 0, 7*n), nil
	case 'd':
		return t.AddDate(0, 0, n), nil
	case 'h', 'H':
		return t.Add(time.Duration(n) * time.Hour), nil
	case 'm':
		return t.Add(time.Duration(n) * time.Minute), nil
	case 's':
		return t.Add(time.Duration(n) * time.Second), nil
	}
	return t, fmt.Errorf("unknown unit %q", unit)
}

func roundUnit(t time.Time, unit byte, up bool) (time.Time, error) {
	y, mo, d := t.Date()
	loc := t.Location()
	var start, next time.Time
	switch unit {
	case 'y':
		start = time.Date(y, 1, 1, 0, 0, 0, 0, loc)
		next = start.AddDate(1, 0, 0)
	case 'M':
		start = time.Date(y, mo, 1, 0, 0, 0, 0, loc)
		next = start.AddDate(0, 1, 0)
	case 'w':
		off := (int(t.Weekday()) + 6) % 7 // weeks start on Monday
		start = time.Date(y, mo, d-off, 0, 0, 0, 0, loc)
		next = start.AddDate(0, 0, 7)
	case 'd':
		start = time.Date(y, mo, d, 0, 0, 0, 0, loc)
		next = start.AddDate(0, 0, 1)
	case 'h', 'H':
		start = time.Date(y, mo, d, t.Hour(), 0, 0, 0, loc)
		next = start.Add(time.Hour)
	case 'm':
		start = time.Date(y, mo, d, t.Hour(), t.Minute(), 0, 0, loc)
		next = start.Add(time.Minute)
	case 's':
		start = time.Date(y, mo, d, t.Hour(), t.Minute(), t.Second(), 0, loc)
		next = start.Add(time.Second)
	default:
		return t, fmt.Errorf("unknown unit %q", unit)
	}
	if up {
		return next.Add(-time.Millisecond), nil
	}
	return start, nil
}
