package natsbind

import "testing"

// micro refuses a service whose version is not a semantic version; a
// jetgate built with -X app.Version=v1.2.3 or a commit hash must still
// serve its NATS API (issue 19: version = jetgate's).
func TestServiceVersion(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"0.1.0-dev": "0.1.0-dev", "v1.2.3": "1.2.3", "1.2.3+build.7": "1.2.3+build.7",
		"dev": "0.0.0-unknown", "3f2a9c1": "0.0.0-unknown", "": "0.0.0-unknown",
	} {
		if got := serviceVersion(in); got != want {
			t.Errorf("serviceVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
