package chaos

import (
	"strings"
	"testing"
)

func TestValidateNoCut(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		ok   bool
	}{
		{"sync failover", Options{Failover: true, NoCut: true}, true},
		{"async failover", Options{Failover: true, Async: true, NoCut: true}, false},
		{"no failover", Options{NoCut: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Binary = "intake"
			err := tc.o.WithDefaults().validate()
			if got := err == nil || !strings.Contains(err.Error(), "Options.NoCut"); got != tc.ok {
				t.Fatalf("validate: %v; want ok %v", err, tc.ok)
			}
		})
	}
}

func TestValidateHandler(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		ok   bool
	}{
		{"default", Options{}, true},
		{"sql", Options{Handler: HandlerSQL}, true},
		{"unknown", Options{Handler: "lua"}, false},
		{"sql control", Options{Handler: HandlerSQL, Control: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Binary = "intake"
			err := tc.o.WithDefaults().validate()
			if got := err == nil || !strings.Contains(err.Error(), "Options.Handler"); got != tc.ok {
				t.Fatalf("validate: %v; want ok %v", err, tc.ok)
			}
		})
	}
}
