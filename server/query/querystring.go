package query

import "github.com/prodapi/prodapi/sources/grammar"

// scanQueryString calls check with every field name a Lucene query string
// (query_string, simple_query_string, q) refers to: the field of each
// "field:" clause, unescaped, wildcards and all. When the text uses
// _exists_:name, where the value is a field name, every term and phrase
// in it is checked too (conservatively: we do not parse which terms the
// _exists_ applies to).
//
// It reads the tokens of grammar's lexer, the one the sandbox parses:
// Lucene's classic lexing, where text Lucene would fail to lex is plain
// text. Elasticsearch refuses such a query anyway, and skipping nothing
// we do not understand means no field reference can hide behind a quote
// or slash.
func scanQueryString(s string, check func(field string) error) error {
	toks := grammar.LexQueryString(s)
	var terms []string
	exists := false
	for i, t := range toks {
		var name string
		switch {
		case t.Kind == grammar.Phrase:
			terms = append(terms, t.Text)
			continue
		case t.Kind == grammar.Term, t.Kind == grammar.And, t.Kind == grammar.Or, t.Kind == grammar.Not && t.Text != "!":
			// AND, OR, NOT, && and || are words to a field scan: name
			// them too, conservatively.
			name = grammar.Unescape(t.Text)
		default:
			continue
		}
		terms = append(terms, name)
		if i+1 < len(toks) && toks[i+1].Kind == grammar.Colon {
			if name == "_exists_" {
				exists = true
			} else if err := check(name); err != nil {
				return err
			}
		}
	}
	if exists {
		for _, t := range terms {
			if t == "_exists_" || t == "" {
				continue
			}
			if err := check(t); err != nil {
				return err
			}
		}
	}
	return nil
}
