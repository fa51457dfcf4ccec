package intake

import (
	"slices"
	"strings"

	"github.com/intakehq/intake/pkg/envelope"
)

// natsRole names the process to NATS: its inbox prefix ends in it, so the
// server can allow each role its own replies only. One role is its own
// name ("ingress", "processor", "replayer", "dispatcher"); several are joined with "_".
func (r Roles) natsRole() string {
	var names []string
	if r.Ingress {
		names = append(names, "ingress")
	}
	if r.Processor {
		names = append(names, "processor")
	}
	if r.Replayer {
		names = append(names, "replayer")
	}
	if r.Dispatcher {
		names = append(names, "dispatcher")
	}
	return strings.Join(names, "_")
}

// streams are the streams the roles use, which New checks: each role's NATS
// user may read the info of these only.
func (r Roles) streams() []string {
	var s []string
	add := func(names ...string) {
		for _, n := range names {
			if !slices.Contains(s, n) {
				s = append(s, n)
			}
		}
	}
	if r.Ingress {
		add(envelope.StreamIn, envelope.StreamReceipts)
	}
	if r.Processor {
		add(envelope.StreamIn, envelope.StreamOut, envelope.StreamReceipts)
	}
	if r.Replayer {
		add(envelope.StreamIn, envelope.StreamOut)
	}
	if r.Dispatcher {
		add(envelope.StreamOut)
	}
	return s
}
