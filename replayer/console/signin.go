package console

import (
	"crypto/sha256"
	"net/http"
	"strings"

	"github.com/intakehq/intake/replayer"
)

type signInData struct {
	Pre  string
	Next string
}

func (c *Console) signInForm(w http.ResponseWriter, r *http.Request) {
	pre := randomToken()
	setCookie(w, r, preCookie, pre, c.now().Add(DefaultSessionTTL))
	c.render(w, r, http.StatusOK, "signin", "Sign in", signInData{Pre: pre, Next: safeNext(r.URL.Query().Get("next"))})
}

// signIn checks the token with the API's own RequireToken (its throttle,
// log line and metric apply), then stores a session and sets its cookie.
// The form was read by readForm (urlencoded, at most maxForm bytes).
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.PostForm.Get("next"))
	again := func(code int, msg string) {
		pre := randomToken()
		setCookie(w, r, preCookie, pre, c.now().Add(DefaultSessionTTL))
		c.write(w, code, page{Title: "Sign in", Error: msg, Data: signInData{Pre: pre, Next: next}})
	}
	pre, ok := readCookie(r, preCookie)
	if !ok || !sameOrigin(r) || !equal(r.PostForm.Get("pre"), pre) {
		again(http.StatusForbidden, "The sign-in form expired or came from elsewhere: try again.")
		return
	}
	tok := strings.TrimSpace(r.PostForm.Get("token"))
	check := r.Clone(r.Context())
	check.Header = r.Header.Clone()
	check.Header.Set("Authorization", "Bearer "+tok)
	var caller replayer.Caller
	rec := &recorder{header: http.Header{}}
	c.auth(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		caller, _ = replayer.CallerFrom(r.Context())
		rec.code = http.StatusOK
	})).ServeHTTP(rec, check)
	if rec.code != http.StatusOK || caller.Name == "" {
		msg := "That token is not valid."
		if ra := rec.header.Get("Retry-After"); ra != "" {
			w.Header().Set("Retry-After", ra)
			msg = "Too many failed sign-ins from this address: try again in " + ra + " s."
		}
		if rec.code == 0 {
			rec.code = http.StatusUnauthorized
		}
		again(rec.code, msg)
		return
	}
	// A token given as token_sha256 hashes to its configured digest too.
	v, _, expires, ok, err := c.sessions.create(r.Context(), sha256.Sum256([]byte(tok)), c.now())
	if err != nil {
		c.log.Error("console: store a session", "err", err)
		again(http.StatusServiceUnavailable, "The session could not be stored (see the replayer's log): try again.")
		return
	}
	if !ok {
		again(http.StatusUnauthorized, "That token is not valid.")
		return
	}
	setCookie(w, r, preCookie, "", c.now())
	setCookie(w, r, sessionCookie, v, expires)
	// token_role, not role: role is the process's on every JSON line.
	c.log.Info("console: signed in", "token_name", caller.Name, "token_role", caller.Role)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signOut deletes the session's row, so no replayer accepts its cookie
// again, and drops the cookie.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	s := sessionFrom(r.Context())
	if err := c.sessions.end(r.Context(), s); err != nil {
		c.internal(w, r, "sign out", err)
		return
	}
	setCookie(w, r, sessionCookie, "", c.now())
	c.log.Info("console: signed out", "token_name", s.caller.Name)
	http.Redirect(w, r, Prefix+"/signin", http.StatusSeeOther)
}

// safeNext keeps a post-sign-in redirect inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix+"/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return Prefix + "/"
	}
	return next
}

// recorder captures RequireToken's answer to a sign-in attempt.
type recorder struct {
	header http.Header
	code   int
	body   strings.Builder
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}

func (d signInData) write(w *writer, _ page) {
	w.m(`<form method="post" action="/ui/signin" class="signin">
  <input type="hidden" name="pre" value="`).t(d.Pre).m(`">
  <input type="hidden" name="next" value="`).t(d.Next).m(`">
  <label>API token <input type="password" name="token" id="token" autocomplete="current-password" required autofocus></label>
  <button type="submit" id="signin">Sign in</button>
  <p class="hint">A token from <code>api.tokens</code>: a viewer reads, an operator also replays.</p>
</form>`)
}
