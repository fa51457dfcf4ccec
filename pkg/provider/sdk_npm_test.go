package provider

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// sdkVectors is a testdata/<provider>/vectors.json: deliveries generated
// once by the provider's npm SDK (testdata/npm/README.md), each with the
// SDK's verdict.
type sdkVectors struct {
	Provider  string `json:"provider"`
	SDK       string `json:"sdk"`
	Version   string `json:"version"`
	Script    string `json:"script"`
	Tolerance string `json:"tolerance"`
	Vectors   []struct {
		Name      string            `json:"name"`
		Secrets   []string          `json:"secrets"`
		PublicURL string            `json:"public_url"`
		Headers   map[string]string `json:"headers"`
		Body      string            `json:"body"`
		NowMS     int64             `json:"now_ms"`
		SDK       bool              `json:"sdk"`
		Intake    *bool             `json:"intake"`
		Why       string            `json:"why"`
	} `json:"vectors"`
}

// TestNPMSDKVectors: Intake's verifier gives each recorded delivery the
// verdict the provider's npm SDK gave it, except where the vector names
// another verdict for Intake and why. Offline: only the JSON is read.
func TestNPMSDKVectors(t *testing.T) {
	files, err := filepath.Glob("testdata/*/vectors.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var f sdkVectors
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if f.Provider == "" || f.SDK == "" || f.Version == "" || len(f.Vectors) == 0 {
			t.Fatalf("%s: provider, sdk, version and vectors are required", file)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(file), f.Script)); err != nil {
			t.Fatalf("%s: the generator %q is not beside it: %v", file, f.Script, err)
		}
		tolerance := DefaultTolerance
		if f.Tolerance != "" {
			if tolerance, err = time.ParseDuration(f.Tolerance); err != nil {
				t.Fatalf("%s: tolerance: %v", file, err)
			}
		}
		accepted, refused := 0, 0
		for _, vec := range f.Vectors {
			t.Run(f.Provider+"/"+vec.Name, func(t *testing.T) {
				want := vec.SDK
				if vec.Intake != nil {
					if *vec.Intake == vec.SDK || vec.Why == "" {
						t.Fatalf("intake %v beside sdk %v needs to differ and say why", *vec.Intake, vec.SDK)
					}
					want = *vec.Intake
				}
				cfg := Config{Provider: f.Provider, Secrets: vec.Secrets, PublicURL: vec.PublicURL, Tolerance: tolerance}
				v := newTestVerifier(t, cfg)
				h := http.Header{}
				for k, val := range vec.Headers {
					h.Set(k, val)
				}
				_, err := v.Verify(&Request{Header: h, Body: []byte(vec.Body), Now: time.UnixMilli(vec.NowMS)})
				if err != nil {
					checkSentinel(t, err)
				}
				if got := signatureAccepted(err); got != want {
					t.Fatalf("%s %s says %v, Intake %v (%v)", f.SDK, f.Version, vec.SDK, got, err)
				}
			})
			if vec.SDK {
				accepted++
			} else {
				refused++
			}
		}
		if accepted == 0 || refused == 0 {
			t.Errorf("%s: the SDK must accept some vectors and refuse others (%d, %d)", file, accepted, refused)
		}
	}
}
