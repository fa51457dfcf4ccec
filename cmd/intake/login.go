package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/replayer/apiclient"
)

// cliContext is what `intake login` saves: the replayer API and a token,
// used by every operator command that is given neither (flags and the
// INTAKE_SERVER and INTAKE_TOKEN variables win).
type cliContext struct {
	Server string `json:"server"`
	Token  string `json:"token"`
}

// cliContextPath is $INTAKE_CLI_CONTEXT, else intake/context.json in the
// user's config directory ($XDG_CONFIG_HOME, ~/.config on Linux).
func cliContextPath() (string, error) {
	if p := os.Getenv("INTAKE_CLI_CONTEXT"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "intake", "context.json"), nil
}

// loadCLIContext reads the saved context; none saved is the zero context.
func loadCLIContext() (cliContext, error) {
	var c cliContext
	p, err := cliContextPath()
	if err != nil {
		return c, nil
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("saved login %s: %w", p, err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("saved login %s: %w (intake logout removes it)", p, err)
	}
	return c, nil
}

func newLoginCmd() *cobra.Command {
	var server string
	cmd := &cobra.Command{
		Use:   "login --server URL",
		Short: "Save a replayer API URL and token for the operator commands (read from stdin)",
		Long: `login reads an API token from stdin (one line; a prompt when stdin is a terminal),
checks it against --server (GET /api/v1/status), and saves both in
$XDG_CONFIG_HOME/intake/context.json (~/.config/intake/context.json; $INTAKE_CLI_CONTEXT
overrides the path), readable by you alone (0600). The operator commands then use
them when given no --server/--token and no INTAKE_SERVER/INTAKE_TOKEN. The token is
stored as given, like kubectl's and gh's: "intake logout" removes it.`,
		Example: `  printf %s "$OPS_TOKEN" | intake login --server https://intake-replayer.internal`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 && cmd.InOrStdin() == os.Stdin {
				fmt.Fprint(cmd.ErrOrStderr(), "API token: ")
			}
			line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
			token := strings.TrimSpace(line)
			if token == "" {
				if err != nil && !errors.Is(err, io.EOF) {
					return err
				}
				return errors.New("no token on stdin")
			}
			api := apiclient.New(server, token, &http.Client{Timeout: apiTimeout})
			if _, err := api.Status(cmd.Context()); err != nil {
				return fail(cmd, err)
			}
			p, err := cliContextPath()
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				return err
			}
			b, _ := json.MarshalIndent(cliContext{Server: server, Token: token}, "", "  ")
			tmp := p + ".tmp"
			if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
				return err
			}
			if err := os.Rename(tmp, p); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "logged in to %s; saved in %s\n", server, p)
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", defaultAPI, "replayer API base URL")
	return cmd
}

func newLogoutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Remove the API URL and token `intake login` saved",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := cliContextPath()
			if err != nil {
				return err
			}
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", p)
			return nil
		},
	}
}
