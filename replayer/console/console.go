package console

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/intakehq/intake/pkg/telemetry"
	"github.com/intakehq/intake/replayer"
)

//go:embed assets
var assetFS embed.FS

// Prefix is where the console is served.
const Prefix = "/ui"

// Options configure a Console.
type Options struct {
	// Replayer is the replayer the console reads through and replays with.
	// Required; its Options supply the store, JetStream, tokens and auth.
	Replayer *replayer.Replayer
	// SessionTTL is how long a sign-in lasts. Defaults to DefaultSessionTTL
	// (8h). Every replayer on the database should have the same: each
	// refuses a session signed in longer ago than its own.
	SessionTTL time.Duration
	// Log defaults to the replayer's.
	Log *slog.Logger
}

// Console serves the operator console's pages.
type Console struct {
	rp       *replayer.Replayer
	ro       replayer.Options
	log      *slog.Logger
	sessions *sessions
	auth     func(http.Handler) http.Handler
	now      func() time.Time
}

// New builds the console on the replayer's store (its sessions) and tokens.
func New(o Options) (*Console, error) {
	if o.Replayer == nil {
		return nil, errors.New("console: Options.Replayer is required")
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.SessionTTL < 0 {
		return nil, fmt.Errorf("console: Options.SessionTTL: must be positive, got %s", o.SessionTTL)
	}
	ro := o.Replayer.Options()
	if o.Log == nil {
		o.Log = ro.Log
	}
	if o.Log == nil {
		o.Log = telemetry.Discard()
	}
	return &Console{rp: o.Replayer, ro: ro, log: o.Log, sessions: newSessions(ro.Store, ro.Tokens, o.SessionTTL),
		auth: replayer.RequireToken(ro.Tokens, ro.Auth), now: time.Now}, nil
}

// Mount adds the console's routes under /ui to r.
func (c *Console) Mount(r chi.Router) {
	toConsole := func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, Prefix+"/", http.StatusFound) }
	r.Get("/", toConsole) // where the console is served, the root leads to it
	r.Get(Prefix, toConsole)
	r.Route(Prefix, func(r chi.Router) {
		r.Use(secureHeaders)
		assets, _ := fs.Sub(assetFS, "assets")
		files := http.StripPrefix(Prefix+"/assets/", http.FileServerFS(assets))
		r.Get("/assets/*", func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/") { // files only, no listings
				http.NotFound(w, r)
				return
			}
			files.ServeHTTP(w, r)
		})
		// Every POST's body is read by readForm, before anything else
		// looks at it: urlencoded only, at most maxForm bytes (maxKeyListForm
		// for a selection of keys, after the session and role are checked).
		// A page that does not exist is the console's own page, with the
		// way back, not Go's plain-text 404.
		r.NotFound(func(w http.ResponseWriter, r *http.Request) {
			c.write(w, http.StatusNotFound, page{Title: "Not found", Data: errorData{},
				Error: "There is no console page at " + r.URL.Path + "."})
		})
		r.Get("/signin", c.signInForm)
		r.With(readForm(maxForm)).Post("/signin", c.signIn)
		r.Group(func(r chi.Router) {
			r.Use(c.requireSession)
			r.Get("/", c.overview)
			r.Get("/events", c.events)
			r.Get("/event", c.event)
			r.Get("/conflicts", c.conflicts)
			r.Get("/conflict", c.conflict)
			r.Get("/failed", c.failed)
			r.Get("/replays", c.replays)
			r.Get("/replays/{id}", c.replay)
			r.Get("/reconcile", c.reconcile)
			r.Get("/find", c.find)
			r.Get("/search", c.search)
			r.Get("/failures", c.failures)
			r.Get("/rejections", c.rejections)
			r.Get("/gaps", c.gaps)
			r.Get("/redrive", c.redrive)
			r.Get("/destinations", c.destinations)
			r.Get("/destination", c.destination)
			r.Group(func(r chi.Router) {
				r.Use(readForm(maxForm), c.checkCSRF)
				r.Post("/signout", c.signOut)
				r.With(requireOperator).Post("/replays/{id}/cancel", c.cancel)
				r.With(requireOperator).Post("/replays/{id}/approve", c.approve)
				r.With(requireOperator).Post("/failures/{id}/resolve", c.resolveFailure)
				r.With(requireOperator).Post("/destinations/{name}/pause", c.pauseDestination(true))
				r.With(requireOperator).Post("/destinations/{name}/resume", c.pauseDestination(false))
				r.With(requireOperator).Post("/destinations/{name}/retry", c.retryDestination)
			})
			r.Group(func(r chi.Router) {
				r.Use(requireOperator, readForm(maxKeyListForm), c.checkCSRF)
				r.Post("/replays/dry-run", c.dryRun)
				r.Post("/replays", c.startReplay)
			})
		})
	})
}

// secureHeaders: no external requests (the CSP allows this origin only), no
// framing, no caching of operator data.
func secureHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

type sessionKey struct{}

func sessionFrom(ctx context.Context) session {
	s, _ := ctx.Value(sessionKey{}).(session)
	return s
}

// requireSession lets signed-in requests through (the session read from
// the store on every request); a GET without a session is sent to the
// sign-in form, anything else gets 401. When the store cannot say, 503.
func (c *Console) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v, ok := readCookie(r, sessionCookie); ok {
			s, err := c.sessions.verify(r.Context(), v, c.now())
			switch {
			case err == nil:
				next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, s)))
				return
			case !errors.Is(err, errNoSession):
				c.log.Error("console: read the session", "err", err)
				c.fail(w, r, http.StatusServiceUnavailable, "The session could not be read (see the replayer's log): try again.")
				return
			}
		}
		if r.Method == http.MethodGet {
			http.Redirect(w, r, Prefix+"/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		http.Error(w, "sign in first", http.StatusUnauthorized)
	})
}

// checkCSRF refuses a POST whose csrf field does not match the session's,
// or whose Origin (when the browser sends one) is another site's. The form
// is readForm's (none read: refused).
func (c *Console) checkCSRF(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			s := sessionFrom(r.Context())
			if r.PostForm == nil || !sameOrigin(r) || !equal(r.PostForm.Get("csrf"), s.csrf()) {
				http.Error(w, "forbidden: missing or invalid CSRF token", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// requireOperator: the server refuses a viewer's mutation even if the page
// showed no control for it.
func requireOperator(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !sessionFrom(r.Context()).operator() {
			http.Error(w, "forbidden: this needs an operator token", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sameOrigin: a request with an Origin header must come from this host.
// Browsers send Origin on every cross-site POST.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// equal compares a presented secret with the expected one in constant
// time; an empty one never matches.
func equal(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// page is what every page's content gets: the layout's title, the nav entry
// that is on, who is signed in and the message above the content.
type page struct {
	Title    string
	Nav      string
	User     replayer.Caller
	CSRF     string
	Operator bool
	Error    string
	Data     content
}

// content is a page's data, which writes the page inside the layout.
type content interface {
	write(w *writer, p page)
}

// refresher is content whose page reloads itself every refresh() seconds
// (a meta refresh: no script needed), as the overview does.
type refresher interface{ refresh() int }

func (c *Console) render(w http.ResponseWriter, r *http.Request, code int, name, title string, data content) {
	s := sessionFrom(r.Context())
	p := page{Title: title, Nav: name, User: s.caller, Data: data}
	if s.signedIn() {
		p.CSRF, p.Operator = s.csrf(), s.operator()
	}
	c.write(w, code, p)
}

func (c *Console) write(w http.ResponseWriter, code int, p page) {
	var out writer
	layout(&out, p)
	send(w, code, &out)
}

// send answers with a complete page (or a fragment of one).
func send(w http.ResponseWriter, code int, out *writer) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(out.buf.Bytes())
}

// fail renders the layout with an error message instead of a page's data.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	s := sessionFrom(r.Context())
	p := page{Title: "Error", User: s.caller, Error: msg, Data: errorData{}}
	if s.signedIn() {
		p.CSRF, p.Operator = s.csrf(), s.operator()
	}
	c.write(w, code, p)
}

func (c *Console) internal(w http.ResponseWriter, r *http.Request, what string, err error) {
	c.log.Error("console: "+what, "err", err)
	c.fail(w, r, http.StatusInternalServerError, what+": internal error (see the replayer's log)")
}

// errorData is an error page's content, below the message.
type errorData struct{}

func (errorData) write(w *writer, _ page) {
	w.m(`<p><a href="/ui/">Back to the overview</a></p>`)
}

// nav is the header's links; an entry is on for the pages it names.
var nav = []struct {
	href, label markup
	pages       []string
}{
	{"/ui/", "Overview", []string{"overview"}},
	{"/ui/events", "Events", []string{"events", "event", "search"}},
	{"/ui/conflicts", "Conflicts", []string{"conflicts", "conflict"}},
	{"/ui/failed", "Failed", []string{"failed", "failures"}},
	{"/ui/replays", "Replays", []string{"replays", "replay", "dryrun"}},
	{"/ui/reconcile", "Reconcile", []string{"reconcile"}},
	{"/ui/rejections", "Rejected", []string{"rejections"}},
	{"/ui/destinations", "Destinations", []string{"destinations", "destination"}},
}

// layout writes the page around p's content: head, header (nav and who is
// signed in, once someone is), title and error.
func layout(w *writer, p page) {
	w.m(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>`).t(p.Title).m(` · Intake</title>
`)
	if rf, ok := p.Data.(refresher); ok && p.Error == "" {
		w.m(`<meta http-equiv="refresh" content="`).n0(rf.refresh()).m(`">`)
	}
	w.m(`
<link rel="stylesheet" href="/ui/assets/console.css">
<script src="/ui/assets/console.js" defer></script>
</head>
<body>
<header>
  <a class="brand" href="/ui/">Intake</a>
`)
	if p.User.Name != "" {
		w.m("  <nav>\n")
		for _, n := range nav {
			w.m(`    <a href="`).m(n.href).m(`"`).mif(slices.Contains(n.pages, p.Nav), ` class="on"`).m(`>`).m(n.label).m("</a>\n")
		}
		w.m(`  </nav>
  <form class="find" method="get" action="/ui/find" role="search">
    <input name="q" id="find" placeholder="key, event id or seq" aria-label="Find an event by key, event id or INTAKE_IN sequence">
  </form>
  <form class="who" method="post" action="/ui/signout">
    <span id="who">`).t(p.User.Name).m(` (`).t(string(p.User.Role)).m(`)</span>
    <input type="hidden" name="csrf" value="`).t(p.CSRF).m(`">
    <button type="submit" id="signout">Sign out</button>
  </form>
`)
	}
	w.m(`</header>
<main>
<h1>`).t(p.Title).m("</h1>\n")
	if p.Error != "" {
		w.m(`<p class="error" id="error">`).t(p.Error).m("</p>\n")
	}
	p.Data.write(w, p)
	w.m(`
</main>
</body>
</html>`)
}

// Mount builds a console on rp with the default options and adds its
// routes to r: the one line a role that serves the API adds.
func Mount(r chi.Router, rp *replayer.Replayer) error {
	c, err := New(Options{Replayer: rp})
	if err != nil {
		return err
	}
	c.Mount(r)
	return nil
}
