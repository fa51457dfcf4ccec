package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/pkg/config"
)

// newHealthcheckCmd probes a role's /readyz and exits 0 on a 2xx. The image
// is FROM scratch (no shell, no curl), so a container healthcheck (compose's
// `test: [CMD, …]`, an exec probe) runs the binary itself. Without --url it
// asks the role in the same container: /readyz on http.internal_addr of the
// configuration the role reads.
func newHealthcheckCmd(g *globals) *cobra.Command {
	var (
		url     string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when a role's /readyz answers 2xx (a container healthcheck without a shell)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if url == "" {
				cfg, _, err := g.loadConfig(false, config.NoSecrets)
				if err != nil {
					return err
				}
				if url, err = readyzURL(cfg.HTTP.InternalAddr); err != nil {
					return err
				}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if err := probe(ctx, url); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "intake healthcheck: %v\n", err)
				return exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "url", "", "URL to GET (default: /readyz on the config's http.internal_addr, dialled on loopback when it binds every address)")
	f.DurationVar(&timeout, "timeout", 3*time.Second, "give up after this long")
	return cmd
}

// readyzURL is /readyz on the internal listener as seen from the same host
// or container: a listener on every address is dialled on loopback.
func readyzURL(internalAddr string) (string, error) {
	if internalAddr == "" {
		return "", errors.New("http.internal_addr is not set: pass --url")
	}
	host, port, err := net.SplitHostPort(internalAddr)
	if err != nil {
		return "", fmt.Errorf("http.internal_addr: %w", err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}

func probe(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		// /readyz names the reason (NATS, Postgres, a failed role) in its body.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
