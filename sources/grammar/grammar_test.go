package grammar

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every layer may import grammar only while it imports nothing of ours.
func TestImportsNothingOfTheModule(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if strings.Contains(imp.Path.Value, "github.com/prodapi/prodapi") {
				t.Errorf("%s imports %s", name, imp.Path.Value)
			}
		}
	}
}

func TestMongoTable(t *testing.T) {
	seen := map[string]bool{}
	for _, op := range MongoOps() {
		if seen[op.Name] || !strings.HasPrefix(op.Name, "$") {
			t.Errorf("%q: a duplicate or not an operator", op.Name)
		}
		seen[op.Name] = true
		if BannedMongoOp(op.Name) {
			t.Errorf("%s is both accepted and banned", op.Name)
		}
		if op.Place == 0 || op.Arg == 0 {
			t.Errorf("%s has no place or no argument kind", op.Name)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(op.Example), &v); err != nil {
			t.Errorf("%s: example %s: %v", op.Name, op.Example, err)
		}
		if !strings.Contains(op.Example, `"`+op.Name+`"`) {
			t.Errorf("%s: example %s does not use it", op.Name, op.Example)
		}
		wantIn := op.Place == Inside || op.Arg == Distance
		if wantIn != (len(op.In) > 0) {
			t.Errorf("%s: In = %v", op.Name, op.In)
		}
	}
	for _, op := range MongoOps() {
		for _, in := range op.In {
			o, ok := MongoOp(in)
			switch {
			case !ok || o.Place != Field:
				t.Errorf("%s is inside %s, not a field operator", op.Name, in)
			case op.Arg == Distance && o.Arg != Point:
				t.Errorf("%s modifies %s, which takes no point", op.Name, in)
			case op.Place == Inside && o.Arg != Shape && o.Arg != Point:
				t.Errorf("%s is inside %s, which takes no shape or point", op.Name, in)
			}
		}
	}
	ops := MongoOps()
	ops[0].Name = "changed"
	if o, _ := MongoOp("$eq"); o.Name != "$eq" || MongoOps()[0].Name != "$eq" {
		t.Error("MongoOps' result is shared with the table")
	}
}

func TestTypes(t *testing.T) {
	for _, bt := range BSONTypes() {
		codes, ok := TypeCodes(bt.Alias)
		if !ok || len(codes) == 0 {
			t.Errorf("%s: no codes", bt.Alias)
		}
		for _, c := range codes {
			if !TypeCode(int64(c)) {
				t.Errorf("%s stands for %d, which TypeCode refuses", bt.Alias, c)
			}
		}
	}
	if _, ok := TypeCodes("integer"); ok {
		t.Error(`"integer" is an alias`)
	}
	for _, n := range []int64{0, 20, 126, 128, -2} {
		if TypeCode(n) {
			t.Errorf("TypeCode(%d)", n)
		}
	}
}

func TestElasticTables(t *testing.T) {
	seen := map[string]bool{}
	for _, qt := range QueryTypes() {
		if seen[qt.Name] {
			t.Errorf("%s twice", qt.Name)
		}
		seen[qt.Name] = true
		var v map[string]any
		if err := json.Unmarshal([]byte(qt.Example), &v); err != nil || len(v) != 1 || v[qt.Name] == nil {
			t.Errorf("%s: example %s is not one query of its type (%v)", qt.Name, qt.Example, err)
		}
		if got, ok := QueryTypeByName(qt.Name); !ok || got.Name != qt.Name {
			t.Errorf("QueryTypeByName(%s) = %v, %v", qt.Name, got, ok)
		}
	}
	for _, at := range AggTypes() {
		var v map[string]map[string]any
		if err := json.Unmarshal([]byte(at.Example), &v); err != nil {
			t.Errorf("%s: %v", at.Name, err)
		}
		for _, a := range v {
			if a[at.Name] == nil {
				t.Errorf("%s: example %s does not use it", at.Name, at.Example)
			}
		}
	}
}
