package elastic

import "testing"

func TestLegacyElasticsearch(t *testing.T) {
	info := func(tagline, number, flavor string) string {
		return `{"name":"es01","version":{"number":"` + number + `","build_flavor":"` + flavor + `","build_type":"tar"},"tagline":"` + tagline + `"}`
	}
	const tl = "You Know, for Search"
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"7.10.1 default (Superdesk's compose)", info(tl, "7.10.1", "default"), true},
		{"7.10.2 oss", info(tl, "7.10.2", "oss"), true},
		{"7.0.0", info(tl, "7.0.0", "default"), true},
		{"7.13.4", info(tl, "7.13.4", "default"), true},
		{"7.10.2-SNAPSHOT", info(tl, "7.10.2-SNAPSHOT", "default"), true},
		{"7.14 sends the header: without it, not Elasticsearch", info(tl, "7.14.0", "default"), false},
		{"7.17 without the header", info(tl, "7.17.24", "default"), false},
		{"8.x without the header", info(tl, "8.15.3", "default"), false},
		{"6.8 is not supported", info(tl, "6.8.23", "default"), false},
		{"unknown build flavor", info(tl, "7.10.2", "unknown"), false},
		{"no build flavor", `{"version":{"number":"7.10.2"},"tagline":"` + tl + `"}`, false},
		{"OpenSearch pretending 7.10.2", `{"version":{"distribution":"opensearch","number":"7.10.2","build_type":"tar"},"tagline":"The OpenSearch Project: https://opensearch.org/"}`, false},
		{"another tagline", info("You Know, for Logs", "7.10.2", "default"), false},
		{"bad version", info(tl, "seven", "default"), false},
		{"not JSON", `<html>502 Bad Gateway</html>`, false},
		{"empty", ``, false},
	} {
		err := legacyElasticsearch([]byte(tc.body))
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
