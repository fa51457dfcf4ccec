package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/internal/harness/testenv"
)

// TestLoginSavesAContext (issue 34 item 9): `intake login` checks the token
// and saves server and token (0600); the operator commands then need no
// flags; `intake logout` removes it. Not parallel: it sets the environment.
func TestLoginSavesAContext(t *testing.T) {
	r := startOperatorRig(t)
	r.publish("evt_1")
	path := filepath.Join(t.TempDir(), "cfg", "context.json")
	t.Setenv("INTAKE_CLI_CONTEXT", path)
	t.Setenv("INTAKE_TOKEN", "")
	t.Setenv("INTAKE_SERVER", "")
	run := func(stdin string, args ...string) (string, int) {
		root := newRoot()
		var out bytes.Buffer
		root.SetArgs(args)
		root.SetIn(strings.NewReader(stdin))
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.ExecuteContext(context.Background())
		code := 0
		if ee, ok := err.(exitError); ok {
			code = ee.code
		} else if err != nil {
			code = 1
			out.WriteString(err.Error())
		}
		return out.String(), code
	}

	if out, code := run("not-a-token-0123456789\n", "login", "--server", r.base); code != codeRefused || !strings.Contains(out, "401") {
		t.Fatalf("login with a bad token: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a refused login saved a context (%v)", err)
	}
	if out, code := run("", "events"); code != 1 || !strings.Contains(out, "intake login") {
		t.Fatalf("no token, no login: exit %d\n%s", code, out)
	}
	if out, code := run(cliViewer+"\n", "login", "--server", r.base); code != 0 || !strings.Contains(out, "logged in to "+r.base) {
		t.Fatalf("login: exit %d\n%s", code, out)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("saved context: %v, mode %v; want 0600", err, fi.Mode())
	}
	if out, code := run("", "events"); code != 0 || !strings.Contains(out, "demo/main/evt_1") {
		t.Fatalf("events after login: exit %d\n%s", code, out)
	}
	if out, code := run("", "logout"); code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("logout: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("logout left the context (%v)", err)
	}
}

// TestFlagCompletion (issue 34 item 9): --integration completes from the
// API, --status and -o from their fixed values.
func TestFlagCompletion(t *testing.T) {
	t.Parallel()
	r := startOperatorRig(t)
	complete := func(args ...string) string {
		root := newRoot()
		var out bytes.Buffer
		root.SetArgs(append([]string{"__complete"}, args...))
		root.SetOut(&out)
		root.SetErr(&bytes.Buffer{})
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("__complete %v: %v", args, err)
		}
		return out.String()
	}
	if out := complete("events", "--server", r.base, "--token", cliViewer, "--integration", ""); !strings.Contains(out, "demo\n") {
		t.Errorf("--integration completes to %q, want demo", out)
	}
	if out := complete("events", "--status", "fa"); !strings.Contains(out, "failed\n") || !strings.Contains(out, "retrying\n") {
		t.Errorf("--status completes to %q", out)
	}
	if out := complete("failures", "-o", ""); !strings.Contains(out, "json\n") {
		t.Errorf("-o completes to %q", out)
	}
}

// TestOutputFormats (issue 34 item 9): -o yaml has the API's field names,
// -o wide adds columns, --no-headers drops the header row, an unknown -o
// names the choices, and the next page's hint goes to stderr.
func TestOutputFormats(t *testing.T) {
	t.Parallel()
	r := startOperatorRig(t)
	r.publish("evt_1")
	out, _, code := r.cli("", cliViewer, "events", "-o", "yaml")
	if code != 0 || !strings.Contains(out, "events:\n") || !strings.Contains(out, "key: demo/main/evt_1") || !strings.Contains(out, "first_received_at:") {
		t.Errorf("-o yaml: exit %d\n%s", code, out)
	}
	out, _, code = r.cli("", cliViewer, "events", "-o", "wide")
	if code != 0 || !strings.Contains(out, "PAYLOAD SHA256") || !strings.Contains(out, "LAST RECEIVED") {
		t.Errorf("-o wide: exit %d\n%s", code, out)
	}
	out, _, code = r.cli("", cliViewer, "events", "--no-headers")
	if code != 0 || strings.Contains(out, "KEY") || !strings.HasPrefix(out, "demo/main/evt_1") {
		t.Errorf("--no-headers: exit %d\n%q", code, out)
	}
	_, errOut, code := r.cli("", cliViewer, "events", "-o", "xml")
	if code != 1 || !strings.Contains(errOut, "table, wide, json, yaml") {
		t.Errorf("-o xml: exit %d\n%s", code, errOut)
	}
	// The way to the next page is a hint on stderr: stdout stays the table.
	r.publish("evt_2")
	testenv.Eventually(t, 30*time.Second, func() bool { return r.count(`SELECT count(*) FROM intake.inbox`) == 2 }, "evt_2 never processed")
	out, errOut, code = r.cli("", cliViewer, "events", "--limit", "1", "--no-headers")
	if code != 0 || strings.Count(out, "\n") != 1 || strings.Contains(out, "cursor") || !strings.Contains(errOut, "more: add --cursor ") {
		t.Errorf("a page's hint: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
}
