package main

import "testing"

// --dashboard is on by default (issue 19: serve serves the dashboard at /);
// --dashboard=false or JETGATE_DASHBOARD=false turns it off.
func TestDashboardFlag(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args    []string
		env     map[string]string
		disable bool
	}{
		{nil, nil, false},
		{[]string{"--dashboard"}, nil, false},
		{[]string{"--dashboard=false"}, nil, true},
		{nil, map[string]string{"JETGATE_DASHBOARD": "false"}, true},
		{[]string{"--dashboard=true"}, map[string]string{"JETGATE_DASHBOARD": "false"}, false},
	} {
		cfg, err := parseServe(c.args, func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
		if err != nil {
			t.Fatalf("%v %v: %v", c.args, c.env, err)
		}
		if cfg.DisableDashboard != c.disable {
			t.Errorf("%v %v: DisableDashboard %v, want %v", c.args, c.env, cfg.DisableDashboard, c.disable)
		}
	}
	if _, err := parseServe([]string{"--dashboard=maybe"}, func(string) (string, bool) { return "", false }); err == nil {
		t.Error("--dashboard=maybe accepted")
	}
}
