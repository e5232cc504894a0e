package grammar

import "slices"

// A QueryType is one Elasticsearch query type the API accepts in a search
// list's source.
type QueryType struct {
	Name string
	// Bool is set for the legacy forms (filtered, and, or, not, query)
	// the server rewrites into a bool query: backends never see them.
	Bool bool
	// Example is a query (JSON) of this type, valid for the API on the
	// items resource, for the tests of every layer to run.
	Example string
}

var queryTypes = []QueryType{
	{Name: "bool", Example: `{"bool": {"must": [{"term": {"state": "published"}}], "must_not": [{"term": {"type": "picture"}}]}}`},
	{Name: "term", Example: `{"term": {"state": {"value": "published"}}}`},
	{Name: "terms", Example: `{"terms": {"state": ["published", "in_progress"]}}`},
	{Name: "match", Example: `{"match": {"headline": {"query": "bridge"}}}`},
	{Name: "match_phrase", Example: `{"match_phrase": {"headline": {"query": "opens to traffic"}}}`},
	{Name: "match_phrase_prefix", Example: `{"match_phrase_prefix": {"headline": {"query": "opens to tra"}}}`},
	{Name: "prefix", Example: `{"prefix": {"slugline": {"value": "bud"}}}`},
	{Name: "wildcard", Example: `{"wildcard": {"headline": {"value": "elect*"}}}`},
	{Name: "multi_match", Example: `{"multi_match": {"query": "budget", "fields": ["headline", "slugline"]}}`},
	{Name: "match_all", Example: `{"match_all": {}}`},
	{Name: "match_none", Example: `{"match_none": {}}`},
	{Name: "range", Example: `{"range": {"urgency": {"gte": 3}}}`},
	{Name: "exists", Example: `{"exists": {"field": "urgency"}}`},
	{Name: "ids", Example: `{"ids": {"values": ["a", "b"]}}`},
	{Name: "query_string", Example: `{"query_string": {"query": "headline:bridge OR roundup", "lenient": true}}`},
	{Name: "simple_query_string", Example: `{"simple_query_string": {"query": "budget | \"opens to\"", "fields": ["headline", "slugline"]}}`},
	{Name: "nested", Example: `{"nested": {"path": "coverages", "query": {"term": {"coverages.planning.g2_content_type": {"value": "picture"}}}}}`},
	{Name: "constant_score", Example: `{"constant_score": {"filter": {"term": {"state": {"value": "published"}}}, "boost": 2}}`},
	{Name: "dis_max", Example: `{"dis_max": {"queries": [{"term": {"state": {"value": "published"}}}, {"match": {"headline": {"query": "bridge"}}}]}}`},
	{Name: "filtered", Bool: true, Example: `{"filtered": {"filter": {"term": {"state": {"value": "published"}}}, "query": {"match": {"headline": {"query": "bridge"}}}}}`},
	{Name: "and", Bool: true, Example: `{"and": [{"term": {"state": {"value": "published"}}}, {"term": {"type": {"value": "text"}}}]}`},
	{Name: "or", Bool: true, Example: `{"or": [{"term": {"type": {"value": "picture"}}}, {"term": {"type": {"value": "composite"}}}]}`},
	{Name: "not", Bool: true, Example: `{"not": {"term": {"state": {"value": "published"}}}}`},
	{Name: "query", Bool: true, Example: `{"query": {"term": {"state": {"value": "published"}}}}`},
}

// QueryTypes returns every Elasticsearch query type the API accepts, in a
// stable order. The slice is the caller's.
func QueryTypes() []QueryType { return slices.Clone(queryTypes) }

// QueryTypeByName returns the query type named name, if the API accepts it.
func QueryTypeByName(name string) (QueryType, bool) {
	i := slices.IndexFunc(queryTypes, func(q QueryType) bool { return q.Name == name })
	if i < 0 {
		return QueryType{}, false
	}
	return queryTypes[i], true
}

// An AggType is one Elasticsearch aggregation type the API accepts.
type AggType struct {
	Name string
	// Example is an aggs object (JSON) using it, valid on items.
	Example string
}

var aggTypes = []AggType{
	{Name: "terms", Example: `{"type": {"terms": {"field": "type", "size": 5, "order": {"_key": "asc"}}}}`},
}

// AggTypes returns the aggregation types the API accepts.
func AggTypes() []AggType { return slices.Clone(aggTypes) }
