package realserver

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

func TestElastic(t *testing.T) {
	var s Set
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	es := s.Elastic(t)
	if es.Version != ElasticVersion {
		t.Errorf("Version = %q, want %q", es.Version, ElasticVersion)
	}
	if !strings.HasPrefix(es.URL, "http://127.0.0.1:") {
		t.Errorf("URL = %q, want loopback", es.URL)
	}
	if again := s.Elastic(t); again != es {
		t.Errorf("second call started another node: %+v vs %+v", again, es)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var info struct {
		Tagline string `json:"tagline"`
		Version struct {
			BuildFlavor string `json:"build_flavor"`
		} `json:"version"`
	}
	if err := getJSON(ctx, es.URL+"/", &info); err != nil {
		t.Fatal(err)
	}
	if info.Tagline != "You Know, for Search" || info.Version.BuildFlavor != "oss" {
		t.Errorf("GET / = %+v, want the tagline and the oss flavor", info)
	}
	// The modules a Superdesk index needs are loaded: analysis-common
	// gives the html_strip char filter, mapper-extras the
	// search_as_you_type field.
	var nodeInfo struct {
		Nodes map[string]struct {
			Modules []struct {
				Classname string `json:"classname"`
			} `json:"modules"`
			// Plugins loaded from the classpath are listed here.
			Plugins []struct {
				Classname string `json:"classname"`
			} `json:"plugins"`
			JVM struct {
				Mem struct {
					HeapMax int64 `json:"heap_max_in_bytes"`
				} `json:"mem"`
			} `json:"jvm"`
		} `json:"nodes"`
	}
	if err := getJSON(ctx, es.URL+"/_nodes/_local/plugins,jvm", &nodeInfo); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodeInfo.Nodes {
		if n.JVM.Mem.HeapMax > 512<<20 {
			t.Errorf("heap max = %d bytes, want at most 512 MB", n.JVM.Mem.HeapMax)
		}
		var names []string
		for _, m := range append(n.Modules, n.Plugins...) {
			names = append(names, m.Classname)
		}
		for _, want := range []string{"org.elasticsearch.analysis.common.CommonAnalysisPlugin", "org.elasticsearch.index.mapper.MapperExtrasPlugin", "org.elasticsearch.painless.PainlessPlugin", "org.elasticsearch.transport.Netty4Plugin"} {
			if !strings.Contains(strings.Join(names, " "), want) {
				t.Errorf("module %s not loaded; loaded: %v", want, names)
			}
		}
	}

	s.Close()
	closed = true
	// Stopped by PID: nothing listens on the port any more.
	if c, err := net.Dial("tcp", strings.TrimPrefix(es.URL, "http://")); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Close", es.URL)
	}
}
