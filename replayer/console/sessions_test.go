package console_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake"
	"github.com/intakehq/intake/internal/harness/testenv/testrig"
	"github.com/intakehq/intake/pkg/config"
)

// replayer starts another replayer (the API role, with the console) on the
// rig's NATS and database, its config edited by mutate, and returns its base
// URL: a second pod behind the same Service.
func (r *rig) replayer(mutate func(*config.Config)) string {
	r.t.Helper()
	cfg := *r.tr.Config
	cfg.API.Tokens = slices.Clone(cfg.API.Tokens)
	if mutate != nil {
		mutate(&cfg)
	}
	return testrig.StartApp(r.t, &cfg, intake.Options{Roles: intake.Roles{Replayer: true}}).URL
}

// at is a client of the console at base (another replayer).
func (c *client) at(base string) *client {
	d := *c
	d.base = base
	return &d
}

// sessionCookie returns the value of the session cookie the client's jar
// holds for the console (plain HTTP on loopback: intake_console).
func (c *client) sessionCookie() string {
	c.t.Helper()
	u, _ := url.Parse(c.base + "/ui/")
	for _, ck := range c.hc.Jar.Cookies(u) {
		if ck.Name == "intake_console" {
			return ck.Value
		}
	}
	c.t.Fatal("no session cookie in the jar")
	return ""
}

// raw sends one request as an attacker's script would: the cookies, the
// Host and the body it chooses, no jar.
func (c *client) raw(method, path, host string, cookies map[string]string, ctype string, body io.Reader, size int64) (*http.Response, string, error) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if size > 0 {
		req.ContentLength = size
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for name, v := range cookies {
		req.AddCookie(&http.Cookie{Name: name, Value: v})
	}
	hc := &http.Client{Timeout: c.hc.Timeout, Transport: c.hc.Transport, CheckRedirect: c.hc.CheckRedirect}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), nil
}

// forgeFromDigest makes a session cookie and its CSRF token from a
// token's SHA-256 alone, exactly as the console derived them before issue
// 30 (session key = HMAC(digest, label), a cookie naming its own expiry).
func forgeFromDigest(t *testing.T, digestHex string, expires time.Time) (cookie, csrf string) {
	t.Helper()
	sum, err := hex.DecodeString(digestHex)
	if err != nil {
		t.Fatal(err)
	}
	mac := func(key []byte, s string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(s))
		return m.Sum(nil)
	}
	key := mac(sum, "intake console session v1")
	id := sha256.Sum256(append([]byte("intake console token id|"), sum...))
	nonce := base64.RawURLEncoding.EncodeToString([]byte("0123456789abcdef"))
	payload := "v1." + hex.EncodeToString(id[:8]) + "." + strconv.FormatInt(expires.Unix(), 10) + "." + nonce
	cookie = payload + "." + base64.RawURLEncoding.EncodeToString(mac(key, payload))
	csrf = base64.RawURLEncoding.EncodeToString(mac(key, "csrf|"+nonce))
	return cookie, csrf
}

// TestForgedSessionFromTheDigestIsRefused (issue 30, item 1): whoever
// reads a token_sha256 (a ConfigMap, the values repository) made, from it
// alone, an operator's cookie expiring in 2100 and its CSRF token. The
// session is now a random id the database knows: the forgery reads no page
// and replays nothing, under either cookie name.
func TestForgedSessionFromTheDigestIsRefused(t *testing.T) {
	r := setup(t)
	r.publish("evt_1", `{"id":"evt_1","type":"invoice.paid"}`)
	r.settled()
	cookie, csrf := forgeFromDigest(t, deployDigest, time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
	c := r.client()
	for _, name := range []string{"intake_console", "__Host-intake_console"} {
		jar := map[string]string{name: cookie}
		resp, body, err := c.raw(http.MethodGet, "/ui/events", "", jar, "", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSeeOther || strings.Contains(body, "deploy (operator)") {
			t.Errorf("%s forged from the digest: GET /ui/events = %d (signed in as deploy: %v), want 303 to the sign-in form",
				name, resp.StatusCode, strings.Contains(body, "deploy (operator)"))
		}
		form := url.Values{"csrf": {csrf}, "key": {"demo/main/evt_1"}}.Encode()
		resp, body, err = c.raw(http.MethodPost, "/ui/replays/dry-run", "", jar, "application/x-www-form-urlencoded", strings.NewReader(form), 0)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s forged from the digest: POST /ui/replays/dry-run = %d (a dry run shown: %v), want 401",
				name, resp.StatusCode, strings.Contains(body, "would_"))
		}
	}
	if n := r.tr.Count(t, `SELECT count(*) FROM intake.replays`); n != 0 {
		t.Errorf("the forged session recorded %d replays", n)
	}
	// The token itself still signs in: the digest is what the config holds.
	c.signIn(deployToken)
}

// TestSignOutEndsTheSessionOnEveryReplayer: two replayers on one
// database (two pods behind the Service); a session signed in on one reads
// pages on the other, and signing out on one ends it on both.
func TestSignOutEndsTheSessionOnEveryReplayer(t *testing.T) {
	r := setup(t)
	other := r.replayer(nil)
	a := r.client()
	csrf := a.signIn(operatorToken)
	b := a.at(other)
	resp, body := b.do(http.MethodGet, "/ui/events", nil, nil)
	must(t, "the session on the other replayer", resp, body, http.StatusOK)
	value := a.sessionCookie()

	resp, body = a.do(http.MethodPost, "/ui/signout", url.Values{"csrf": {csrf}}, nil)
	must(t, "sign-out", resp, body, http.StatusSeeOther)
	for _, base := range []string{r.base, other} {
		// The cookie replayed as it was (the jar dropped it at sign-out).
		resp, _, err := a.at(base).raw(http.MethodGet, "/ui/events", "", map[string]string{"intake_console": value}, "", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSeeOther {
			t.Errorf("%s: a signed-out session's cookie reads /ui/events: %d, want 303", base, resp.StatusCode)
		}
	}
	if n := r.tr.Count(t, `SELECT count(*) FROM intake.console_sessions`); n != 0 {
		t.Errorf("%d session rows after the only session signed out", n)
	}
}

// TestExpiredOrTamperedSessionIsRefused: a cookie with a character
// changed, a session past its expiry, a session whose stored expiry was
// moved past its issue time + TTL, and a session of a token the replayer no
// longer has in its config are all refused.
func TestExpiredOrTamperedSessionIsRefused(t *testing.T) {
	r := setup(t)
	// A replayer whose config dropped the ops token (the rotation's last step).
	rotated := r.replayer(func(c *config.Config) {
		c.API.Tokens = slices.DeleteFunc(c.API.Tokens, func(t config.Token) bool { return t.Name == "ops" })
	})
	ops := r.client()
	ops.signIn(operatorToken)
	value := ops.sessionCookie()
	get := func(base, v string) int {
		t.Helper()
		resp, _, err := ops.at(base).raw(http.MethodGet, "/ui/events", "", map[string]string{"intake_console": v}, "", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	if code := get(r.base, value); code != http.StatusOK {
		t.Fatalf("the session itself = %d, want 200", code)
	}
	flip := []byte(value)
	flip[len(flip)/2] ^= 1
	for name, v := range map[string]string{
		"tampered": string(flip), "truncated": value[:len(value)-1], "extended": value + "A", "empty": "",
	} {
		if code := get(r.base, v); code != http.StatusSeeOther {
			t.Errorf("%s cookie = %d, want 303", name, code)
		}
	}
	if code := get(rotated, value); code != http.StatusSeeOther {
		t.Errorf("a session of a token removed from the config = %d, want 303", code)
	}

	// Past the TTL by the issue time, whatever expiry the row says.
	if _, err := r.tr.DB.Exec(context.Background(), `UPDATE intake.console_sessions
		SET created_at = now() - interval '9 hours', expires_at = '2100-01-01'`); err != nil {
		t.Fatal(err)
	}
	if code := get(r.base, value); code != http.StatusSeeOther {
		t.Errorf("a session issued 9 h ago (TTL 8 h) with a far expiry = %d, want 303", code)
	}
	// Past its own expiry.
	if _, err := r.tr.DB.Exec(context.Background(), `UPDATE intake.console_sessions
		SET created_at = now() - interval '1 hour', expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if code := get(r.base, value); code != http.StatusSeeOther {
		t.Errorf("an expired session = %d, want 303", code)
	}
	// The next sign-in clears expired rows.
	r.client().signIn(viewerToken)
	if n := r.tr.Count(t, `SELECT count(*) FROM intake.console_sessions WHERE expires_at < now()`); n != 0 {
		t.Errorf("%d expired session rows left after a sign-in", n)
	}
}

// zeros is an endless body that allocates nothing.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// multipart is a multipart/form-data body of one file of size bytes.
func multipart(size int64) (io.Reader, int64, string) {
	const boundary = "intakeboundary"
	head := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"token\"; filename=\"t\"\r\n" +
		"Content-Type: application/octet-stream\r\n\r\n"
	tail := "\r\n--" + boundary + "--\r\n"
	body := io.MultiReader(strings.NewReader(head), io.LimitReader(zeros{}, size), strings.NewReader(tail))
	return body, int64(len(head)) + size + int64(len(tail)), "multipart/form-data; boundary=" + boundary
}

// TestMultipartSignInIsRefusedUnread (issue 30, item 3): a 40 MB
// multipart POST to /ui/signin, before any authentication, used to be
// parsed (32 MiB in memory, the rest to a temp file never removed). It is
// refused (415) without reading it: the process allocates little meanwhile
// and TMPDIR stays empty. A multipart POST behind a session (the CSRF check
// parsed it too) is refused the same way.
func TestMultipartSignInIsRefusedUnread(t *testing.T) {
	r := setup(t)
	ops := r.client()
	csrf := ops.signIn(operatorToken)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, tc := range []struct {
		path    string
		cookies map[string]string
	}{
		{"/ui/signin", nil},
		{"/ui/replays/dry-run", map[string]string{"intake_console": ops.sessionCookie()}},
		{"/ui/signout", map[string]string{"intake_console": ops.sessionCookie()}},
	} {
		body, size, ctype := multipart(40 << 20)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		resp, page, err := ops.raw(http.MethodPost, tc.path, "", tc.cookies, ctype, body, size)
		runtime.ReadMemStats(&after)
		switch {
		case err != nil:
			// The server answered and closed without reading; the client
			// may see its write fail first.
			t.Logf("%s: %v", tc.path, err)
		case resp.StatusCode != http.StatusUnsupportedMediaType:
			t.Errorf("multipart POST %s = %d, want 415:\n%.300s", tc.path, resp.StatusCode, page)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
			t.Errorf("multipart POST %s: the process allocated %d MiB meanwhile, want < 8", tc.path, grew>>20)
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("multipart POST %s left %d files in TMPDIR (%s…)", tc.path, len(left), left[0].Name())
		}
	}
	// The session still works: the refusals changed nothing.
	resp, body := ops.do(http.MethodPost, "/ui/replays/dry-run", url.Values{"csrf": {csrf}, "key": {"demo/main/evt_1"}}, nil)
	must(t, "a dry run after the refusals", resp, body, http.StatusOK)
}

// TestConsoleFormsAreBounded: a form over 64 KiB (1 MiB for a list of
// keys) is refused with 413; a list of keys under 1 MiB is read.
func TestConsoleFormsAreBounded(t *testing.T) {
	r := setup(t)
	ops := r.client()
	csrf := ops.signIn(operatorToken)
	c := r.client()
	_, page := c.do(http.MethodGet, "/ui/signin", nil, nil)
	pre := preRE.FindStringSubmatch(page)[1]
	resp, body := c.do(http.MethodPost, "/ui/signin", url.Values{"pre": {pre}, "token": {strings.Repeat("x", 70<<10)}}, nil)
	must(t, "a 70 KiB sign-in", resp, body, http.StatusRequestEntityTooLarge)
	resp, body = ops.do(http.MethodPost, "/ui/signout", url.Values{"csrf": {csrf}, "pad": {strings.Repeat("x", 70<<10)}}, nil)
	must(t, "a 70 KiB sign-out", resp, body, http.StatusRequestEntityTooLarge)

	keys := url.Values{"csrf": {csrf}}
	for i := range 4000 { // about 100 KiB
		keys.Add("key", fmt.Sprintf("demo/main/evt_%06d", i))
	}
	resp, body = ops.do(http.MethodPost, "/ui/replays/dry-run", keys, nil)
	must(t, "a dry run of 4,000 keys", resp, body, http.StatusOK)
	keys.Set("pad", strings.Repeat("x", 1<<20))
	resp, body = ops.do(http.MethodPost, "/ui/replays/dry-run", keys, nil)
	must(t, "a dry run over 1 MiB", resp, body, http.StatusRequestEntityTooLarge)
	resp, body = ops.do(http.MethodPost, "/ui/replays/dry-run", nil, http.Header{"Content-Type": {"text/plain"}})
	must(t, "a text/plain dry run", resp, body, http.StatusUnsupportedMediaType)
}

// TestSecureCookieBehindTLSProxy (issue 30, item 9): behind an Ingress
// that terminates TLS the replayer sees plain HTTP for the public name. The
// session and sign-in cookies are still Secure, with the __Host- prefix and
// Path=/; a cookie without the prefix (one a network attacker could plant
// over plain HTTP) is not read there. Plain HTTP on loopback (intake dev,
// a port-forward) keeps intake_console without Secure:
// TestSignInSessionAndCSRF.
func TestSecureCookieBehindTLSProxy(t *testing.T) {
	r := setup(t)
	c := r.client()
	const host = "intake.example.com"
	cookies := map[string]string{}
	keep := func(resp *http.Response) []string {
		var sets []string
		for _, h := range resp.Header.Values("Set-Cookie") {
			sets = append(sets, h)
			ck, err := http.ParseSetCookie(h)
			if err == nil && ck.MaxAge >= 0 {
				cookies[ck.Name] = ck.Value
			}
		}
		return sets
	}
	want := func(what string, sets []string, name string) {
		t.Helper()
		for _, h := range sets {
			if strings.HasPrefix(h, name+"=") {
				for _, flag := range []string{"Path=/;", "HttpOnly", "Secure", "SameSite=Strict"} {
					if !strings.Contains(h+";", flag) {
						t.Errorf("%s: Set-Cookie %q lacks %s", what, h, strings.TrimSuffix(flag, ";"))
					}
				}
				return
			}
		}
		t.Errorf("%s: no %s cookie in %q", what, name, sets)
	}
	resp, page, err := c.raw(http.MethodGet, "/ui/signin", host, nil, "", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	want("the sign-in form", keep(resp), "__Host-intake_console_pre")
	m := preRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("sign-in form without its pre field:\n%s", page)
	}
	form := url.Values{"pre": {m[1]}, "token": {operatorToken}}.Encode()
	resp, body, err := c.raw(http.MethodPost, "/ui/signin", host, cookies, "application/x-www-form-urlencoded", strings.NewReader(form), 0)
	if err != nil {
		t.Fatal(err)
	}
	must(t, "sign-in behind the proxy", resp, body, http.StatusSeeOther)
	want("the sign-in", keep(resp), "__Host-intake_console")
	session := cookies["__Host-intake_console"]
	resp, body, _ = c.raw(http.MethodGet, "/ui/events", host, map[string]string{"__Host-intake_console": session}, "", nil, 0)
	must(t, "a page with the __Host- cookie", resp, body, http.StatusOK)
	resp, body, _ = c.raw(http.MethodGet, "/ui/events", host, map[string]string{"intake_console": session}, "", nil, 0)
	must(t, "a page with the session under the unprefixed name", resp, body, http.StatusSeeOther)
}
