package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// markdownDoc is a Markdown file's headings, as GitHub anchors them, and
// the links it makes.
type markdownDoc struct {
	lines    []string
	headings []mdHeading
	anchors  map[string]bool
}

type mdHeading struct {
	level  int // 2 for ##
	text   string
	anchor string
}

// readMarkdown reads path's headings outside fenced code, with GitHub's
// anchors: lower case, punctuation but - and _ dropped, spaces as -, and
// -1, -2... after a repeated one.
func readMarkdown(t *testing.T, path string) *markdownDoc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := &markdownDoc{lines: strings.Split(string(b), "\n"), anchors: map[string]bool{}}
	seen := map[string]int{}
	fenced := false
	for _, l := range d.lines {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		level := len(l) - len(strings.TrimLeft(l, "#"))
		if fenced || level == 0 || !strings.HasPrefix(l[level:], " ") {
			continue
		}
		text := strings.TrimSpace(l[level:])
		a := anchorOf(text)
		if n := seen[a]; n > 0 {
			seen[a]++
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		d.anchors[a] = true
		d.headings = append(d.headings, mdHeading{level, text, a})
	}
	return d
}

func anchorOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// The README's table of contents lists its ## and ### headings in order,
// and every link to a heading, of the README or of BENCHMARKS.md, finds
// one: a heading renamed without its links fails here.
func TestReadmeContentsAndLinks(t *testing.T) {
	readme := readMarkdown(t, "../../README.md")
	bench := readMarkdown(t, "../../BENCHMARKS.md")

	var want []string
	for _, h := range readme.headings {
		if (h.level == 2 || h.level == 3) && h.anchor != "contents" {
			want = append(want, strings.Repeat("  ", h.level-2)+"- ["+h.text+"](#"+h.anchor+")")
		}
	}
	var got []string
	in := false
	for _, l := range readme.lines {
		switch {
		case l == "<!-- contents -->":
			in = true
		case l == "<!-- /contents -->":
			in = false
		case in && strings.TrimSpace(l) != "":
			got = append(got, l)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the README's contents, between <!-- contents --> and <!-- /contents -->, should read:\n%s", strings.Join(want, "\n"))
	}

	link := regexp.MustCompile(`\]\((BENCHMARKS\.md)?#([^)]+)\)`)
	for _, doc := range []struct {
		name string
		d    *markdownDoc
	}{{"README.md", readme}, {"BENCHMARKS.md", bench}} {
		for i, l := range doc.d.lines {
			for _, m := range link.FindAllStringSubmatch(l, -1) {
				target := doc.d
				if m[1] != "" {
					target = bench
				}
				if !target.anchors[m[2]] {
					t.Errorf("%s:%d links to %s#%s, which no heading anchors", doc.name, i+1, m[1], m[2])
				}
			}
		}
	}
}
