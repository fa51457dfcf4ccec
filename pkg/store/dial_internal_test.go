package store

import "testing"

func TestSetsConnectTimeout(t *testing.T) {
	for _, tt := range []struct {
		url  string
		sets bool
	}{
		{"postgres://u@h/db", false},
		{"postgres://u@h/db?sslmode=disable&connect_timeout=0", true},
		{"postgresql://u@h/db?connect_timeout=10", true},
		{"host=h dbname=db", false},
		{"host=h connect_timeout=0 dbname=db", true},
		{"connect_timeout = 3", true},
		{"host=h dbname=my_connect_timeout", false},
	} {
		if got := setsConnectTimeout(tt.url); got != tt.sets {
			t.Errorf("setsConnectTimeout(%q) = %t, want %t", tt.url, got, tt.sets)
		}
	}
}
