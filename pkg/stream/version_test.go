package stream

import (
	"strings"
	"testing"
)

func TestServerVersionFloor(t *testing.T) {
	for v, ok := range map[string]bool{
		"2.15.2": true, "2.12.3": true, "2.12.10": true, "3.0.0": true, "v2.13.0": true,
		"2.13.0-beta.1": true, "2.12.3-beta.1": false, // a pre-release comes before its release
		"2.12.2": false, "2.12.1": false, "2.11.9": false, "2.10.23": false, "2.10.29": false,
		"": false, "2.12": false, "two.twelve.three": false,
	} {
		err := CheckServerVersion(v)
		if (err == nil) != ok {
			t.Errorf("CheckServerVersion(%q) = %v, want ok=%v", v, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), MinServerVersion) {
			t.Errorf("CheckServerVersion(%q): %v does not name the floor", v, err)
		}
	}
}
