package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/intakehq/intake/replayer/apiclient"
)

// The operator commands (replay, redeliver, reconcile, events, conflicts)
// call the replayer's API through apiclient and print its answers; what
// they share lives here: the API flags, the exit codes and the printers.

// Exit codes of the operator commands. Scripts tell "the API said no" from
// "it ran but not fully".
const (
	codeError    = 1 // usage, connection, a declined confirmation, or nothing matched (events find, events search, conflicts show)
	codeRefused  = 2 // the API answered an error (4xx/5xx)
	codePartial  = 3 // finished, but not everything: events missing from the stream, cancelled; reconcile found missing events
	codeFailed   = 4 // the replay failed
	outputTable  = "table"
	outputWide   = "wide"
	outputJSON   = "json"
	outputYAML   = "yaml"
	pollInterval = 500 * time.Millisecond
	// apiTimeout bounds one API call: dry runs of large ranges take a while.
	apiTimeout = 5 * time.Minute
)

// apiFlags are --server, --token and -o, which every operator command takes.
type apiFlags struct {
	cmd       *cobra.Command
	server    string
	token     string
	output    string
	noHeaders bool
}

// addAPIFlags adds --server, --token and -o to cmd; defaults come from
// INTAKE_SERVER and INTAKE_TOKEN, else what `intake login` saved.
func addAPIFlags(cmd *cobra.Command) *apiFlags {
	a := &apiFlags{cmd: cmd}
	f := cmd.Flags()
	f.StringVar(&a.server, "server", defaultAPI, "replayer API base URL (default: env INTAKE_SERVER, else `intake login`'s, else "+defaultAPI+")")
	f.StringVar(&a.token, "token", "", "API bearer token (default: env INTAKE_TOKEN)")
	f.StringVarP(&a.output, "output", "o", outputTable, "output: table, wide (a list's extra columns), json or yaml (the API's answer)")
	f.BoolVar(&a.noHeaders, "no-headers", false, "a list's table without its header row (for scripts)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputs, cobra.ShellCompDirectiveNoFileComp))
	return a
}

// outputs are -o's values.
var outputs = []string{outputTable, outputWide, outputJSON, outputYAML}

// structured reports whether -o asks for the API's answer (json, yaml)
// rather than a table.
func (a *apiFlags) structured() bool { return a.output == outputJSON || a.output == outputYAML }

// emit writes v, the API's answer, as -o asks: JSON, or YAML with the same
// field names in the same order.
func (a *apiFlags) emit(w io.Writer, v any) error {
	if a.output == outputYAML {
		return printYAML(w, v)
	}
	return printJSON(w, v)
}

// table is a list's table writer; with --no-headers its first line (the
// header row) is left out.
func (a *apiFlags) table(w io.Writer) *tabwriter.Writer {
	if a.noHeaders {
		w = &skipFirstLine{w: w}
	}
	return newTable(w)
}

// skipFirstLine drops what is written up to and including the first newline.
type skipFirstLine struct {
	w    io.Writer
	done bool
}

func (s *skipFirstLine) Write(p []byte) (int, error) {
	if s.done {
		return s.w.Write(p)
	}
	i := bytes.IndexByte(p, '\n')
	if i < 0 {
		return len(p), nil
	}
	s.done = true
	if _, err := s.w.Write(p[i+1:]); err != nil {
		return 0, err
	}
	return len(p), nil
}

// printYAML writes v as YAML: through its JSON (the API's field names and
// order), re-encoded in block style.
func printYAML(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return err
	}
	blockStyle(&doc)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	return enc.Close()
}

// blockStyle clears the styles JSON input gives every node (flow
// collections, double-quoted strings): the encoder then writes block
// style and quotes only the strings that would read as another type.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// completeIntegrations completes --integration with the names the API
// answers for (GET /api/v1/status), through the command's own --server
// and token; nothing when it cannot ask within two seconds.
func (a *apiFlags) completeIntegrations(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	api, err := a.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
	defer cancel()
	s, err := api.Status(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]string, 0, len(s.Integrations))
	for _, in := range s.Integrations {
		names = append(names, in.Name)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completeFlagIntegration registers completeIntegrations for cmd's --integration.
func (a *apiFlags) completeFlagIntegration(cmd *cobra.Command) {
	_ = cmd.RegisterFlagCompletionFunc("integration", a.completeIntegrations)
}

// client checks the flags and returns a client of the API they name.
func (a *apiFlags) client() (*apiclient.Client, error) {
	if a.token == "" {
		a.token = os.Getenv("INTAKE_TOKEN") // not a flag default: --help would print it
	}
	if !a.cmd.Flags().Changed("server") {
		if env := os.Getenv("INTAKE_SERVER"); env != "" {
			a.server = env
		} else if a.token == "" {
			// The saved login, whole: its token is for its server.
			saved, err := loadCLIContext()
			if err != nil {
				return nil, err
			}
			if saved.Token != "" {
				a.server, a.token = saved.Server, saved.Token
			}
		}
	}
	if a.token == "" {
		return nil, errors.New("no API token: pass --token, set INTAKE_TOKEN, or run `intake login`")
	}
	if !slices.Contains(outputs, a.output) {
		return nil, fmt.Errorf("--output: one of %s, got %q", strings.Join(outputs, ", "), a.output)
	}
	return apiclient.New(a.server, a.token, &http.Client{Timeout: apiTimeout}), nil
}

// fail turns an API call's error into what the command returns: an answer
// outside 2xx is printed and exits codeRefused; no connection names the
// flag to check.
func fail(cmd *cobra.Command, err error) error {
	var ae *apiclient.Error
	if errors.As(err, &ae) {
		fmt.Fprintln(cmd.ErrOrStderr(), "intake:", err)
		return exitError{code: codeRefused}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%w (is the replayer running? --server)", err)
	}
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// parseWhen reads a time flag: RFC 3339, or a duration meaning that long
// ago ("2h" is two hours before now, "2d" two days: apiclient.Ago).
func parseWhen(flag, s string, now time.Time) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return &t, nil
	}
	if d, ok := apiclient.Ago(s); ok {
		t := now.Add(-d)
		return &t, nil
	}
	return nil, fmt.Errorf("--%s: an RFC 3339 time or a duration ago (e.g. 2h, 30m, 2d), got %q", flag, s)
}

// parseSpan reads --since and --until as parseWhen does; an unset one is
// the zero time (the API's "no bound").
func parseSpan(since, until string, now time.Time) (from, to time.Time, err error) {
	s, err := parseWhen("since", since, now)
	if err != nil {
		return from, to, err
	}
	u, err := parseWhen("until", until, now)
	if err != nil {
		return from, to, err
	}
	if s != nil {
		from = *s
	}
	if u != nil {
		to = *u
	}
	return from, to, nil
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// isTerminal reports whether w is a character device (progress may then
// rewrite its line).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
