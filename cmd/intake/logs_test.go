package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intakehq/intake/pkg/telemetry"
)

// TestFatalStartErrorIsAJSONLine: under --log-format json the error that
// ends a role's start is a JSON line with the role and the instance, as
// every other line of that process; in text it stays "intake: <error>".
func TestFatalStartErrorIsAJSONLine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "intake.yaml")
	if err := os.WriteFile(path, []byte("integrations:\n  - {name: demo, provider: nosuch, tenant: acme, secrets: [s]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(format string) (stderr []byte) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestIntakeMain$", "--",
			"ingress", "--config", path, "--log-format", format)
		cmd.Env = append(os.Environ(), runMainEnv+"=1", "INTAKE_INSTANCE=pod-7")
		var out bytes.Buffer
		cmd.Stderr = &out
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("--log-format %s: exited with %v, want status 1:\n%s", format, err, out.Bytes())
		}
		return out.Bytes()
	}

	lines := bytes.Split(bytes.TrimSpace(run("json")), []byte("\n"))
	last := lines[len(lines)-1]
	var line map[string]any
	if err := json.Unmarshal(last, &line); err != nil {
		t.Fatalf("the last stderr line is not JSON (%v): %s", err, last)
	}
	for k, want := range map[string]string{"level": "ERROR", "msg": "intake: exiting", "role": "ingress", "instance": "pod-7"} {
		if line[k] != want {
			t.Errorf("%s = %v, want %q in %s", k, line[k], want, last)
		}
	}
	if e, _ := line["err"].(string); !strings.Contains(e, "nosuch") {
		t.Errorf("err = %q, want the config error naming the provider", e)
	}
	// role and instance on every line, once each (a second "role" — a
	// token's, a sub-role's — would overwrite the process's in a parser).
	for _, l := range lines {
		if bytes.Count(l, []byte(`"role":`)) != 1 || bytes.Count(l, []byte(`"instance":`)) != 1 {
			t.Errorf("a line without its role and instance, or with two: %s", l)
		}
	}

	text := run("text")
	if !bytes.HasPrefix(bytes.TrimSpace(text), []byte("intake: ")) || !bytes.Contains(text, []byte("nosuch")) {
		t.Errorf("text: %s, want \"intake: <the config error>\"", text)
	}
}

// TestLogLinesLeaveEmptyFieldsOut: an empty string field is not printed
// (in either format); the built-in keys and non-string zero values are.
func TestLogLinesLeaveEmptyFieldsOut(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var b bytes.Buffer
		telemetry.NewLogger(&b, format, "info").With("role", "").Info("replay recorded", "requested_by", "", "replay_id", "r1", "published", 0)
		got := b.String()
		if strings.Contains(got, "requested_by") || strings.Contains(got, "role") {
			t.Errorf("%s: an empty field was printed: %s", format, got)
		}
		for _, want := range []string{"replay_id", "r1", "published", "replay recorded", "INFO"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s: %q missing from %s", format, want, got)
			}
		}
	}
}
