package grammar

import (
	"strings"
	"testing"
)

// show writes tokens compactly: kind letter and text, ranges with parts.
func show(toks []Token) string {
	letters := map[TokenKind]string{Term: "T", Phrase: "P", Regexp: "R", Range: "G", Colon: ":", And: "&",
		Or: "|", Not: "!", Plus: "+", Minus: "-", Open: "(", Close: ")", Boost: "^", Fuzzy: "~", Stray: "?"}
	var parts []string
	for _, t := range toks {
		s := letters[t.Kind] + t.Text
		switch t.Kind {
		case Colon, Open, Close, Plus, Minus:
			s = letters[t.Kind]
		case Range:
			s = "G" + string(t.Open) + strings.Join(t.Parts, ",")
			if t.Closed != 0 {
				s += string(t.Closed)
			}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func TestLexQueryString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"foo bar", "Tfoo Tbar"},
		{"headline : foo", "Theadline : Tfoo"},
		{`a:1 AND (b.c:(x y) OR -d:z) +e:w !f:v`, "Ta : T1 &AND ( Tb.c : ( Tx Ty ) |OR - Td : Tz ) + Te : Tw !! Tf : Tv"},
		{"a && b || c", "Ta &&& Tb ||| Tc"},
		{"ANDROID AND) NOT(x", "TANDROID &AND ) !NOT ( Tx"},
		{`pass\:word:x`, `Tpass\:word : Tx`},
		{`well-known a+b`, "Twell-known Ta+b"},
		{`"a \" b" x`, `Pa " b Tx`},
		{`"unterminated x:y`, `?" Tunterminated Tx : Ty`},
		{`/a\/ b/ c`, `Ra\/ b Tc`},
		{`/a\/ lock_user:x`, `Ra\ Tlock_user : Tx`},
		{`/x`, `?/ Tx`},
		{`[a TO "x] y "] z`, `G[a,TO,"x] y "] Tz`},
		{`{a TO b] [x TO`, `G{a,TO,b] G[x,TO`},
		{`a^2 b~3 c~ d^1.5`, "Ta ^2 Tb ~3 Tc ~ Td ^1.5"},
		{`a^2lock_user:x`, "Ta ^2 Tlock_user : Tx"},
		{"a\u3000b\u00a0c", "Ta Tb\u00a0c"},
		{`date:>=2024-01-01 n:<5`, "Tdate : T>=2024-01-01 Tn : T<5"},
		{`*:* ?x* a]`, "T* : T* T?x* Ta ?]"},
		{`trailing\`, `Ttrailing\`},
	} {
		if got := show(LexQueryString(tc.in)); got != tc.want {
			t.Errorf("LexQueryString(%q)\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

func TestLexSimpleQueryString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"bridge + mayor", "Tbridge &+ Tmayor"},
		{"favre | closed -x", "Tfavre || Tclosed - Tx"},
		{"well-known qua*", "Twell-known Tqua*"},
		{`"favre retires"~2 (a)`, "Pfavre retires ~2 ( Ta )"},
		{`"unterminated x`, "Punterminated x"},
		{`a~2 b ~3 ^4`, "Ta ~2 Tb ?~3 ?^4"},
		{`a\+b x:y`, `Ta\+b Tx:y`},
		{"a\u00a0b", "Ta Tb"},
	} {
		if got := show(LexSimpleQueryString(tc.in)); got != tc.want {
			t.Errorf("LexSimpleQueryString(%q)\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{`a\:b`: "a:b", `\\`: `\`, `x\`: "x", `\é`: "é", "plain": "plain"} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzLex(f *testing.F) {
	for _, s := range []string{`a:"b" /c/ [d TO e}`, `\`, `"`, "(a OR b)^2~", "\u3000x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range LexQueryString(s) {
			if tok.Kind < Term || tok.Kind > Stray {
				t.Fatalf("bad kind %d", tok.Kind)
			}
		}
		LexSimpleQueryString(s)
	})
}
