package httpbind

import (
	"strings"
	"testing"
	"time"
)

func TestNew_Config(t *testing.T) {
	t.Parallel()
	if _, err := New(nil, Config{}); err == nil {
		t.Error("New(nil) succeeded")
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"negative body", Config{MaxBodyBytes: -1}, "MaxBodyBytes"},
		{"batch below body", Config{MaxBodyBytes: 1 << 20, MaxBatchBodyBytes: 1024}, "MaxBatchBodyBytes"},
		{"fetch count", Config{MaxFetchCount: -3}, "MaxFetchCount"},
		{"level", Config{ConformanceLevel: 5}, "ConformanceLevel"},
		{"visibility", Config{DefaultHeartbeatTimeout: time.Microsecond}, "DefaultHeartbeatTimeout"},
		{"empty extension", Config{Extensions: []string{""}}, "Extensions[0]"},
		{"twice", Config{Extensions: []string{"urn:a", "urn:a"}}, "Extensions[1]"},
	} {
		_, err := New(&fakeBackend{}, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to name %s", tc.name, err, tc.want)
		}
	}

	c := Config{MaxBodyBytes: 32 << 20}.withDefaults()
	if c.MaxBatchBodyBytes != 32<<20 || c.MaxFetchCount != 1000 || c.ImplementationName != "jetgate" ||
		c.DefaultHeartbeatTimeout != time.Minute || c.DefaultTimeout != 30*time.Minute || c.Logger == nil || c.validate() != nil {
		t.Errorf("defaults = %+v", c)
	}
}
