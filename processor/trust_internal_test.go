package processor

import (
	"testing"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
)

func TestCheckEnvelope(t *testing.T) {
	integrations := map[string]*integration{
		"demo":    {name: "demo", tenant: "acme"},
		"partner": {name: "partner", tenant: "globex"},
	}
	demo := envelope.Key{Integration: "demo", Account: "main", EventID: "evt_1"}
	for _, c := range []struct {
		name    string
		key     envelope.Key
		tenant  string
		subject string
		want    string
	}{
		{"as ingress publishes", demo, "acme", envelope.SubjectIn("demo", "invoice.paid"), ""},
		{"any event type token", demo, "acme", "intake.in.demo.a.b", ""},
		{"unconfigured integration", envelope.Key{Integration: "ghost", EventID: "e"}, "acme", "intake.in.ghost.x", store.RejectUnknownIntegration},
		{"another integration's tenant", demo, "globex", "intake.in.demo.x", store.RejectTenantMismatch},
		{"no tenant", demo, "", "intake.in.demo.x", store.RejectTenantMismatch},
		{"tenant differs in case", demo, "ACME", "intake.in.demo.x", store.RejectTenantMismatch},
		{"another integration's subject", demo, "acme", "intake.in.partner.x", store.RejectSubjectMismatch},
		{"a longer integration's subject", demo, "acme", "intake.in.demo2.x", store.RejectSubjectMismatch},
		{"no event type token", demo, "acme", "intake.in.demo", store.RejectSubjectMismatch},
		{"not INTAKE_IN", demo, "acme", "intake.out.acme.demo.x", store.RejectSubjectMismatch},
	} {
		got, detail := checkEnvelope(integrations, c.key, c.tenant, c.subject)
		if got != c.want {
			t.Errorf("%s: %q (%s), want %q", c.name, got, detail, c.want)
		}
		if got != "" && detail == "" {
			t.Errorf("%s: no detail", c.name)
		}
	}
	if got, _ := checkEnvelope(nil, demo, "acme", "intake.in.demo.x"); got != store.RejectUnknownIntegration {
		t.Errorf("no integrations configured: %q, want %q", got, store.RejectUnknownIntegration)
	}
}
