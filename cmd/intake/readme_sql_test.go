package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"

	"github.com/intakehq/intake/internal/harness/testenv"
	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/replayer/apiclient"
)

// TestReadmeSQLQuickstart runs the README's SQL handler quick start as the
// README writes it, read from README.md: the SQL it shows is the example
// file's, the handler it shows is the example config's, and its commands —
// `intake dev` with that config and --init-sql, two sends of one event, psql
// — leave one payment row. Only the addresses change (a free port each, so
// tests on one host do not collide), and psql's query runs through pgx when
// psql is not installed.
func TestReadmeSQLQuickstart(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	t.Setenv("INTAKE_NATS_URL", "")
	t.Setenv("INTAKE_CONFIG", "")
	t.Chdir("../..") // the README's paths are the repository's
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := readmeSection(t, string(readme), "### A business change in SQL, no Go")

	sqlFile, err := os.ReadFile("examples/payments/payments.sql")
	if err != nil {
		t.Fatal(err)
	}
	if got := fenced(t, section, "sql"); got != strings.TrimSpace(string(sqlFile)) {
		t.Errorf("the README's SQL is not examples/payments/payments.sql:\n%s", got)
	}
	m := regexp.MustCompile("`(handlers: \\[.*\\])`").FindStringSubmatch(section)
	if m == nil {
		t.Fatal("the README's section shows no handlers: line")
	}
	var shown struct{ Handlers []config.Handler }
	if err := yaml.Unmarshal([]byte(m[1]), &shown); err != nil {
		t.Fatalf("the README's handlers: %v", err)
	}
	cfg, err := config.Load("examples/payments/intake.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(shown.Handlers, cfg.Handlers) {
		t.Errorf("the README shows handlers %+v, examples/payments/intake.yaml has %+v", shown.Handlers, cfg.Handlers)
	}

	var cmds [][]string
	for _, line := range strings.Split(fenced(t, section, "sh"), "\n") {
		cmds = append(cmds, shellWords(t, line))
	}
	if len(cmds) != 4 || strings.Join(cmds[0][:4], " ") != "go run ./cmd/intake dev" || cmds[3][0] != "psql" {
		t.Fatalf("the README's commands are not dev, send, send, psql: %q", cmds)
	}

	// Not t.TempDir: Postgres, run as another user under root, must enter it.
	dir, err := os.MkdirTemp("", "intake-readme-sql-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pgPort := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	devOut := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() {
		args := append(cmds[0][3:], "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--nats-addr", "127.0.0.1:0",
			"--postgres-port", strconv.Itoa(pgPort), "--log-level", "warn")
		done <- runCLI(t, ctx, devOut, args...)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("intake dev: %v", err)
		}
	})
	var base string
	testenv.Eventually(t, 90*time.Second, func() bool {
		select {
		case err := <-done:
			done <- nil // for the cleanup's receive
			t.Fatalf("intake dev exited early: %v\n%s", err, devOut.String())
		default:
		}
		m := regexp.MustCompile(`webhooks\s+(http://\S+)/webhooks/`).FindStringSubmatch(devOut.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	}, "intake dev never printed its banner")

	for i, want := range []string{`"status":"accepted"`, `"status":"duplicate"`} {
		c := cmds[1+i]
		if strings.Join(c[:4], " ") != "go run ./cmd/intake send" {
			t.Fatalf("command %d is not intake send: %q", 2+i, c)
		}
		out := &testenv.Buffer{}
		if err := runCLI(t, context.Background(), out, append(c[3:], "--url", base)...); err != nil {
			t.Fatalf("intake send: %v\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), want) {
			t.Fatalf("send %d answered %s, want %s", i+1, out.String(), want)
		}
	}
	api := apiclient.New(base, "dev-operator-token-change-me", nil)
	testenv.Eventually(t, 30*time.Second, func() bool {
		ev, err := api.Event(context.Background(), "demo", "pay_1")
		return err == nil && ev.Status == "processed"
	}, "the payment event was never processed")

	psql := cmds[3]
	if len(psql) != 4 || psql[2] != "-c" {
		t.Fatalf("psql command %q: want psql URL -c QUERY", psql)
	}
	url := strings.Replace(psql[1], "127.0.0.1:54320", "127.0.0.1:"+strconv.Itoa(pgPort), 1)
	if url == psql[1] {
		t.Fatalf("psql's URL %s is not dev's default private Postgres", psql[1])
	}
	if _, err := exec.LookPath("psql"); err == nil {
		out, err := exec.Command("psql", url, "-c", psql[3]).CombinedOutput()
		if err != nil {
			t.Fatalf("psql: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "(1 row)") || !regexp.MustCompile(`demo/main/pay_1\s*\|\s*4200`).Match(out) {
			t.Fatalf("psql shows, want one row demo/main/pay_1 | 4200:\n%s", out)
		}
		return
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), psql[3])
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var key string
	var amount int64
	if _, err := pgx.ForEachRow(rows, []any{&key, &amount}, func() error {
		got = append(got, key+" | "+strconv.FormatInt(amount, 10))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "demo/main/pay_1 | 4200" {
		t.Fatalf("payments holds %q, want one row demo/main/pay_1 | 4200", got)
	}
}

// readmeSection is the README from heading to the next heading.
func readmeSection(t *testing.T, readme, heading string) string {
	t.Helper()
	i := strings.Index(readme, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no %q", heading)
	}
	s := readme[i+len(heading)+2:]
	if j := strings.Index(s, "\n#"); j >= 0 {
		s = s[:j]
	}
	return s
}

// fenced is the body of the section's one ```lang block, trimmed.
func fenced(t *testing.T, section, lang string) string {
	t.Helper()
	parts := strings.Split(section, "```"+lang+"\n")
	if len(parts) != 2 {
		t.Fatalf("want one ```%s block in the README's section, found %d", lang, len(parts)-1)
	}
	body, _, ok := strings.Cut(parts[1], "```")
	if !ok {
		t.Fatalf("unterminated ```%s block", lang)
	}
	return strings.TrimSpace(body)
}

// shellWords splits a command line as sh does for what the README uses:
// words, '…' quoting, and a trailing # comment.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var (
		words []string
		w     strings.Builder
		in    bool // a word started (an empty '' is a word)
	)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				t.Fatalf("unterminated quote in %q", line)
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '#' && !in:
			i = len(line)
		case c == ' ' || c == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
