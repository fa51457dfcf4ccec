package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/provider"
)

type sendOptions struct {
	integration string
	url         string
	data        string
	file        string
	id          string
	eventType   string
	secretIndex int
	secret      string
}

// again is the command that sends the same delivery once more: the same
// integration, id and body (the flags that make it: --type, --data,
// --file), to the same --url, signed with the same secret.
func (o sendOptions) again(cmd *cobra.Command, self, integration string) string {
	s := self + " send --integration " + shellQuote(integration) + " --id " + shellQuote(o.id)
	for _, name := range []string{"url", "type", "data", "file", "secret-index"} {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			s += " --" + name + " " + shellQuote(f.Value.String())
		}
	}
	if o.secret != "" {
		s += " --secret …" // a key: not echoed
	}
	return s
}

func newSendCmd(g *globals) *cobra.Command {
	var o sendOptions
	cmd := &cobra.Command{
		Use:   "send",
		Short: "Sign a payload with an integration's secret and POST it, like a provider would",
		Long: `send signs a payload exactly as the integration's provider does (standard, svix,
stripe, github, shopify, slack, hmac) and POSTs it to {url}/webhooks/{integration}.
Without --data or --file it sends a small JSON event in the provider's shape whose
body depends only on --id and --type, so sending the same --id twice is the same
delivery twice (answered "duplicate") — except where the provider signs its send
time inside the body (linear's webhookTimestamp): that is set to now, so a second
send is another body under the same id. --type also fills the provider's type
header (X-GitHub-Event, X-Shopify-Topic).

A Standard Webhooks integration verifying ed25519 (whpk_ public key) cannot sign
with its configured key: pass the sender's key with --secret whsk_….`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := g.loadConfig(true, config.WebhookSecrets)
			if err != nil {
				return err
			}
			if len(cfg.Integrations) == 0 {
				return fmt.Errorf("config has no integrations")
			}
			in := cfg.Integrations[0]
			if o.integration != "" {
				var ok bool
				if in, ok = cfg.Integration(o.integration); !ok {
					return fmt.Errorf("no integration %q in config", o.integration)
				}
			}
			if o.id == "" {
				o.id = "evt_" + randomHex(8)
			}
			body, err := o.body(in.Config)
			if err != nil {
				return err
			}
			pc := in.Config
			if o.secret != "" {
				// Sign with the given key in place of the chosen secret.
				if o.secretIndex < 0 || o.secretIndex >= len(pc.Secrets) {
					return fmt.Errorf("--secret-index %d: the integration has %d secrets", o.secretIndex, len(pc.Secrets))
				}
				pc.Secrets = append([]string(nil), pc.Secrets...)
				pc.Secrets[o.secretIndex] = o.secret
			}
			hdr, err := provider.SignMessage(pc, o.secretIndex, provider.Message{ID: o.id, Type: o.eventType, Body: body, Time: time.Now()})
			if err != nil {
				return err
			}
			target := strings.TrimRight(o.url, "/") + "/webhooks/" + in.Name
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodPost, target, bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header = hdr
			resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
			if err != nil {
				return fmt.Errorf("POST %s: %w (is `intake dev` running?)", target, err)
			}
			defer resp.Body.Close()
			answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "POST %s  event %s\n%s %s", target, o.id, resp.Status, answer)
			if resp.StatusCode/100 != 2 {
				return exitError{code: 2}
			}
			fmt.Fprintf(out, "send it again (same delivery):  %s\n", o.again(cmd, g.self(true), in.Name))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.integration, "integration", "", "integration name (default: the first in the config)")
	f.StringVar(&o.url, "url", defaultAPI, "base URL of ingress")
	f.StringVar(&o.data, "data", "", "JSON body to send (default: a small demo event)")
	f.StringVar(&o.file, "file", "", "read the body from this file")
	f.StringVar(&o.id, "id", "", "event id (default: random)")
	f.StringVar(&o.eventType, "type", "demo.created", "event type for the default body")
	f.IntVar(&o.secretIndex, "secret-index", 0, "which of the integration's secrets signs (rotation tests)")
	f.StringVar(&o.secret, "secret", "", "sign with this secret instead (e.g. a whsk_ ed25519 key for a whpk_ integration)")
	return cmd
}

// body returns the payload. The default body depends only on the id and the
// type, so two sends with the same --id are the same delivery, but for a
// send time signed inside the body (provider.StampBody), which is now.
func (o *sendOptions) body(cfg provider.Config) ([]byte, error) {
	switch {
	case o.data != "" && o.file != "":
		return nil, fmt.Errorf("--data and --file are exclusive")
	case o.data != "":
		return []byte(o.data), nil
	case o.file != "":
		return os.ReadFile(o.file)
	}
	return provider.StampBody(cfg, provider.SampleBody(cfg, o.id, o.eventType), time.Now())
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
