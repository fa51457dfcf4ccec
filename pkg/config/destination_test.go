package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

const destinationBase = `
integrations:
  - {name: stripe-demo, provider: stripe, tenant: acme, secrets: [whsec_x]}
`

const destSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func TestDestinationsParseWithDefaults(t *testing.T) {
	cfg, err := Parse([]byte(destinationBase+`
destinations:
  - name: billing
    url: https://billing.internal/webhooks/intake
    match: { tenants: [acme], integrations: [stripe-demo], types: ["invoice.*"] }
    secrets: ["${BILLING_DEST_SECRET}"]
    timeout: 10s
    max_in_flight: 16
    rate: { per_second: 200 }
    retry: [5s, 1m, 5m, 30m, 2h, 6h]
  - name: audit
    url: http://127.0.0.1:9000/hook
    secrets: [`+destSecret+`]
`), env(map[string]string{"BILLING_DEST_SECRET": destSecret}))
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Destinations[0]
	if b.Name != "billing" || b.Secrets[0] != destSecret || b.Match.Types[0] != "invoice.*" || b.Rate.PerSecond != 200 || b.Rate.Burst != 16 {
		t.Errorf("destinations[0] = %+v", b)
	}
	a := cfg.Destinations[1]
	want := Destination{Name: "audit", URL: "http://127.0.0.1:9000/hook", Secrets: []string{destSecret},
		Timeout: 10 * time.Second, MaxInFlight: 16, Retry: DefaultDestinationRetry(),
		Breaker: DestinationBreaker{Failures: 10, Probe: 30 * time.Second}}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("destinations[1] = %+v, want the documented defaults %+v", a, want)
	}
	if a.Durable() != "dispatch-audit" {
		t.Errorf("durable %q", a.Durable())
	}
}

// Every error names the destination and the key.
func TestDestinationErrorsNameTheDestination(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{`{name: b, url: "ftp://x", secrets: [` + destSecret + `]}`, "destinations[0] (b).url: must start with https:// or http://"},
		{`{name: b, url: "HTTPS://x", secrets: [` + destSecret + `]}`, "destinations[0] (b).url: must start with"},
		{`{name: b, url: "https://", secrets: [` + destSecret + `]}`, "destinations[0] (b).url: has no host"},
		{`{name: b, url: "https://x/#f", secrets: [` + destSecret + `]}`, "destinations[0] (b).url: must not have a fragment"},
		{`{name: b, secrets: [` + destSecret + `]}`, "destinations[0] (b).url: required"},
		{`{name: b, url: "https://x"}`, "destinations[0] (b).secrets: at least one"},
		{`{name: b, url: "https://x", secrets: [hunter2]}`, "destinations[0] (b).secrets[0]: must be a Standard Webhooks secret"},
		{`{name: b, url: "https://x", secrets: ["whsec_!!"]}`, "destinations[0] (b).secrets[0]: the part after whsec_ is not standard base64"},
		{`{name: b, url: "https://x", secrets: ["whsec_c2hvcnQ="]}`, "destinations[0] (b).secrets[0]: the key is 5 bytes"},
		{`{name: "b c", url: "https://x", secrets: [` + destSecret + `]}`, "destinations[0] (b c).name: required, 1-64"},
		{`{name: b, url: "https://x", secrets: [` + destSecret + `], match: {integrations: [nope]}}`, `destinations[0] (b).match.integrations[0]: no integration is named "nope"`},
		{`{name: b, url: "https://x", secrets: [` + destSecret + `], match: {types: ["[a"]}}`, `destinations[0] (b).match.types[0]: "[a" is not a path.Match pattern`},
		{`{name: b, url: "https://x", secrets: [` + destSecret + `], timeout: 10m}`, "destinations[0] (b).timeout: must be positive and at most 5m0s"},
		{`{name: b, url: "https://x", secrets: [` + destSecret + `], max_in_flight: 5000}`, "destinations[0] (b).max_in_flight: must be between 1 and 1024"},
		{`{name: b, url: "https://x", secrets: [` + destSecret + `], retry: [1s, -1s]}`, "destinations[0] (b).retry[1]: must be positive"},
		{`{name: b, url: "https://x", secrets: [` + destSecret + `], retry_statuses: [503]}`, "destinations[0] (b).retry_statuses[0]: must be a 4xx status"},
		{`{name: b, url: "https://x", secrets: [` + destSecret + `], rate: {burst: 3}}`, "destinations[0] (b).rate.burst: must be positive, and only with rate.per_second"},
		{`{name: b, url: "https://x", secrets: [` + destSecret + `], breaker: {probe: 1h}}`, "destinations[0] (b).breaker.probe: must be positive and at most 10m0s"},
		{`{name: b, url: "https://x", secrets: [` + destSecret + `], colour: red}`, "field colour not found"},
	} {
		_, err := Parse([]byte(destinationBase+"destinations:\n  - "+tt.yaml+"\n"), env(nil))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.yaml, err, tt.want)
		}
	}
	_, err := Parse([]byte(destinationBase+`destinations:
  - {name: b, url: "https://x", secrets: [`+destSecret+`]}
  - {name: b, url: "https://y", secrets: [`+destSecret+`]}
`), env(nil))
	if err == nil || !strings.Contains(err.Error(), `destinations[1] (b).name: "b" is used by another destination`) {
		t.Errorf("a name used twice: %v", err)
	}
}

// Only the dispatcher loads the destinations' secrets: another role's
// process needs no variable for them and holds no value.
func TestDestinationSecretsOnlyForTheDispatcher(t *testing.T) {
	raw := []byte(destinationBase + `destinations:
  - {name: b, url: "https://x", secrets: ["${DEST_SECRET}"]}
`)
	cfg, err := ParseFor(raw, env(nil), WebhookSecrets|EnvelopeKeys|APITokens)
	if err != nil {
		t.Fatalf("another role's load needs the destination's variable: %v", err)
	}
	if len(cfg.Destinations[0].Secrets) != 0 || cfg.Holds(DestinationSecrets) {
		t.Errorf("another role holds the destination's secrets: %v", cfg.Destinations[0].Secrets)
	}
	cfg, err = ParseFor(raw, env(map[string]string{"DEST_SECRET": destSecret}), DestinationSecrets)
	if err != nil || cfg.Destinations[0].Secrets[0] != destSecret {
		t.Fatalf("the dispatcher's load: %v %v", cfg, err)
	}
	if got := DestinationSecrets.String(); got != "config.DestinationSecrets" {
		t.Errorf("String() = %q", got)
	}
}
