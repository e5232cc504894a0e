package query

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestScanQueryString(t *testing.T) {
	for _, tc := range []struct {
		text string
		refs []string
	}{
		{"foo bar", nil},
		{"headline:foo", []string{"headline"}},
		{"headline : foo", []string{"headline"}},
		{"a:1 AND (b.c:(x y) OR -d:z) +e:w !f:v", []string{"a", "b.c", "d", "e", "f"}},
		{`pass\:word:x`, []string{"pass:word"}},
		{`lock\_user:x`, []string{"lock_user"}},
		{`lock_user\:x`, nil},
		{`\password:x`, []string{"password"}},
		{`book.\*:(a b)`, []string{"book.*"}},
		{`*:x`, []string{"*"}},
		{`"lock_user:x"`, nil},
		{`"a \" lock_user:x"`, nil},
		{`"unterminated lock_user:x`, []string{"lock_user"}},
		{`/lock_user:x/`, nil},
		{`/a\/ lock_user:x/`, nil},
		{`/a\/ lock_user:x`, []string{"lock_user"}}, // regex is /a\/, then a field
		{`/"/ lock_user:x "a"`, []string{"lock_user"}},
		{`[/ TO x] lock_user:y //`, []string{"lock_user"}},
		{`[a TO "x] lock_user:y "]`, nil},
		{`{a TO b} lock_user:y`, []string{"lock_user"}},
		{`a^2 b~3 lock_user:x`, []string{"lock_user"}},
		{`a^2lock_user:x`, []string{"lock_user"}}, // Lucene reads the boost's number, then a term
		{`a~2lock_user:x`, []string{"lock_user"}},
		{`AND:x ||:y`, []string{"AND", "||"}},
		{"a\u3000lock_user:x", []string{"lock_user"}},
		{"_exists_:headline", []string{"headline"}},
		{"_exists_:lock_user", []string{"lock_user"}},
		{`_exists_:"lock_user" x`, []string{"lock_user", "x"}},
		{`x _exists_:(a OR b)`, []string{"x", "a", "OR", "b"}},
		{`trailing\`, nil},
	} {
		t.Run(tc.text, func(t *testing.T) {
			var got []string
			err := scanQueryString(tc.text, func(f string) error {
				got = append(got, f)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, tc.refs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("refs (-got +want):\n%s", diff)
			}
		})
	}
}
