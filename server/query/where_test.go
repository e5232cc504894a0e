package query

import (
	"strings"
	"testing"
)

func TestWhereDocumentLists(t *testing.T) {
	for _, tc := range []struct {
		name, res, where string
		want             string // the validated Where, also its canonical Param
	}{
		{"upstream desks", "desks", `{"name":"PROD"}`, `{"name":"PROD"}`},
		{"keys sorted", "desks", `{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{"empty", "desks", `{}`, ``},
		{"no id or date conversion", "desks", `{"_id":"5d76113ab3af37dea3a2eb9e","_updated":"2019-08-14T15:02:48+0000"}`,
			`{"_id":"5d76113ab3af37dea3a2eb9e","_updated":"2019-08-14T15:02:48+0000"}`},
		{"operators sorted, values kept in order", "desks", `{"a":{"$lt":5,"$gt":{"y":1,"x":2}}}`, `{"a":{"$gt":{"y":1,"x":2},"$lt":5}}`},
		{"sub-document equality keeps its order", "desks", `{"a":{"z":1,"b":[{"d":1,"c":2}]}}`, `{"a":{"z":1,"b":[{"d":1,"c":2}]}}`},
		{"logical", "users", `{"$or":[{"b":1},{"$and":[{"c":{"$exists":true}},{"a":null}]}],"$nor":[{"x":1}]}`,
			`{"$nor":[{"x":1}],"$or":[{"b":1},{"$and":[{"c":{"$exists":true}},{"a":null}]}]}`},
		{"comparison", "users", `{"n":{"$eq":1,"$ne":2,"$gt":0,"$gte":0,"$lt":9,"$lte":9.5}}`,
			`{"n":{"$eq":1,"$gt":0,"$gte":0,"$lt":9,"$lte":9.5,"$ne":2}}`},
		{"sets", "users", `{"n":{"$in":[1,"a",null],"$nin":[],"$all":[[1],{"a":1}]}}`, `{"n":{"$all":[[1],{"a":1}],"$in":[1,"a",null],"$nin":[]}}`},
		{"element", "users", `{"n":{"$exists":1,"$type":["string",2,-1,127]},"m":{"$type":"number"},"s":{"$size":0}}`,
			`{"m":{"$type":"number"},"n":{"$exists":1,"$type":["string",2,-1,127]},"s":{"$size":0}}`},
		{"mod and not", "users", `{"n":{"$mod":[4,0.5],"$not":{"$gt":3,"$in":[1]}}}`, `{"n":{"$mod":[4,0.5],"$not":{"$gt":3,"$in":[1]}}}`},
		{"elemMatch operators", "users", `{"n":{"$elemMatch":{"$lt":5,"$gt":1}}}`, `{"n":{"$elemMatch":{"$gt":1,"$lt":5}}}`},
		{"elemMatch filter", "users", `{"n":{"$elemMatch":{"b":1,"$or":[{"a":{"$gt":1}}]}}}`, `{"n":{"$elemMatch":{"$or":[{"a":{"$gt":1}}],"b":1}}}`},
		{"bits", "users", `{"n":{"$bitsAllClear":5,"$bitsAllSet":[0,3],"$bitsAnyClear":0,"$bitsAnySet":[]}}`,
			`{"n":{"$bitsAllClear":5,"$bitsAllSet":[0,3],"$bitsAnyClear":0,"$bitsAnySet":[]}}`},
		{"geoWithin box", "events_files", `{"loc":{"$geoWithin":{"$box":[[0,0],[1,1.5]]}}}`, `{"loc":{"$geoWithin":{"$box":[[0,0],[1,1.5]]}}}`},
		{"geoWithin center", "events_files", `{"loc":{"$geoWithin":{"$centerSphere":[[0,0],0.1]}}}`, `{"loc":{"$geoWithin":{"$centerSphere":[[0,0],0.1]}}}`},
		{"geoWithin polygon", "events_files", `{"loc":{"$geoWithin":{"$polygon":[[0,0],[1,1],[0,1]]}}}`, `{"loc":{"$geoWithin":{"$polygon":[[0,0],[1,1],[0,1]]}}}`},
		{"geoWithin geometry", "events_files", `{"loc":{"$geoWithin":{"$geometry":{"type":"Polygon","coordinates":[[[0,0],[1,1],[0,1],[0,0]]],"crs":{"type":"name"}}}}}`,
			`{"loc":{"$geoWithin":{"$geometry":{"type":"Polygon","coordinates":[[[0,0],[1,1],[0,1],[0,0]]],"crs":{"type":"name"}}}}}`},
		{"geoIntersects", "events_files", `{"loc":{"$geoIntersects":{"$geometry":{"type":"Point","coordinates":[1,2]}}}}`,
			`{"loc":{"$geoIntersects":{"$geometry":{"type":"Point","coordinates":[1,2]}}}}`},
		{"near legacy", "events_files", `{"loc":{"$near":[1,2],"$maxDistance":10}}`, `{"loc":{"$maxDistance":10,"$near":[1,2]}}`},
		{"nearSphere geometry", "events_files", `{"loc":{"$nearSphere":{"$geometry":{"type":"Point","coordinates":[1,2]},"$minDistance":1}}}`,
			`{"loc":{"$nearSphere":{"$geometry":{"type":"Point","coordinates":[1,2]},"$minDistance":1}}}`},
		{"dotted paths", "desks", `{"members.user":"u1"}`, `{"members.user":"u1"}`},
		{"queryable timestamp", "users", `{"_updated":{"$gte":"2019-01-01T00:00:00+0000"}}`, `{"_updated":{"$gte":"2019-01-01T00:00:00+0000"}}`},
		{"32 levels", "desks", strings.Repeat(`{"a":`, 32) + `1` + strings.Repeat(`}`, 32),
			strings.Repeat(`{"a":`, 32) + `1` + strings.Repeat(`}`, 32)},
		{"events_history update payload field", "events_history", `{"update.name":"x"}`, `{"update.name":"x"}`},
		{"unicode", "desks", `{"name":"Spor\u00e7 \ud83d\ude00"}`, `{"name":"Sporç 😀"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Parse(resource(t, tc.res), "", qs("where", tc.where))
			if err != nil {
				t.Fatal(err)
			}
			var params []sourcesParam
			if tc.want != "" {
				params = []sourcesParam{p("where", tc.want)}
			}
			check(t, q, want{where: tc.want, sort: resource(t, tc.res).DefaultSort, params: params})
		})
	}
}

func TestWhereRefused(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 33) + `1` + strings.Repeat(`}`, 33)
	for _, tc := range []struct {
		name, res, where string
		want             refusal
	}{
		{"bad JSON", "desks", `{"name":`, refusal{400, "where: invalid JSON"}},
		{"neither JSON nor Python", "desks", `name=Arts`, refusal{400, "(Python syntax)"}},
		{"not an object", "desks", `[]`, refusal{400, "where: must be a JSON object"}},
		{"number", "desks", `1`, refusal{400, "where: must be a JSON object"}},
		{"null", "desks", `null`, refusal{400, "where: must be a JSON object"}},
		{"trailing data", "desks", `{} {}`, refusal{400, "unexpected data after"}},
		{"duplicate keys", "desks", `{"name":"a","name":"b"}`, refusal{400, `duplicate key "name"`}},
		{"NaN token", "desks", `{"a":NaN}`, refusal{400, "invalid JSON"}},
		{"huge number", "desks", `{"a":1e999}`, refusal{400, "number out of range"}},
		{"too deep", "desks", deep, refusal{400, "nested more than 32 levels deep"}},
		{"$where", "users", `{"$where":"this.password.length > 0"}`, refusal{400, `where: operator "$where" is not allowed`}},
		{"$where nested", "users", `{"$or":[{"$where":"1"}]}`, refusal{400, `operator "$where" is not allowed`}},
		{"$regex", "desks", `{"name":{"$regex":"^A"}}`, refusal{400, `operator "$regex" is not allowed`}},
		{"$options", "desks", `{"name":{"$options":"i"}}`, refusal{400, `operator "$options" is not allowed`}},
		{"$expr", "desks", `{"$expr":{"$gt":["$a","$b"]}}`, refusal{400, `operator "$expr" is not allowed`}},
		{"$function", "desks", `{"a":{"$function":{}}}`, refusal{400, `operator "$function" is not allowed`}},
		{"$accumulator", "desks", `{"a":{"$eq":{"$accumulator":1}}}`, refusal{400, `operator "$accumulator" is not allowed`}},
		{"$text", "desks", `{"$text":{"$search":"x"}}`, refusal{400, `operator "$text" is not allowed`}},
		{"$search", "desks", `{"a":{"$search":"x"}}`, refusal{400, `operator "$search" is not allowed`}},
		{"$language", "desks", `{"a":{"$language":"x"}}`, refusal{400, `"$language" is not allowed`}},
		{"$caseSensitive", "desks", `{"a":{"$caseSensitive":true}}`, refusal{400, `"$caseSensitive" is not allowed`}},
		{"$diacriticSensitive", "desks", `{"a":{"$diacriticSensitive":true}}`, refusal{400, `"$diacriticSensitive" is not allowed`}},
		{"unknown operator", "desks", `{"a":{"$foo":1}}`, refusal{400, `where: unknown operator "$foo"`}},
		{"unknown top operator", "desks", `{"$comment":"x"}`, refusal{400, `where: unknown operator "$comment"`}},
		{"$lookup", "desks", `{"$lookup":{}}`, refusal{400, `unknown operator "$lookup"`}},
		{"$jsonSchema", "desks", `{"$jsonSchema":{}}`, refusal{400, `unknown operator "$jsonSchema"`}},
		{"field op at top", "desks", `{"$gt":1}`, refusal{400, `operator "$gt" cannot be used at the top of a filter`}},
		{"logical op on a field", "desks", `{"a":{"$and":[{"b":1}]}}`, refusal{400, `operator "$and" cannot be used on a field`}},
		{"operator inside a value", "desks", `{"a":{"b":{"$gt":1}}}`, refusal{400, `operator "$gt" cannot be used inside a value`}},
		{"operator inside an array value", "desks", `{"a":{"$in":[{"$gt":1}]}}`, refusal{400, `operator "$gt" cannot be used inside a value`}},
		{"mixed", "desks", `{"a":{"$gt":1,"b":2}}`, refusal{400, `mixes operators and fields`}},
		{"inner op outside", "desks", `{"a":{"$box":[]}}`, refusal{400, `operator "$box" can only be used inside $geoWithin`}},
		{"$and not an array", "desks", `{"$and":{}}`, refusal{400, `"$and" needs a non-empty array of filters`}},
		{"$or empty", "desks", `{"$or":[]}`, refusal{400, `"$or" needs a non-empty array`}},
		{"$or of non-objects", "desks", `{"$or":[1]}`, refusal{400, `"$or" needs an array of objects`}},
		{"$in not an array", "desks", `{"a":{"$in":1}}`, refusal{400, `"$in" on "a" needs an array`}},
		{"$exists string", "desks", `{"a":{"$exists":"yes"}}`, refusal{400, `"$exists" on "a" needs true or false`}},
		{"$type unknown", "desks", `{"a":{"$type":"password"}}`, refusal{400, `"$type" on "a" needs`}},
		{"$type code", "desks", `{"a":{"$type":42}}`, refusal{400, `"$type" on "a" needs`}},
		{"$type empty", "desks", `{"a":{"$type":[]}}`, refusal{400, `"$type"`}},
		{"$size negative", "desks", `{"a":{"$size":-1}}`, refusal{400, `"$size" on "a" needs a non-negative integer`}},
		{"$size float", "desks", `{"a":{"$size":1.5}}`, refusal{400, `"$size"`}},
		{"$mod zero", "desks", `{"a":{"$mod":[0,1]}}`, refusal{400, `"$mod"`}},
		{"$mod shape", "desks", `{"a":{"$mod":[1]}}`, refusal{400, `"$mod"`}},
		{"$not value", "desks", `{"a":{"$not":1}}`, refusal{400, `"$not" on "a" needs an operator object`}},
		{"$not regex-like", "desks", `{"a":{"$not":{"b":1}}}`, refusal{400, `"$not" on "a" needs an operator object`}},
		{"$not unknown", "desks", `{"a":{"$not":{"$where":"1"}}}`, refusal{400, `"$where" is not allowed`}},
		{"$elemMatch empty", "desks", `{"a":{"$elemMatch":{}}}`, refusal{400, `"$elemMatch" on "a" needs a non-empty object`}},
		{"$elemMatch $where", "desks", `{"a":{"$elemMatch":{"$where":"1"}}}`, refusal{400, `"$where" is not allowed`}},
		{"bits negative", "desks", `{"a":{"$bitsAllSet":[-1]}}`, refusal{400, `"$bitsAllSet"`}},
		{"geoWithin unknown", "desks", `{"a":{"$geoWithin":{"$foo":1}}}`, refusal{400, `unknown operator "$foo"`}},
		{"geoWithin two shapes", "desks", `{"a":{"$geoWithin":{"$box":[[0,0],[1,1]],"$center":[[0,0],1]}}}`, refusal{400, `"$geoWithin"`}},
		{"box shape", "desks", `{"a":{"$geoWithin":{"$box":[[0,0]]}}}`, refusal{400, `"$box"`}},
		{"polygon shape", "desks", `{"a":{"$geoWithin":{"$polygon":[[0,0],[1,1]]}}}`, refusal{400, `"$polygon"`}},
		{"geometry shape", "desks", `{"a":{"$geoIntersects":{"$geometry":{"type":"Point"}}}}`, refusal{400, `"$geometry"`}},
		{"geometry crs operator", "desks", `{"a":{"$geoIntersects":{"$geometry":{"type":"Point","coordinates":[1,2],"crs":{"$where":1}}}}}`, refusal{400, `"$geometry"`}},
		{"maxDistance alone", "desks", `{"a":{"$maxDistance":1}}`, refusal{400, `needs $near or $nearSphere`}},
		{"near shape", "desks", `{"a":{"$near":"here"}}`, refusal{400, `"$near"`}},
		{"empty field", "desks", `{"":1}`, refusal{400, "empty field name"}},
		{"empty segment", "desks", `{"a..b":1}`, refusal{400, "empty segment"}},
		{"dollar segment", "desks", `{"a.$b":1}`, refusal{400, "starting with $"}},
		{"NUL in key", "desks", `{"a\u0000":1}`, refusal{400, "NUL"}},
		{"NUL in value key", "desks", `{"a":{"b\u0000":1}}`, refusal{400, "NUL"}},
		{"long path", "desks", `{"` + strings.Repeat("a", 257) + `":1}`, refusal{400, "longer than 256 bytes"}},
		{"invalid UTF-8 escape", "desks", `{"a":"\udc00"}`, refusal{400, "unpaired surrogate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(resource(t, tc.res), "", qs("where", tc.where))
			checkErr(t, err, tc.want)
		})
	}
}

// TestWhereHiddenFields: no oracle
// on an excluded field, however the filter reaches it.
func TestWhereHiddenFields(t *testing.T) {
	for _, tc := range []struct {
		name, res, where string
	}{
		{"equality", "users", `{"password":"x"}`},
		{"$lt binary search", "users", `{"password":{"$lt":"$2b$12$M"}}`},
		{"$in", "users", `{"password":{"$in":["a","b"]}}`},
		{"$exists", "users", `{"password":{"$exists":true}}`},
		{"$type", "users", `{"password":{"$type":"string"}}`},
		{"$not", "users", `{"password":{"$not":{"$gt":"m"}}}`},
		{"$size", "users", `{"password":{"$size":1}}`},
		{"under $or", "users", `{"$or":[{"a":1},{"$and":[{"password":{"$gt":""}}]}]}`},
		{"$elemMatch on the parent", "users", `{"user_preferences":{"$elemMatch":{"a":1}}}`},
		{"$elemMatch joined path", "users", `{"session_preferences":{"$elemMatch":{"x":{"$gt":1}}}}`},
		{"$elemMatch relative path", "events_history", `{"update":{"$elemMatch":{"_etag":"x"}}}`},
		{"dotted path", "users", `{"user_preferences.editor":{"$exists":true}}`},
		{"multi-field", "users", `{"password.keyword":"x"}`},
		{"\\u escape", "users", `{"pass\u0077ord":"x"}`},
		{"parent document", "events_history", `{"update":{"name":"x"}}`},
		{"literal sub-document", "events_history", `{"update":{"$eq":{"_etag":"x"}}}`},
		{"nested literal", "events_history", `{"update":{"$in":[{"_links":1}]}}`},
		{"other excluded", "desks", `{"working_stage":{"$exists":true}}`},
		{"_etag", "desks", `{"_etag":{"$gt":"a"}}`},
		{"user _type", "users", `{"_type":"users"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(resource(t, tc.res), "", qs("where", tc.where))
			checkErr(t, err, refusal{400, "cannot be used"})
		})
	}
}

func TestWhereSearchLists(t *testing.T) {
	for _, tc := range []struct {
		name, res, where, filter, canon string
	}{
		{"one field", "items", `{"type":"text"}`, `[{"term":{"type":{"value":"text"}}}]`, `{"type":"text"}`},
		{"sorted terms", "items", `{"urgency":3,"pubstatus":"usable","flags.marked_for_legal":false,"x":1.5}`,
			`[{"term":{"flags.marked_for_legal":{"value":false}}},{"term":{"pubstatus":{"value":"usable"}}},{"term":{"urgency":{"value":3}}},{"term":{"x":{"value":1.5}}}]`,
			`{"flags.marked_for_legal":false,"pubstatus":"usable","urgency":3,"x":1.5}`},
		{"_type renamed", "items", `{"_type":"archive"}`, `[{"term":{"_resource":{"value":"archive"}}}]`, `{"_resource":"archive"}`},
		{"24-hex stays a string", "contacts", `{"_id":"5d5e9d8c38d37783d9431800"}`, `[{"term":{"_id":{"value":"5d5e9d8c38d37783d9431800"}}}]`, `{"_id":"5d5e9d8c38d37783d9431800"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := resource(t, tc.res)
			q, err := Parse(r, "", qs("where", tc.where))
			if err != nil {
				t.Fatal(err)
			}
			check(t, q, want{search: defaultBody(`{"bool":{"filter":`+tc.filter+`}}`, js(sortBody(r.DefaultSort)), 25),
				params: []sourcesParam{p("where", tc.canon)}})
		})
	}
	for _, tc := range []struct {
		name, res, where string
		want             refusal
	}{
		{"operator", "items", `{"urgency":{"$gt":1}}`, refusal{400, "where on items supports field equality only; use source for more"}},
		{"top operator", "planning", `{"$or":[]}`, refusal{400, "where on planning supports field equality only"}},
		{"array", "events", `{"a":[1]}`, refusal{400, "field equality only"}},
		{"null", "contacts", `{"a":null}`, refusal{400, "field equality only"}},
		{"object", "assignments", `{"a":{"b":1}}`, refusal{400, "field equality only"}},
		{"hidden", "items", `{"lock_user":"u"}`, refusal{400, `where: field "lock_user" cannot be used`}},
		{"hidden nested", "items", `{"associations.featured.lock_session":"s"}`, refusal{400, `cannot be used`}},
		{"hidden keyword", "planning", `{"item_class.keyword":"s"}`, refusal{400, `cannot be used`}},
		{"hidden pattern", "items", `{"lock_*":"s"}`, refusal{400, `cannot be used`}},
		{"rename collision", "items", `{"_type":"a","_resource":"b"}`, refusal{400, `appears twice`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(resource(t, tc.res), "", qs("where", tc.where))
			checkErr(t, err, tc.want)
		})
	}
}
