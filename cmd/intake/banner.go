package main

import (
	"fmt"
	"io"
	"net/url"

	"github.com/intakehq/intake/internal/harness/dev"
	"github.com/intakehq/intake/pkg/config"
)

// printDevBanner says what runs and where; its commands start with self
// (globals.self: go run or the binary); send's also carries this run's
// --config (sendSelf).
func printDevBanner(w io.Writer, self, sendSelf, path string, cfg *config.Config, info dev.Info) {
	nats := info.NATSURL
	if info.NATSEmbed {
		nats += "  (embedded, data in " + info.DataDir + "/nats)"
		// Say what a 2xx survives here: the embedded server's fsync policy.
		if cfg.NATS.SyncAlways {
			nats += "\n             fsync before every PubAck (nats.sync_always: true)"
		} else {
			nats += "\n             fsync every 2 minutes (nats.sync_always: false, fast, for a laptop): a power loss" +
				"\n             can lose acknowledged events; production configs sync before every PubAck"
		}
	}
	pg := redactURL(info.DatabaseURL)
	if info.PGPrivate {
		pg += "  (private cluster, data in " + info.DataDir + "/postgres)"
	}
	fmt.Fprintf(w, "\nintake dev is ready\n")
	fmt.Fprintf(w, "  config     %s\n", path)
	fmt.Fprintf(w, "  webhooks   %s/webhooks/{integration}\n", info.HTTPURL)
	fmt.Fprintf(w, "  api        %s/api/v1/events/{integration}/{event_id}  (bearer token from api.tokens)\n", info.HTTPURL)
	fmt.Fprintf(w, "  console    %s/ui/  (sign in with a token from api.tokens)\n", info.HTTPURL)
	fmt.Fprintf(w, "  metrics    %s/metrics\n", info.HTTPURL)
	fmt.Fprintf(w, "  nats       %s\n", nats)
	fmt.Fprintf(w, "  postgres   %s\n", pg)
	width := 0
	for _, in := range cfg.Integrations {
		width = max(width, len(in.Name))
	}
	for _, in := range cfg.Integrations {
		fmt.Fprintf(w, "  integration %-*s  provider %-8s tenant %s\n", width, in.Name, in.Provider, in.Tenant)
	}
	if len(cfg.Integrations) > 0 {
		name := cfg.Integrations[0].Name
		fmt.Fprintf(w, "\nsend a signed test event:\n  %s send --integration %s --url %s\n", sendSelf, name, info.HTTPURL)
		fmt.Fprintf(w, "try a failure (quarantined on purpose; demo.fail fails, demo.flaky retries; a replay processes it):\n  %s send --integration %s --type demo.quarantine --url %s\n",
			sendSelf, name, info.HTTPURL)
		fmt.Fprintf(w, "watch processed events:\n  nats sub --server %s 'intake.out.>'\n", info.NATSURL)
		// Never the token itself: it may be a real secret from the environment.
		fmt.Fprintf(w, "inspect and replay (INTAKE_TOKEN = an operator token from api.tokens; the example's is dev-operator-token-change-me):\n  INTAKE_TOKEN=... %s events --server %s\n", self, info.HTTPURL)
	}
	fmt.Fprintf(w, "\nCtrl-C stops (drains in-flight work first).\n\n")
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Redacted()
}
