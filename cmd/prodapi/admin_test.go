package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prodapi/prodapi/test/testkit"
)

const adminSecret = "an-operator-secret-of-32-bytes-or-more"

func (in *instance) do(t *testing.T, method, url, authorization string) (int, []byte) {
	t.Helper()
	status, _, b := request(t, method, url, "Authorization", authorization)
	return status, b
}

// An operator purges a story on the admin listener; the next request
// loads it again. The public port takes no POST.
func TestAdminPurge(t *testing.T) {
	in := start(t, "PRODAPI_ADMIN_ADDR", "127.0.0.1:0", "PRODAPI_ADMIN_SECRET", adminSecret)
	if in.admin == "" {
		t.Fatal("no admin listener")
	}
	auth := bearer(t, devSecret, "ARCHIVE_READ")
	status, _, body := in.get(t, "/prodapi/v1/items?max_results=1", auth)
	var list struct {
		Items []struct {
			ID string `json:"_id"`
		} `json:"_items"`
	}
	if err := json.Unmarshal(body, &list); status != 200 || err != nil || len(list.Items) != 1 {
		t.Fatalf("items: %d %v %.200s", status, err, body)
	}
	id := list.Items[0].ID
	item := "/prodapi/v1/items/" + id
	in.get(t, item, auth)
	if _, h, _ := in.get(t, item, auth); !strings.Contains(h.Get("Cache-Status"), "; hit") {
		t.Fatalf("second GET: Cache-Status %q, want a hit", h.Get("Cache-Status"))
	}

	if status, body := in.do(t, "POST", in.admin+"/purge?resource=items&id="+id, "Bearer "+adminSecret); status != 200 {
		t.Fatalf("purge: %d %s", status, body)
	}
	if _, h, _ := in.get(t, item, auth); !strings.Contains(h.Get("Cache-Status"), "fwd=miss") {
		t.Errorf("after the purge: Cache-Status %q, want a miss", h.Get("Cache-Status"))
	}

	// The admin secret is not a token, and a token is not the admin secret.
	if status, _ := in.do(t, "POST", in.admin+"/purge?all=true", auth); status != 401 {
		t.Errorf("purge with an API token: %d, want 401", status)
	}
	// The refusal is counted, and logged with who asked.
	if got := in.metric(t, `prodapi_admin_refused_total{reason="unauthorized"}`); got != 1 {
		t.Errorf("prodapi_admin_refused_total{reason=\"unauthorized\"} = %v, want 1", got)
	}
	testkit.Eventually(t, "the audit lines naming the client", func() bool { // the log sink writes in the background
		log := in.stderr.String()
		return strings.Contains(log, `"msg":"admin: refused","reason":"unauthorized","status":401,"method":"POST","path":"/purge","client_addr":"127.0.0.1","request_id":"`) &&
			strings.Contains(log, `"msg":"admin: purge","resource":"items","ids":1,"all":false,"error":null,"client_addr":"127.0.0.1","request_id":"`)
	})
	if status, _, _ := in.get(t, item, "Bearer "+adminSecret); status != 401 {
		t.Errorf("API with the admin secret: %d, want 401", status)
	}
	// The public port stays read-only.
	for _, target := range []string{"/purge?all=true", "/prodapi/v1/purge?all=true", item} {
		if status, body := in.do(t, "POST", in.base+target, auth); status != 405 && status != 404 {
			t.Errorf("POST %s on the public port: %d %s", target, status, body)
		}
	}
	if status, _ := in.do(t, "POST", in.base+"/prodapi/v1/items", auth); status != 405 {
		t.Errorf("POST items on the public port: %d, want 405", status)
	}
}

// Without PRODAPI_ADMIN_ADDR there is no admin listener.
func TestAdminOffByDefault(t *testing.T) {
	in := start(t)
	if in.admin != "" {
		t.Errorf("an admin listener at %s without PRODAPI_ADMIN_ADDR", in.admin)
	}
}
