package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

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
}

func newSendCmd(g *globals) *cobra.Command {
	var o sendOptions
	cmd := &cobra.Command{
		Use:   "send",
		Short: "Sign a payload with an integration's secret and POST it, like a provider would",
		Long: `send signs a payload exactly as the integration's provider does and POSTs it to
{url}/webhooks/{integration}. Without --data or --file it sends a small JSON event
whose body depends only on --id and --type, so sending the same --id twice is the
same delivery twice (answered "duplicate").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := g.loadConfig(true)
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
			body, err := o.body(in.EventID)
			if err != nil {
				return err
			}
			hdr, err := provider.Sign(in.Config, o.secretIndex, o.id, body, time.Now())
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
			fmt.Fprintf(out, "send it again (same delivery):  intake send --integration %s --id %s\n", in.Name, o.id)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.integration, "integration", "", "integration name (default: the first in the config)")
	f.StringVar(&o.url, "url", "http://127.0.0.1:8080", "base URL of ingress")
	f.StringVar(&o.data, "data", "", "JSON body to send (default: a small demo event)")
	f.StringVar(&o.file, "file", "", "read the body from this file")
	f.StringVar(&o.id, "id", "", "event id (default: random)")
	f.StringVar(&o.eventType, "type", "demo.created", "event type for the default body")
	f.IntVar(&o.secretIndex, "secret-index", 0, "which of the integration's secrets signs (rotation tests)")
	return cmd
}

// body returns the payload. The default body depends only on the id and the
// type, so two sends with the same --id are the same delivery.
func (o *sendOptions) body(idField provider.Field) ([]byte, error) {
	switch {
	case o.data != "" && o.file != "":
		return nil, fmt.Errorf("--data and --file are exclusive")
	case o.data != "":
		return []byte(o.data), nil
	case o.file != "":
		return os.ReadFile(o.file)
	}
	ev := map[string]any{
		"type": o.eventType,
		"data": map[string]any{"message": "hello from intake send"},
	}
	idKey := "id"
	if idField.Field != "" && !strings.Contains(idField.Field, ".") {
		idKey = idField.Field
	}
	ev[idKey] = o.id
	return json.Marshal(ev)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
