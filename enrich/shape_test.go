package enrich_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/enrich"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// parse decodes a JSON literal of a test (Extended JSON allowed).
func parse(t testing.TB, s string) any {
	t.Helper()
	v, err := codec.DecodeJSON([]byte(s), codec.DecodeOptions{Extended: true})
	if err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return v
}

func parseDoc(t testing.TB, s string) *sources.Doc {
	t.Helper()
	return parse(t, s).(*sources.Doc)
}

// TestShaping covers the shaping rules of doc.go's "Shaping" one by one, on documents that need no lookup.
func TestShaping(t *testing.T) {
	const p = mediaPrefix
	for _, tc := range []struct {
		name     string
		resource string
		detail   bool
		in, want string
	}{
		// Excluded fields.
		{"base fields go", "desks", false,
			`{"_id":"d","name":"PROD","_etag":"x","_type":"desks","_updated":"u","_created":"c","_current_version":1,"fields_meta":{},"working_stage":"s","content_expiry":3}`,
			`{"_id":"d","name":"PROD"}`},
		{"users' secrets go", "users", false,
			`{"_id":"u","username":"a","password":"$2b$","user_preferences":{},"session_preferences":{},"email":"e"}`,
			`{"_id":"u","username":"a","email":"e"}`},
		{"dotted names reach into update", "events_history", false,
			`{"_id":"h","update":{"name":"n","_etag":"e","_links":{"self":{}},"_status":"OK","_updated":"u","_created":"c"},"_etag":"x"}`,
			`{"_id":"h","update":{"name":"n"}}`},
		{"null update is skipped", "events_history", false,
			`{"_id":"h","update":null}`, `{"_id":"h","update":null}`},
		{"non-document update is skipped", "events_history", false,
			`{"_id":"h","update":[{"_etag":"e"}],"operation":"create"}`, `{"_id":"h","update":[{"_etag":"e"}],"operation":"create"}`},
		{"a literal dotted key goes too", "events_history", false,
			`{"_id":"h","update._etag":"e","update":{}}`, `{"_id":"h","update":{}}`},
		{"events keep _planning_schedule, planning does not", "events", false,
			`{"_id":"e","_planning_schedule":[],"lock_user":null,"lock_action":null,"lock_time":null,"lock_session":null}`,
			`{"_id":"e","_planning_schedule":[]}`},

		// Detail projection.
		{"item detail keeps only metadata fields", "items", true,
			`{"_id":"i","headline":"h","force_unlock":false,"_etag":"e","unknown":1,"body_html":"b"}`,
			`{"_id":"i","headline":"h","body_html":"b"}`},
		{"item list keeps every field", "items", false,
			`{"_id":"i","headline":"h","force_unlock":false,"_etag":"e","unknown":1}`,
			`{"_id":"i","headline":"h","force_unlock":false,"unknown":1}`},
		{"contact detail keeps only the schema", "contacts", true,
			`{"_id":"c","first_name":"Brett","fields_meta":{},"_links":{},"secret":"s","city":"Prague"}`,
			`{"_id":"c","first_name":"Brett","city":"Prague"}`},
		{"contact list drops _links but keeps fields_meta", "contacts", false,
			`{"_id":"c","first_name":"Brett","fields_meta":{},"_links":{},"_etag":"e"}`,
			`{"_id":"c","first_name":"Brett","fields_meta":{}}`},

		// Renditions.
		{"media becomes an href with the mimetype's extension", "items", false,
			`{"_id":"i","renditions":{"original":{"href":"http://old/a.jpg","media":"5d553c333031e2855a2e5662","mimetype":"image/jpeg","width":1}}}`,
			`{"_id":"i","renditions":{"original":{"href":"` + p + `/5d553c333031e2855a2e5662.jpg","mimetype":"image/jpeg","width":1}}}`},
		{"href is appended when there was none", "items", false,
			`{"_id":"i","renditions":{"r":{"media":"m1","mimetype":"image/png"}}}`,
			`{"_id":"i","renditions":{"r":{"mimetype":"image/png","href":"` + p + `/m1.png"}}}`},
		{"an ObjectID media renders as hex", "items", false,
			`{"_id":"i","renditions":{"r":{"media":{"$oid":"5d553c333031e2855a2e5662"},"mimetype":"IMAGE/JPEG"}}}`,
			`{"_id":"i","renditions":{"r":{"mimetype":"IMAGE/JPEG","href":"` + p + `/5d553c333031e2855a2e5662.jpg"}}}`},
		{"extension table", "items", false,
			`{"_id":"i","renditions":{
			  "a":{"media":"a","mimetype":"image/webp"},
			  "b":{"media":"b","mimetype":"image/jpeg; q=1"},
			  "c":{"media":"c","mimetype":" image/jpeg"},
			  "d":{"media":"d","mimetype":"video/mp4"},
			  "e":{"media":"e","mimetype":"audio/mpeg"},
			  "f":{"media":"f","mimetype":"audio/wav"},
			  "g":{"media":"g","mimetype":"audio/x-wav"},
			  "h":{"media":"h","mimetype":"application/octet-stream"},
			  "i":{"media":"i","mimetype":"image/jpg"},
			  "j":{"media":"j","mimetype":null},
			  "k":{"media":"k"},
			  "l":{"media":"l","mimetype":"video/quicktime"},
			  "m":{"media":"m","mimetype":"image/svg+xml"},
			  "n":{"media":"n","mimetype":"audio/mp4"}}}`,
			`{"_id":"i","renditions":{
			  "a":{"mimetype":"image/webp","href":"` + p + `/a.webp"},
			  "b":{"mimetype":"image/jpeg; q=1","href":"` + p + `/b"},
			  "c":{"mimetype":" image/jpeg","href":"` + p + `/c"},
			  "d":{"mimetype":"video/mp4","href":"` + p + `/d.mp4"},
			  "e":{"mimetype":"audio/mpeg","href":"` + p + `/e.mp3"},
			  "f":{"mimetype":"audio/wav","href":"` + p + `/f"},
			  "g":{"mimetype":"audio/x-wav","href":"` + p + `/g.wav"},
			  "h":{"mimetype":"application/octet-stream","href":"` + p + `/h.bin"},
			  "i":{"mimetype":"image/jpg","href":"` + p + `/i"},
			  "j":{"mimetype":null,"href":"` + p + `/j"},
			  "k":{"href":"` + p + `/k"},
			  "l":{"mimetype":"video/quicktime","href":"` + p + `/l.mov"},
			  "m":{"mimetype":"image/svg+xml","href":"` + p + `/m.svg"},
			  "n":{"mimetype":"audio/mp4","href":"` + p + `/n"}}}`},
		{"object storage ids get no extension", "items", false,
			`{"_id":"i","renditions":{"a":{"media":"20240115120112/photo.jpg","mimetype":"image/jpeg"},"b":{"media":"sub/20240115/clip","mimetype":"video/mp4"},"c":{"media":"photo.JPG","mimetype":"image/jpeg"}}}`,
			`{"_id":"i","renditions":{"a":{"mimetype":"image/jpeg","href":"` + p + `/20240115120112/photo.jpg"},"b":{"mimetype":"video/mp4","href":"` + p + `/sub/20240115/clip"},"c":{"mimetype":"image/jpeg","href":"` + p + `/photo.JPG"}}}`},
		{"renditions without media, or with a media that is no id, are untouched", "items", false,
			`{"_id":"i","renditions":{"a":{"href":"http://x/a.jpg","mimetype":"image/jpeg"},"b":{"media":null,"href":"h"},"c":null,"d":{},"e":"text"}}`,
			`{"_id":"i","renditions":{"a":{"href":"http://x/a.jpg","mimetype":"image/jpeg"},"b":{"media":null,"href":"h"},"c":null,"d":{},"e":"text"}}`},
		{"every occurrence of the old href in body_html is replaced", "items", false,
			`{"_id":"i","body_html":"<img src=\"http://old/m.jpg\"><a href=\"http://old/m.jpg\">x</a>","renditions":{"r":{"href":"http://old/m.jpg","media":"m","mimetype":"image/jpeg"}}}`,
			`{"_id":"i","body_html":"<img src=\"` + p + `/m.jpg\"><a href=\"` + p + `/m.jpg\">x</a>","renditions":{"r":{"href":"` + p + `/m.jpg","mimetype":"image/jpeg"}}}`},
		{"association renditions rewrite the parent's body_html, not their own", "items", false,
			`{"_id":"i","body_html":"<img src=\"http://old/m.jpg\">","associations":{"a":{"body_html":"<img src=\"http://old/m.jpg\">","renditions":{"r":{"href":"http://old/m.jpg","media":"m","mimetype":"image/png"}}}}}`,
			`{"_id":"i","body_html":"<img src=\"` + p + `/m.png\">","associations":{"a":{"body_html":"<img src=\"http://old/m.jpg\">","renditions":{"r":{"href":"` + p + `/m.png","mimetype":"image/png"}}}}}`},
		{"associations lose excluded fields but keep media, _links and the rest; no recursion", "items", false,
			`{"_id":"i","associations":{"a":{"_id":"x","media":"m","_etag":"e","_updated":"u","unique_id":1,"family_id":"f","event_id":"v","lock_user":null,"_links":{},"_latest_version":2,"filemeta_json":"{}","force_unlock":true,
			  "associations":{"b":{"_etag":"e","renditions":{"r":{"media":"m2"}}}}}}}`,
			`{"_id":"i","associations":{"a":{"_id":"x","media":"m","_links":{},"_latest_version":2,"filemeta_json":"{}","force_unlock":true,
			  "associations":{"b":{"_etag":"e","renditions":{"r":{"media":"m2"}}}}}}}`},
		{"null and empty associations and renditions are skipped", "items", false,
			`{"_id":"i","renditions":null,"associations":{"a":null,"b":{},"c":{"renditions":null,"_etag":"e"},"d":"str"}}`,
			`{"_id":"i","renditions":null,"associations":{"a":null,"b":{},"c":{"renditions":null},"d":"str"}}`},
		{"null associations", "items", false,
			`{"_id":"i","associations":null}`, `{"_id":"i","associations":null}`},
		{"renditions are rewritten on every resource", "events_files", false,
			`{"_id":"f","renditions":{"r":{"media":"m","mimetype":"application/pdf"}},"_etag":"e"}`,
			`{"_id":"f","renditions":{"r":{"mimetype":"application/pdf","href":"` + p + `/m.pdf"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &fakeLooker{}
			e := enrich.New(store, enrich.Options{MediaPrefix: mediaPrefix})
			doc := parseDoc(t, tc.in)
			links, missing, err := e.Enrich(context.Background(), resource(t, tc.resource), []*sources.Doc{doc}, tc.detail)
			if err != nil || len(missing) > 0 {
				t.Fatalf("Enrich: missing %v, err %v", missing, err)
			}
			if diff := cmp.Diff(indent(doc), indent(parse(t, tc.want))); diff != "" {
				t.Errorf("shaped document (-got +want):\n%s", diff)
			}
			if len(links) != 1 || links[0] != nil {
				t.Errorf("links = %v, want one nil entry", links)
			}
			if n := store.count(); n != 0 {
				t.Errorf("%d lookups, want none", n)
			}
		})
	}
}

// TestProfile covers the content type name of items (profile).
func TestProfile(t *testing.T) {
	store := &fakeLooker{data: map[string][]*sources.Doc{"content_types": {
		parseDoc(t, `{"_id":{"$oid":"5d553c333031e2855a2e0001"},"output_name":"Belga Text-1","label":"ignored"}`),
		parseDoc(t, `{"_id":{"$oid":"5d553c333031e2855a2e0002"},"label":"Story (Text)"}`),
		parseDoc(t, `{"_id":{"$oid":"5d553c333031e2855a2e0003"},"label":null}`),
		parseDoc(t, `{"_id":{"$oid":"5d553c333031e2855a2e0004"},"output_name":"","label":""}`),
		parseDoc(t, `{"_id":{"$oid":"5d553c333031e2855a2e0005"},"output_name":null,"label":"Été-2024 ÷ news"}`),
		parseDoc(t, `{"_id":"5d553c333031e2855a2e0006","label":"String id"}`),
	}}}
	for _, tc := range []struct {
		name     string
		in, want string
	}{
		{"output_name wins", `{"_id":"i","profile":"5d553c333031e2855a2e0001"}`, `{"_id":"i","profile":"BelgaText1"}`},
		{"else label", `{"_id":"i","profile":"5d553c333031e2855a2e0002"}`, `{"_id":"i","profile":"StoryText"}`},
		{"null label counts as missing", `{"_id":"i","profile":"5d553c333031e2855a2e0003"}`, `{"_id":"i","profile":"5d553c333031e2855a2e0003"}`},
		{"an empty label is a label", `{"_id":"i","profile":"5d553c333031e2855a2e0004"}`, `{"_id":"i","profile":""}`},
		{"only ASCII word characters survive", `{"_id":"i","profile":"5d553c333031e2855a2e0005"}`, `{"_id":"i","profile":"t2024news"}`},
		{"a string _id matches too", `{"_id":"i","profile":"5d553c333031e2855a2e0006"}`, `{"_id":"i","profile":"Stringid"}`},
		{"not found gives the id in lower case", `{"_id":"i","profile":"5D553C333031E2855A2E00FF"}`, `{"_id":"i","profile":"5d553c333031e2855a2e00ff"}`},
		{"an ObjectID profile", `{"_id":"i","profile":{"$oid":"5d553c333031e2855a2e0002"}}`, `{"_id":"i","profile":"StoryText"}`},
		{"not an ObjectId is None", `{"_id":"i","profile":"belga_text"}`, `{"_id":"i","profile":"None"}`},
		{"empty stays", `{"_id":"i","profile":""}`, `{"_id":"i","profile":""}`},
		{"null stays", `{"_id":"i","profile":null}`, `{"_id":"i","profile":null}`},
		{"missing stays missing", `{"_id":"i"}`, `{"_id":"i"}`},
		{"an int stays (the original answered 500)", `{"_id":"i","profile":7}`, `{"_id":"i","profile":7}`},
		{"zero stays", `{"_id":"i","profile":0}`, `{"_id":"i","profile":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := enrich.New(store, enrich.Options{})
			doc := parseDoc(t, tc.in)
			_, missing, err := e.Enrich(context.Background(), resource(t, "items"), []*sources.Doc{doc}, false)
			if err != nil || len(missing) > 0 {
				t.Fatalf("Enrich: missing %v, err %v", missing, err)
			}
			if diff := cmp.Diff(indent(doc), indent(parse(t, tc.want))); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}
}
