package console

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCookieFlags(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tls    bool
		secure bool
	}{{"http", false, false}, {"https", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/ui/signin", nil)
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			w := httptest.NewRecorder()
			setCookie(w, r, sessionCookie, "v", time.Now().Add(time.Hour))
			c := w.Result().Cookies()[0]
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != tc.secure || c.Path != "/ui/" {
				t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Secure=%v, Path=/ui/", c, tc.secure)
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
