package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/telemetry"
)

// loadConfig reads --config, else $INTAKE_CONFIG, with the secrets in want
// only (config.LoadFor: another role's unset ${VAR} does not stop this one);
// when allowExample, it falls back to the example built into the binary
// (config.Example), so `intake dev` and `intake send` work with no flags.
func (g *globals) loadConfig(allowExample bool, want config.Secrets) (*config.Config, string, error) {
	path := g.configPath
	if path == "" {
		path = os.Getenv("INTAKE_CONFIG")
	}
	if path == "" && allowExample {
		cfg, err := config.ParseFor(config.Example, os.LookupEnv, want)
		if err != nil {
			return nil, "", fmt.Errorf("built-in example config: %w", err)
		}
		return cfg, "(built-in example, " + config.ExamplePath + ")", nil
	}
	if path == "" {
		return nil, "", errors.New("no configuration: pass --config FILE or set INTAKE_CONFIG")
	}
	cfg, err := config.LoadFor(path, want)
	return cfg, path, err
}

// refusePublishedSecrets fails when cfg holds a secret the repository
// publishes (the defaults of config.Example, built into the binary):
// every production role calls it at start; `intake dev` does not, so the
// example runs out of the box.
func refusePublishedSecrets(cfg *config.Config) error {
	if err := cfg.CheckNoPublishedSecrets(); err != nil {
		return fmt.Errorf("refusing to start with secrets anyone can read (fine for `intake dev` only):\n%w", err)
	}
	return nil
}

// logger is the command's logger. In JSON every line also names the role
// (the command: ingress, processor, replayer, dev, migrate, …) and the
// instance (the host name, a pod's name in Kubernetes), so that lines from
// many pods merged in one store still say where they came from; the text
// format, read by a person at one terminal, leaves them out.
func (g *globals) logger() *slog.Logger {
	log := telemetry.NewLogger(os.Stderr, g.logFormat, g.logLevel)
	if g.logFormat == "json" {
		log = log.With("role", g.command, "instance", instanceName())
	}
	return log
}

// self is how to run this binary again in a hint: "go run ./cmd/intake"
// when it was built by `go run` (or is a test binary), else its name as it
// was started ("intake", "./bin/intake"); withConfig adds --config when one
// was given, so that a hint's command loads the same integrations.
func (g *globals) self(withConfig bool) string {
	s := os.Args[0]
	if strings.Contains(s, "go-build") || strings.HasSuffix(s, ".test") {
		s = "go run ./cmd/intake"
	} else {
		s = shellQuote(s)
	}
	if withConfig && g.configPath != "" {
		s += " --config " + shellQuote(g.configPath)
	}
	return s
}

// instanceName is $INTAKE_INSTANCE, else the host name.
func instanceName() string {
	if v := os.Getenv("INTAKE_INSTANCE"); v != "" {
		return v
	}
	h, _ := os.Hostname()
	return h
}
