package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/intakehq/intake/replayer/apiclient"
)

// TestStatusCommand (issue 34 item 3): `intake status` prints the
// backlog and each integration's last hour; -o json is the API's answer.
func TestStatusCommand(t *testing.T) {
	t.Parallel()
	r := startOperatorRig(t)
	r.publish("evt_1", "evt_2", "evt_3")

	out, errOut, code := r.cli("", cliViewer, "status", "-o", "json")
	var s apiclient.Status
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
		t.Fatalf("status -o json: exit %d\n%s%s", code, out, errOut)
	}
	if len(s.Integrations) != 1 || s.Integrations[0].Name != "demo" || s.Integrations[0].Accepted != 3 ||
		s.Integrations[0].PerSecond <= 0 || s.Stream.Durable != "processor" || s.Window != "1h0m0s" {
		t.Fatalf("status = %+v", s)
	}
	out, _, code = r.cli("", cliViewer, "status")
	if code != 0 || !strings.Contains(out, "INTAKE_IN (durable processor)") || !strings.Contains(out, "RETRYING NOW") ||
		!strings.Contains(out, "demo") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
}
