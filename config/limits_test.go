package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLimits(t *testing.T) {
	perSecond := func(n int) Rate { return Rate{Events: n, Per: time.Second} }
	for _, tc := range []struct {
		name string
		env  []string
		want Limits
	}{
		{"defaults", nil, Limits{Rate: perSecond(600), Address: perSecond(50), MissCost: 10, MaxLoads: 8}},
		{"set", []string{"PRODAPI_RATE_LIMIT", "3000/m", "PRODAPI_RATE_LIMIT_CLIENTS", " mirror-a=50/s , internal=off,slow=100/h",
			"PRODAPI_RATE_LIMIT_ADDR", "off", "PRODAPI_RATE_MISS_COST", "0", "PRODAPI_CLIENT_MAX_LOADS", "0"},
			Limits{Rate: Rate{3000, time.Minute}, Clients: map[string]Rate{"mirror-a": perSecond(50), "internal": {}, "slow": {100, time.Hour}},
				MaxLoads: 0}},
		{"off", []string{"PRODAPI_RATE_LIMIT", "OFF"}, Limits{Address: perSecond(50), MissCost: 10, MaxLoads: 8}},
	} {
		c, err := Load(envOf(append([]string{"AUTH_SERVER_SHARED_SECRET", secret}, tc.env...)...))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if diff := cmp.Diff(tc.want, c.Limits); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	c, _ := Load(envOf("AUTH_SERVER_SHARED_SECRET", secret, "PRODAPI_RATE_LIMIT_CLIENTS", "b=5/m,a=off"))
	values := map[string]string{}
	for _, s := range Settings() {
		if strings.HasPrefix(s.Name, "PRODAPI_RATE_") || s.Name == "PRODAPI_CLIENT_MAX_LOADS" {
			values[s.Name] = s.Value(c)
		}
	}
	want := map[string]string{"PRODAPI_RATE_LIMIT": "600/s", "PRODAPI_RATE_LIMIT_CLIENTS": "a=off,b=5/m", "PRODAPI_RATE_LIMIT_ADDR": "50/s",
		"PRODAPI_RATE_MISS_COST": "10", "PRODAPI_CLIENT_MAX_LOADS": "8"}
	if diff := cmp.Diff(want, values); diff != "" {
		t.Errorf("effective values (-want +got):\n%s", diff)
	}
}

func TestBadLimits(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"PRODAPI_RATE_LIMIT", "600"}, `PRODAPI_RATE_LIMIT="600" is not a rate (600/s, 3000/m, 100/h, or off)`},
		{[]string{"PRODAPI_RATE_LIMIT", "0/s"}, `PRODAPI_RATE_LIMIT="0/s" is not a rate`},
		{[]string{"PRODAPI_RATE_LIMIT_ADDR", "10/d"}, `PRODAPI_RATE_LIMIT_ADDR="10/d" is not a rate`},
		{[]string{"PRODAPI_RATE_LIMIT_CLIENTS", "a=50/s,b"}, `PRODAPI_RATE_LIMIT_CLIENTS: "b" is not client=rate`},
		{[]string{"PRODAPI_RATE_LIMIT_CLIENTS", "a=50/s,a=off"}, `PRODAPI_RATE_LIMIT_CLIENTS names a twice`},
		{[]string{"PRODAPI_RATE_LIMIT_CLIENTS", "a=fast"}, `PRODAPI_RATE_LIMIT_CLIENTS: a="fast" is not a rate`},
		{[]string{"PRODAPI_RATE_MISS_COST", "-1"}, "PRODAPI_RATE_MISS_COST -1 must be between 0"},
		{[]string{"PRODAPI_CLIENT_MAX_LOADS", "-1"}, "PRODAPI_CLIENT_MAX_LOADS -1 must be between 0 (no cap)"},
		{[]string{"PRODAPI_RATE_LIMIT", "10/s"}, "PRODAPI_RATE_LIMIT 10/s cannot pay for a single backend load, which costs 1 + PRODAPI_RATE_MISS_COST = 11"},
		{[]string{"PRODAPI_RATE_LIMIT_CLIENTS", "slow=5/s"}, "PRODAPI_RATE_LIMIT_CLIENTS slow 5/s cannot pay"},
		{[]string{"PRODAPI_RATE_LIMIT", "20/s", "PRODAPI_RATE_MISS_COST", "20"}, "PRODAPI_RATE_LIMIT 20/s cannot pay for a single backend load, which costs 1 + PRODAPI_RATE_MISS_COST = 21"},
	} {
		_, err := Load(envOf(append([]string{"AUTH_SERVER_SHARED_SECRET", secret}, tc.env...)...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.env, err, tc.want)
		}
	}
	// The edges that hold: a limit of exactly one load, a low rate per
	// hour, a cost of 0 with a limit of 1.
	for _, env := range [][]string{
		{"PRODAPI_RATE_LIMIT", "11/s"},
		{"PRODAPI_RATE_LIMIT_CLIENTS", "slow=11/h"},
		{"PRODAPI_RATE_LIMIT", "1/s", "PRODAPI_RATE_MISS_COST", "0"},
	} {
		if _, err := Load(envOf(append([]string{"AUTH_SERVER_SHARED_SECRET", secret}, env...)...)); err != nil {
			t.Errorf("%v: %v", env, err)
		}
	}
}
