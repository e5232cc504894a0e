package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/prodapi/prodapi/sources"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// A ferretDBDifference is a way FerretDB answers unlike MongoDB. Each is
// proved against the running FerretDB by prove, which fails when FerretDB
// answers as MongoDB does: the list cannot outlive the difference.
type ferretDBDifference struct {
	name string
	// what the README says, one sentence.
	what string
	// contract names the cases of sourcestest the difference breaks,
	// "group/name"; they are skipped against FerretDB, and only they.
	contract []string
	// prove checks that FerretDB still differs, in a collection of its
	// own holding docs.
	prove func(t *testing.T, c *mongodriver.Collection)
	docs  []bson.D
	// sample, when not nil, is how a sample document reads back.
	sample func(*sources.Doc) *sources.Doc
	// noGeoIndexes: the contract's geospatial indexes cannot be created.
	noGeoIndexes bool
}

// ferretDBDifferences are the differences measured for each FerretDB
// version (buildInfo.ferretdbVersion). A version not listed fails the
// tests: measure it (run TestFerretDBDifferences, then the contract) and
// add its list.
var ferretDBDifferences = map[string][]ferretDBDifference{
	"v1.24.2": {
		{
			name: "$elemMatch with a field condition matches nothing",
			what: "`$elemMatch` over sub-documents (`{\"members\": {\"$elemMatch\": {\"user\": ...}}}`, and the same inside `$all`) " +
				"silently matches no document; `$elemMatch` with operators over scalars (`{\"$gt\": 5}`) works",
			contract: []string{"FindDocuments/$elemMatch"},
			docs: []bson.D{
				{{Key: "_id", Value: 1}, {Key: "members", Value: bson.A{bson.D{{Key: "user", Value: "a"}, {Key: "n", Value: 1}}}}, {Key: "scores", Value: bson.A{1, 8}}},
			},
			prove: func(t *testing.T, c *mongodriver.Collection) {
				// MongoDB: [1] for each; the scalar form works on FerretDB too.
				expectIDs(t, c, bson.D{{Key: "members", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "user", Value: "a"}}}}}}, nil)
				expectIDs(t, c, bson.D{{Key: "members", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 1}}}}}}}}, nil)
				expectIDs(t, c, bson.D{{Key: "scores", Value: bson.D{{Key: "$elemMatch", Value: bson.D{{Key: "$gt", Value: 5}}}}}}, []int32{1})
			},
		},
		{
			name: "no geospatial operators",
			what: "`$geoWithin`, `$geoIntersects`, `$near` and `$nearSphere` are unknown operators: such a query gets a 400 " +
				"(\"refused by the backend\") instead of results",
			contract: []string{
				"FindDocuments/$geoWithin $box", "FindDocuments/$geoWithin $centerSphere", "FindDocuments/$geoWithin $center",
				"FindDocuments/$geoWithin $polygon", "FindDocuments/$geoWithin $geometry", "FindDocuments/$geoIntersects",
				"FindDocuments/$near $maxDistance", "FindDocuments/$near $minDistance", "FindDocuments/$nearSphere $maxDistance",
				"FindDocuments/$near $geometry", "FindDocuments/$nearSphere $geometry $minDistance",
			},
			docs: []bson.D{{{Key: "_id", Value: 1}, {Key: "geo", Value: bson.A{14.4, 50.1}}}},
			prove: func(t *testing.T, c *mongodriver.Collection) {
				for _, cond := range []bson.D{
					{{Key: "$geoWithin", Value: bson.D{{Key: "$box", Value: bson.A{bson.A{14, 50}, bson.A{15, 51}}}}}},
					{{Key: "$geoWithin", Value: bson.D{{Key: "$centerSphere", Value: bson.A{bson.A{14.4, 50.1}, 0.01}}}}},
					{{Key: "$geoIntersects", Value: bson.D{{Key: "$geometry", Value: bson.D{{Key: "type", Value: "Point"}, {Key: "coordinates", Value: bson.A{14.4, 50.1}}}}}}},
					{{Key: "$near", Value: bson.A{14.4, 50.1}}, {Key: "$maxDistance", Value: 1}},
					{{Key: "$nearSphere", Value: bson.A{14.4, 50.1}}, {Key: "$maxDistance", Value: 0.1}},
				} {
					expectCode(t, c, bson.D{{Key: "geo", Value: cond}}, "BadValue", "unknown operator: "+cond[0].Key)
				}
			},
		},
		{
			name: "no geospatial indexes",
			what: "`2d` and `2dsphere` indexes cannot be created (the server answers IndexNotFound)",
			docs: []bson.D{{{Key: "_id", Value: 1}, {Key: "geo", Value: bson.A{14.4, 50.1}}}},
			prove: func(t *testing.T, c *mongodriver.Collection) {
				for _, kind := range []string{"2d", "2dsphere"} {
					_, err := c.Indexes().CreateOne(t.Context(), mongodriver.IndexModel{Keys: bson.D{{Key: "geo", Value: kind}}})
					if code := serverCode(err); code != "IndexNotFound" {
						t.Errorf("creating a %s index: %v (%q), want IndexNotFound (MongoDB creates it)", kind, err, code)
					}
				}
			},
			noGeoIndexes: true,
		},
		{
			name: "a nested _id moves to the front",
			what: "in a sub-document, `_id` is stored first whatever its place (`events_history.update` of the sample " +
				"comes back with `_id` first); top-level field order is kept",
			docs:   []bson.D{{{Key: "_id", Value: 1}, {Key: "update", Value: bson.D{{Key: "a", Value: 1}, {Key: "_id", Value: 2}}}}},
			sample: nestedIDFirst,
			prove: func(t *testing.T, c *mongodriver.Collection) {
				var got struct {
					Update bson.D `bson:"update"`
				}
				if err := c.FindOne(t.Context(), bson.D{}).Decode(&got); err != nil {
					t.Fatal(err)
				}
				if keys := docKeys(got.Update); !slices.Equal(keys, []string{"_id", "a"}) {
					t.Errorf("update keys = %v, want [_id a] (MongoDB keeps [a _id])", keys)
				}
			},
		},
		{
			name: "a sort through an array of sub-documents ignores the array",
			what: "sorting on a path through an array (`arr.user`) treats the field as missing, where MongoDB sorts by " +
				"the smallest (ascending) or largest (descending) element",
			contract: []string{"Walk/a path through an array"},
			docs: []bson.D{
				{{Key: "_id", Value: 1}, {Key: "arr", Value: bson.A{bson.D{{Key: "user", Value: "a"}}}}},
				{{Key: "_id", Value: 2}, {Key: "arr", Value: bson.A{bson.D{{Key: "user", Value: "b"}}}}},
			},
			prove: func(t *testing.T, c *mongodriver.Collection) {
				// MongoDB: [2 1]; FerretDB leaves both "missing" and falls back on _id.
				expectIDs(t, c, bson.D{}, []int32{1, 2}, options.Find().SetSort(bson.D{{Key: "arr.user", Value: -1}, {Key: "_id", Value: 1}}))
			},
		},
		{
			name: "documents with nested arrays cannot be stored",
			what: "an array directly inside an array (GeoJSON polygon coordinates, say) is refused on insert",
			prove: func(t *testing.T, c *mongodriver.Collection) {
				_, err := c.InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}, {Key: "coordinates", Value: bson.A{bson.A{1, 2}}}})
				if err == nil || !strings.Contains(err.Error(), "nested arrays are not supported") {
					t.Errorf("inserting a nested array: %v, want a refusal (MongoDB stores it)", err)
				}
			},
		},
		{
			name: "no Decimal128",
			what: "a Decimal128 value drops the connection instead of being stored",
			prove: func(t *testing.T, c *mongodriver.Collection) {
				d, err := bson.ParseDecimal128("1.5")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}, {Key: "d", Value: d}}); err == nil {
					t.Error("inserting a Decimal128 worked (MongoDB stores it; FerretDB v1 did not)")
				}
			},
		},
		{
			name: "no '.' or leading '$' in field names",
			what: "field names containing `.` or starting with `$` are refused on insert (MongoDB 5+ stores them)",
			prove: func(t *testing.T, c *mongodriver.Collection) {
				for i, key := range []string{"a.b", "$x"} {
					if _, err := c.InsertOne(t.Context(), bson.D{{Key: "_id", Value: i}, {Key: key, Value: 1}}); err == nil {
						t.Errorf("inserting field %q worked", key)
					}
				}
			},
		},
		{
			name: "no collation",
			what: "`find` with a collation is not implemented",
			docs: []bson.D{{{Key: "_id", Value: 1}}},
			prove: func(t *testing.T, c *mongodriver.Collection) {
				expectCode(t, c, bson.D{}, "NotImplemented", "collation",
					options.Find().SetCollation(&options.Collation{Locale: "en", Strength: 1}))
			},
		},
		{
			name: "no $lookup and other aggregation stages",
			what: "the aggregation stages `$lookup`, `$facet`, `$bucket`, `$sortByCount` and `$replaceRoot` are not " +
				"implemented (prodapi uses `$match`, `$group` and `$count`, which are); nor are `$slice` projections or " +
				"`$expr` operators such as `$gt`",
			docs: []bson.D{{{Key: "_id", Value: 1}, {Key: "n", Value: 5}}},
			prove: func(t *testing.T, c *mongodriver.Collection) {
				for _, stage := range []bson.D{
					{{Key: "$lookup", Value: bson.D{{Key: "from", Value: c.Name()}, {Key: "localField", Value: "_id"}, {Key: "foreignField", Value: "_id"}, {Key: "as", Value: "x"}}}},
					{{Key: "$facet", Value: bson.D{{Key: "a", Value: bson.A{bson.D{{Key: "$count", Value: "n"}}}}}}},
					{{Key: "$bucket", Value: bson.D{{Key: "groupBy", Value: "$n"}, {Key: "boundaries", Value: bson.A{0, 10}}}}},
					{{Key: "$sortByCount", Value: "$n"}},
					{{Key: "$replaceRoot", Value: bson.D{{Key: "newRoot", Value: bson.D{}}}}},
				} {
					_, err := c.Aggregate(t.Context(), bson.A{stage})
					if code := serverCode(err); code != "NotImplemented" {
						t.Errorf("aggregate %s: %v (%q), want NotImplemented", stage[0].Key, err, code)
					}
				}
				expectCode(t, c, bson.D{}, "NotImplemented", "$slice", options.Find().SetProjection(bson.D{{Key: "n", Value: bson.D{{Key: "$slice", Value: 1}}}}))
				expectCode(t, c, bson.D{{Key: "$expr", Value: bson.D{{Key: "$gt", Value: bson.A{"$n", 4}}}}}, "NotImplemented", "$gt")
			},
		},
		{
			name: "no change streams",
			what: "`watch` (the `$changeStream` stage) is not implemented",
			prove: func(t *testing.T, c *mongodriver.Collection) {
				cs, err := c.Watch(t.Context(), bson.A{})
				if err == nil {
					cs.Close(t.Context())
				}
				if code := serverCode(err); code != "NotImplemented" {
					t.Errorf("watch: %v (%q), want NotImplemented", err, code)
				}
			},
		},
		{
			name: "no transactions",
			what: "a command inside a transaction is refused (`startTransaction` is an unknown field)",
			prove: func(t *testing.T, c *mongodriver.Collection) {
				sess, err := c.Database().Client().StartSession()
				if err != nil {
					t.Fatal(err)
				}
				defer sess.EndSession(context.WithoutCancel(t.Context()))
				_, err = sess.WithTransaction(t.Context(), func(ctx context.Context) (any, error) {
					return c.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
				})
				if code := serverCode(err); code != "FailedToParse" {
					t.Errorf("a transaction: %v (%q), want FailedToParse", err, code)
				}
			},
		},
	},
}

// differencesOf returns the differences measured for version, failing t
// when there are none: an unmeasured version must be measured.
func differencesOf(t *testing.T, version string) []ferretDBDifference {
	t.Helper()
	diffs, ok := ferretDBDifferences[version]
	if !ok {
		t.Fatalf("FerretDB %s: its differences from MongoDB were measured for %v only; "+
			"run TestFerretDBDifferences and TestFerretDBContract against it and list them in ferretDBDifferences",
			version, slices.Sorted(maps.Keys(ferretDBDifferences)))
	}
	return diffs
}

// contractSkips returns the contract cases the differences of version
// break, with the difference as the reason.
func contractSkips(t *testing.T, version string) map[string]string {
	t.Helper()
	skip := map[string]string{}
	for _, d := range differencesOf(t, version) {
		for _, name := range d.contract {
			skip[name] = fmt.Sprintf("FerretDB %s: %s", version, d.name)
		}
	}
	return skip
}

// geoIndexes says whether the contract's geospatial indexes can be
// created on FerretDB version.
func geoIndexes(t *testing.T, version string) bool {
	t.Helper()
	return !slices.ContainsFunc(differencesOf(t, version), func(d ferretDBDifference) bool { return d.noGeoIndexes })
}

// sampleExpect returns how a sample document reads back from FerretDB
// version: changed by each difference that changes it.
func sampleExpect(t *testing.T, version string) func(*sources.Doc) *sources.Doc {
	t.Helper()
	diffs := differencesOf(t, version)
	return func(d *sources.Doc) *sources.Doc {
		for _, diff := range diffs {
			if diff.sample != nil {
				d = diff.sample(d)
			}
		}
		return d
	}
}

// TestFerretDBDifferences proves each listed difference against the
// running FerretDB, each in a collection of its own.
func TestFerretDBDifferences(t *testing.T) {
	client, version := ferretDB(t)
	db := scratchDatabase(t, client, "prodapi_differences")
	for i, d := range differencesOf(t, version) {
		t.Run(d.name, func(t *testing.T) {
			c := db.Collection(fmt.Sprintf("d%d", i))
			for _, doc := range d.docs {
				if _, err := c.InsertOne(t.Context(), doc); err != nil {
					t.Fatal(err)
				}
			}
			d.prove(t, c)
		})
	}
}

// expectIDs checks that find(filter) returns the documents with the int
// ids want, in order.
func expectIDs(t *testing.T, c *mongodriver.Collection, filter bson.D, want []int32, opts ...options.Lister[options.FindOptions]) {
	t.Helper()
	cur, err := c.Find(t.Context(), filter, opts...)
	if err != nil {
		t.Fatalf("find %v: %v", filter, err)
	}
	var docs []struct {
		ID int32 `bson:"_id"`
	}
	if err := cur.All(t.Context(), &docs); err != nil {
		t.Fatal(err)
	}
	got := []int32{}
	for _, d := range docs {
		got = append(got, d.ID)
	}
	if !slices.Equal(got, append([]int32{}, want...)) {
		t.Errorf("find %v: ids %v, want %v", filter, got, want)
	}
}

// expectCode checks that find(filter) fails with the server error
// codeName, its message containing msg.
func expectCode(t *testing.T, c *mongodriver.Collection, filter bson.D, codeName, msg string, opts ...options.Lister[options.FindOptions]) {
	t.Helper()
	cur, err := c.Find(t.Context(), filter, opts...)
	if err == nil {
		cur.Close(t.Context())
	}
	if code := serverCode(err); code != codeName || !strings.Contains(err.Error(), msg) {
		t.Errorf("find %v: %v (%q), want %s mentioning %q", filter, err, code, codeName, msg)
	}
}

// serverCode is the code name of a server's command error, "" for any
// other outcome.
func serverCode(err error) string {
	if ce, ok := errors.AsType[mongodriver.CommandError](err); ok {
		return ce.Name
	}
	return ""
}

func docKeys(d bson.D) []string {
	keys := make([]string, len(d))
	for i, e := range d {
		keys[i] = e.Key
	}
	return keys
}

// nestedIDFirst returns d with _id moved to the front of every
// sub-document, as FerretDB stores them; top-level fields keep their order.
func nestedIDFirst(d *sources.Doc) *sources.Doc {
	out := sources.NewDoc()
	for k, v := range d.All() {
		out.Set(k, idFirstValue(v))
	}
	return out
}

func idFirstValue(v any) any {
	switch v := v.(type) {
	case *sources.Doc:
		out := sources.NewDoc()
		if id, ok := v.Get("_id"); ok {
			out.Set("_id", idFirstValue(id))
		}
		for k, e := range v.All() {
			if k != "_id" {
				out.Set(k, idFirstValue(e))
			}
		}
		return out
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = idFirstValue(e)
		}
		return a
	}
	return v
}
