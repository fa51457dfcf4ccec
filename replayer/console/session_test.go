package console

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestCookieFlags: HttpOnly and SameSite=Strict always; Secure with the
// __Host- prefix and Path=/ over TLS and for any host but a loopback one
// over plain HTTP (an Ingress terminating TLS); the bare name on /ui/ over
// plain HTTP to loopback only. A secure request does not read the bare
// name.
func TestCookieFlags(t *testing.T) {
	for _, tc := range []struct {
		name   string
		host   string
		tls    bool
		secure bool
	}{
		{"http loopback", "127.0.0.1:8080", false, false},
		{"http localhost", "localhost:8080", false, false},
		{"http localhost without port", "localhost", false, false},
		{"http ipv6 loopback", "[::1]:8080", false, false},
		{"http a name under localhost", "intake.localhost:8080", false, false},
		{"https loopback", "127.0.0.1:8443", true, true},
		{"http public name (TLS ended by the Ingress)", "intake.example.com", false, true},
		{"http public name with port", "intake.example.com:8080", false, true},
		{"http private address", "10.0.0.7:8080", false, true},
		{"http a name that only starts like localhost", "localhost.example.com", false, true},
		{"https public name", "intake.example.com", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/ui/signin", nil)
			r.Host = tc.host
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			w := httptest.NewRecorder()
			setCookie(w, r, sessionCookie, "v", time.Now().Add(time.Hour))
			c := w.Result().Cookies()[0]
			name, path := "intake_console", "/ui/"
			if tc.secure {
				name, path = "__Host-intake_console", "/"
			}
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != tc.secure || c.Path != path || c.Name != name || c.Domain != "" {
				t.Fatalf("cookie %+v: want %s, HttpOnly, SameSite=Strict, Secure=%v, Path=%s, no Domain", c, name, tc.secure, path)
			}
			r.AddCookie(&http.Cookie{Name: "intake_console", Value: "bare"})
			v, ok := readCookie(r, sessionCookie)
			if tc.secure && ok {
				t.Errorf("a secure request read the unprefixed cookie (%q)", v)
			}
			if !tc.secure && (!ok || v != "bare") {
				t.Errorf("a loopback request did not read its cookie: %q, %v", v, ok)
			}
		})
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "/ui/",
		"/ui/events?status=x":  "/ui/events?status=x",
		"https://evil.example": "/ui/",
		"//evil.example/ui/":   "/ui/",
		"/api/v1/events":       "/ui/",
		"/ui/\\evil":           "/ui/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDiffLines(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		want []string // op per row
	}{
		{"same", "a\nb", "a\nb", []string{"same", "same"}},
		{"changed value", "{\n  \"amount\": 1,\n  \"id\": \"x\"\n}", "{\n  \"amount\": 2,\n  \"id\": \"x\"\n}",
			[]string{"same", "change", "same", "same"}},
		{"added line", "a\nc", "a\nb\nc", []string{"same", "add", "same"}},
		{"removed line", "a\nb\nc", "a\nc", []string{"same", "del", "same"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := diffLines(tc.a, tc.b)
			var got []string
			for _, r := range rows {
				got = append(got, r.Op)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("ops = %v, want %v (%+v)", got, tc.want, rows)
			}
		})
	}
}
