package console

import (
	"github.com/intakehq/intake/internal/cut"

	"bytes"
	"html"
	"net/url"
	"strconv"
	"time"
)

// The console writes its pages with writer, in Go, not with html/template:
// text/template's executor calls reflect.Value.MethodByName with a name it
// reads at run time, and one such call anywhere in a binary makes the linker
// keep every exported method of every reachable type, in every role of the
// one intake binary (docs/console.md has the sizes).
//
// The rules that keep a page safe:
//   - markup (writer.m) is HTML from this package's source: an untyped string
//     constant converts to it implicitly, a string value does not, so every
//     value from Postgres, NATS or the request goes through writer.t, which
//     escapes & < > " ' (html.EscapeString);
//   - the markup quotes every attribute value with ", so that one escaping is
//     right for text and for attribute values alike;
//   - a URL in href or action is a link: a constant path under /ui with every
//     other part escaped by url.PathEscape or url.Values, built by the link
//     functions below; no value chooses a URL's scheme or host;
//   - no value lands inside <script> or <style>: the pages have no inline
//     script (the CSP allows none), and JSON rides in escaped attribute values.

// markup is HTML written in this package (see the rules above).
type markup string

// link is a URL under /ui that the console built (see the rules above).
type link string

// writer accumulates a page; the handler sends it whole (send).
type writer struct{ buf bytes.Buffer }

// m writes markup as it is.
func (w *writer) m(s markup) *writer {
	w.buf.WriteString(string(s))
	return w
}

// t writes s escaped, as text or as a quoted attribute's value.
func (w *writer) t(s string) *writer {
	w.buf.WriteString(html.EscapeString(s))
	return w
}

// u writes a link as an attribute's value.
func (w *writer) u(l link) *writer {
	w.buf.WriteString(html.EscapeString(string(l)))
	return w
}

// n writes an integer.
func (w *writer) n(i int64) *writer {
	w.buf.WriteString(strconv.FormatInt(i, 10))
	return w
}

// n0 writes an integer, nothing for zero (a diff's missing line number).
func (w *writer) n0(i int) *writer {
	if i != 0 {
		w.n(int64(i))
	}
	return w
}

// un writes an unsigned integer.
func (w *writer) un(i uint64) *writer {
	w.buf.WriteString(strconv.FormatUint(i, 10))
	return w
}

// f writes a chart coordinate, in the shortest form that reads back exactly.
func (w *writer) f(x float64) *writer {
	w.buf.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
	return w
}

// mif writes s when cond holds: an attribute or a class that some rows have.
func (w *writer) mif(cond bool, s markup) *writer {
	if cond {
		w.m(s)
	}
	return w
}

// eventLink is an event's page.
func eventLink(key string) link {
	return link(Prefix + "/event?key=" + url.QueryEscape(key))
}

// conflictLink is a conflict's diff.
func conflictLink(key string, id int64) link {
	return link(Prefix + "/conflict?key=" + url.QueryEscape(key) + "&id=" + strconv.FormatInt(id, 10))
}

// replayLink is a replay's page, or a path under it (suffix: "/cancel").
func replayLink(id string, suffix link) link {
	return link(Prefix+"/replays/"+url.PathEscape(id)) + suffix
}

// listLink is a list page (path: a constant under /ui) with the query q.
func listLink(path link, q url.Values) link {
	if len(q) == 0 {
		return path
	}
	return path + "?" + link(q.Encode())
}

// nextLink is a list page's next page: its filter q with cursor set.
func nextLink(path link, q url.Values, cursor string) link {
	next := url.Values{}
	for k, v := range q {
		next[k] = v
	}
	next.Set("cursor", cursor)
	return listLink(path, next)
}

// ts is how the console shows a time: UTC to the second; zero is blank.
func ts(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// tsp is ts of an optional time.
func tsp(t *time.Time) string {
	if t == nil {
		return ""
	}
	return ts(*t)
}

// deref is an optional string, blank when absent.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// short cuts s to at most n bytes, at a character's start, and an ellipsis
// (a hash, a long error).
func short(s string, n int) string {
	if c := cut.UTF8(s, n); c != s {
		return c + "…"
	}
	return s
}
