package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/internal/harness/dev"
	"github.com/intakehq/intake/pkg/config"
)

// TestFlagDefaultsAreTheNamedDefaults: --help shows the values the
// constructors apply, read from the same constants.
func TestFlagDefaultsAreTheNamedDefaults(t *testing.T) {
	g := &globals{}
	devFlags := newDevCmd(g).Flags()
	for flag, want := range map[string]string{
		"data-dir":      dev.DefaultDataDir,
		"http-addr":     dev.DefaultHTTPAddr,
		"nats-addr":     dev.DefaultNATSAddr,
		"postgres-port": strconv.Itoa(dev.DefaultPostgresPort),
	} {
		if got := devFlags.Lookup(flag).DefValue; got != want {
			t.Errorf("intake dev --%s defaults to %q, want %q", flag, got, want)
		}
	}
	if usage := newIngressCmd(g).Flags().Lookup("http-addr").Usage; !strings.Contains(usage, config.DefaultIngressAddr) {
		t.Errorf("intake ingress --http-addr usage %q does not name ingress.addr's default %q", usage, config.DefaultIngressAddr)
	}
	for name, c := range map[string]struct {
		cmd  *cobra.Command
		want string
	}{
		"processor":       {newProcessorCmd(g), config.DefaultProcessorHTTPAddr},
		"replayer":        {newReplayerCmd(g), config.DefaultReplayerHTTPAddr},
		"chaos processor": {newChaosProcessorCmd(g), config.DefaultProcessorHTTPAddr},
	} {
		if got := c.cmd.Flags().Lookup("http-addr").DefValue; got != c.want {
			t.Errorf("intake %s --http-addr defaults to %q, want %q", name, got, c.want)
		}
	}
}
