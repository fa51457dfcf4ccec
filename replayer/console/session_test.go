package console

import (
	"crypto/sha256"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/pkg/config"
)

func testSigner() (*signer, [32]byte) {
	tokens := []config.Token{{Name: "ops", Token: "operator-token-0123456789", Role: config.RoleOperator},
		{Name: "viewer", Token: "viewer-token-0123456789", Role: config.RoleViewer}}
	return newSigner(tokens, time.Hour), sha256.Sum256([]byte("operator-token-0123456789"))
}

func TestSessionSignVerify(t *testing.T) {
	s, sum := testSigner()
	now := time.Unix(1_800_000_000, 0)
	v, ok := s.sign(sum, now)
	if !ok {
		t.Fatal("sign refused a configured token")
	}
	sess, ok := s.verify(v, now.Add(time.Minute))
	if !ok || sess.caller.Name != "ops" || !sess.operator() {
		t.Fatalf("verify = %+v, %v; want ops, operator", sess.caller, ok)
	}
	if sess.csrf() == "" || sess.csrf() == (session{key: sess.key, nonce: "other"}).csrf() {
		t.Fatal("the CSRF token must be bound to the session")
	}
	parts := strings.Split(v, ".")
	for name, bad := range map[string]string{
		"expired":         v,
		"tampered expiry": strings.Join([]string{parts[0], parts[1], "9999999999", parts[3], parts[4]}, "."),
		"tampered mac":    v[:len(v)-2] + "AA",
		"unknown token":   strings.Join([]string{parts[0], "0000000000000000", parts[2], parts[3], parts[4]}, "."),
		"garbage":         "v1.x",
	} {
		at := now
		if name == "expired" {
			at = now.Add(2 * time.Hour)
		}
		if _, ok := s.verify(bad, at); ok {
			t.Errorf("%s: verify accepted %q", name, bad)
		}
	}
	s.revoke(sess, now)
	if _, ok := s.verify(v, now); ok {
		t.Error("a signed-out session still verifies")
	}
	// Another replayer with the same tokens accepts the session.
	other, _ := testSigner()
	v2, _ := s.sign(sum, now)
	if _, ok := other.verify(v2, now); !ok {
		t.Error("a replayer with the same tokens refused the session")
	}
	if _, ok := s.sign(sha256.Sum256([]byte("not configured")), now); ok {
		t.Error("sign accepted an unknown token")
	}
}

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
