package console

import (
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer"
	"github.com/intakehq/intake/replayer/apiclient"
)

// pages are every page's content, from data: the tests render each.
func pages(d func(string) string) map[string]content {
	at := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	errMsg, by := d("handler: bad input"), d("ops")
	ev := store.EventRecord{Key: d("demo/main/evt_1"), Integration: d("demo"), Account: d("main"), EventID: d("evt_1"), Tenant: d("acme"),
		EventType: d("invoice.paid"), Status: inbox.Status(d("failed")), PayloadSHA256: d("sha"), FirstReceivedAt: at, LastReceivedAt: at,
		ProcessedAt: &at, Error: &errMsg}
	failed := ev
	failed.Status = inbox.StatusFailed // the event page's replay form shows for failed events only
	f := filter{Integration: d("demo"), Tenant: d("acme"), Status: d("failed"), EventType: d("invoice.paid"), Since: d("since"), Until: d("until")}
	q := f.query()
	cf := store.Conflict{ID: 3, Key: d("demo/main/evt_1"), Tenant: d("acme"), OriginalSHA256: d("sha-1"), ConflictingSHA256: d("sha-2"),
		ReceivedAt: at, DetectedAt: at}
	pl := payload{Seq: 7, Text: d(`{"amount": 7}`), SHA256: d("sha")}
	rep := store.Replay{ID: d("replay-id"), RequestedBy: by, Reason: d("the bug is fixed"), Mode: d("exact"), State: store.ReplayRunning,
		Matched: 2, CreatedAt: at, FinishedAt: &at, CancelledBy: &by, Error: &errMsg, Sample: []string{d("demo/main/evt_1")},
		Counts: []store.OutcomeCount{{Tenant: d("acme"), Integration: d("demo"), EventType: d("invoice.paid"), Outcome: d("would_retry"), Count: 2}}}
	missing := []apiclient.MissingEvent{{Key: d("demo/main/evt_2"), StreamSeq: 2}}
	waiting, backlog := 4*time.Second, uint64(2)
	code, matched := 422, int64(3)
	return map[string]content{
		"error":  errorData{},
		"signin": signInData{Pre: d("pre"), Next: d("/ui/events")},
		"events": eventsData{Filter: f, Query: q, Events: []store.EventRecord{ev}, Next: d("cursor"), Statuses: []string{d("failed")}},
		"event": eventData{Event: failed, Payload: pl, Timeline: []entry{
			{At: at, Kind: d("replay"), What: d("replay exact"), Detail: d("reason"), Link: replayLink(d("replay-id"), "")},
			{At: at, Kind: d("conflict"), What: d("conflicting payload"), Link: conflictLink(d("demo/main/evt_1"), 3)},
			{At: at, Kind: d("rejection"), What: d("refused"), Detail: d("detail")}}},
		"event-missing": eventData{Event: ev, Payload: payload{Missing: d("gone")}},
		"conflicts":     conflictsData{Filter: f, Query: q, Conflicts: []store.Conflict{cf}, Next: d("cursor")},
		"conflict": conflictData{Conflict: cf, Original: pl, Conflicting: pl, Changed: 1,
			Diff: []diffRow{{Op: "same", Left: d("{"), Right: d("{"), LN: 1, RN: 1}, {Op: "change", Left: d("a"), Right: d("b"), LN: 2, RN: 2}}},
		"conflict-missing": conflictData{Conflict: cf, Original: payload{Missing: d("gone")}},
		"failed":           failedData{Filter: f, Query: q, Events: []store.EventRecord{ev}, Next: d("cursor")},
		"dryrun": dryRunData{Replay: withUnknown(rep, d("demo/main/evt_typo")), Form: replayForm{SelectorJSON: d(`{"keys":["demo/main/evt_1"]}`), Mode: d("exact"), Reason: d("why")},
			Modes: []string{"exact", "reexecute"}},
		"replays": replaysData{Replays: []store.Replay{rep}, Next: d("cursor")},
		"replay":  replayData{Replay: rep, Selector: d(`{"keys": []}`)},
		"reconcile": reconcileData{FromSeq: d("1"), ToSeq: d("2"), Since: d("since"), Until: d("until"), Integration: d("demo"), Ran: true,
			Result: replayer.ReconcileResult{ReconcileResult: apiclient.ReconcileResult{Missing: missing, LostConflicts: missing}}, FixJSON: d(`{"keys":["demo/main/evt_2"]}`)},
		"overview": overviewData{Chart: findChart(defaultChart), Windows: overviewWindows, At: at, Integrations: []integrationOverview{{Name: d("demo"),
			Windows: []stats{{Accepted: 3, Refused: 2, Refusals: []store.RefusalCount{{Integration: d("demo"), StatusCode: 401, Reason: d("bad_signature"), Count: 2}}}, {}},
			Hourly:  []bucket{{At: at, Accepted: 3, FailedOrQ: 1, Height: 40, Bad: 13.3}}, Max: 3, Waiting: &waiting, Backlog: &backlog}}},
		// The pages of issue 34: a replay's results, find, failure groups,
		// rejections, the gap check, the re-drive passes, payload search.
		"replay-results": replayData{Replay: rep, Selector: d(`{"keys": []}`), Results: &apiclient.ReplayResults{
			Counts:       map[string]int64{d("processed"): 1},
			ByPrediction: []apiclient.ResultCount{{Predicted: d("would_retry"), Result: d("failed_again"), Count: 1}}}},
		"find": findData{Result: apiclient.FindResult{Query: d("evt_1"), Searched: []string{d("event id")}, Matches: []apiclient.FindMatch{
			{How: d("event_id"), Key: d("demo/main/evt_1"), Event: &apiclient.Event{Status: inbox.Status(d("failed")), EventType: d("invoice.paid")}},
			{How: d("stream_seq"), Key: d("demo/main/evt_2"), Note: d("in the stream, not in the inbox yet")}}}},
		"find-nothing": findData{Result: apiclient.FindResult{Query: d("evt_1"), Searched: []string{d("event id")}}},
		"failures": failuresData{Integration: d("demo"), Groups: []store.FailureGroup{{ID: d("3f9a"), Integration: d("demo"), Status: d("failed"),
			ErrorClass: d("permanent"), Signature: d("bad input #"), Events: 2, FirstSeen: at, LastSeen: at, SampleKeys: []string{d("demo/main/evt_1")},
			ResolvedBy: &by, ResolvedAt: &at, Note: &errMsg, Resolved: true}}},
		"rejections": rejectionsData{Filter: rejectionFilter{Integration: d("demo"), Reason: d("replayed_body"), ReplayID: d("replay-id")},
			Query: url.Values{"reason": {d("replayed_body")}}, Next: d("cursor"), Reasons: []string{d("replayed_body")}, Integrations: []string{d("demo")},
			Rejections: []store.Rejection{{Key: d("demo/main/evt_2"), Tenant: d("acme"), EventType: d("invoice.paid"), StreamSeq: 4, ReplayID: &errMsg,
				ReplayMode: &by, Reason: d("replayed_body"), Detail: d("detail"), RejectedAt: at, OriginalKey: d("demo/main/evt_1")}}},
		"gaps": gapsData{Gaps: apiclient.Gaps{CheckedAt: at, Stream: d("INTAKE_IN"), FirstSeq: 1, LastSeq: 9, Deleted: 1, DeletedSample: []uint64{4},
			InboxMaxSeq: 10, RolledBack: 1, ReceiptsWithoutEvent: 1, ReceiptsSample: []string{d("demo/main/evt_3")}}},
		"redrive": redriveData{Status: apiclient.RedriveStatus{Enabled: true, Interval: d("1h"), Lookback: d("24h"), Passes: []apiclient.Redrive{{
			Trigger: apiclient.RedriveTrigger(d("start")), At: at, FromSeq: 1, ToSeq: 9, Missing: 1, Redriven: 1, ReplayIDs: []string{d("replay-id")}, Error: d("error")}}}},
		"destinations": destinationsData{List: []apiclient.Destination{dest(d, at)}},
		"destination": destinationData{DestinationDetail: apiclient.DestinationDetail{Destination: dest(d, at),
			RecentAttempts: []apiclient.DispatchAttempt{{Destination: d("billing"), WebhookID: d("msg-1"), Key: d("demo/main/evt_1"), Attempt: 2,
				Outcome: d("failed"), StatusCode: &code, ErrorClass: d("client_error"), Response: d(`{"error":"no"}`), AttemptedAt: at, NextAttemptAt: &at}},
			Actions: []apiclient.DestinationAction{{Action: d("pause"), RequestedBy: by, Reason: d("migrating"), At: at}}}, Retry: &matched},
		"search": searchData{Path: d("data.customer"), Value: d("cus_1"), Integration: d("demo"), Since: d("1h"), Until: d("now"),
			Integrations: []string{d("demo")}, MaxWindow: 24 * time.Hour, Ran: true, Result: apiclient.SearchResult{Path: d("data.customer"),
				Since: at, Until: at, Scanned: 2, Truncated: true, Matches: []apiclient.SearchMatch{{Key: d("demo/main/evt_1"), StreamSeq: 1, StoredAt: at,
					EventType: d("invoice.paid")}}}},
	}
}

// dest is a destination with every field set (d makes each value).
func dest(d func(string) string, at time.Time) apiclient.Destination {
	by, reason, rate, age, backlog, code := d("ops"), d("migrating"), 0.5, 61.0, uint64(4), 503
	return apiclient.Destination{Name: d("billing"), URL: d("https://billing.internal/in"),
		Match: apiclient.DestinationMatch{Tenants: []string{d("acme")}, Integrations: []string{d("demo")}, Types: []string{d("invoice.*")}},
		State: d("paused"), Paused: true, PausedBy: &by, PausedReason: &reason, PausedAt: &at, CircuitOpen: true, CircuitChangedAt: &at,
		Backlog: &backlog, OldestUndeliveredAgeSeconds: &age, Window: d("15m"), Attempts: 4, Delivered: 2, Retried: 1, Failed: 1,
		SuccessRate: &rate, LastAttempt: &apiclient.LastAttempt{Outcome: d("retry"), StatusCode: &code, ErrorClass: d("server_error"), AttemptedAt: at}}
}

// render writes a page as the console sends it: the layout around its
// content, as an operator (every control shown) or signed out.
func render(data content, operator bool, d func(string) string) string {
	p := page{Title: d("Title"), Nav: "events", Error: d("error"), Data: data}
	if operator {
		p.User, p.CSRF, p.Operator = replayer.Caller{Name: d("ops"), Role: "operator"}, d("csrf"), true
	}
	var w writer
	layout(&w, p)
	if r, ok := data.(replayData); ok {
		r.progress(&w, p) // the fragment console.js polls
	}
	return w.buf.String()
}

// TestPagesRender renders every page with its zero data and with data, as
// an operator and as nobody: a nil the page does not expect fails here, and
// so does a tag left open in a page's markup.
func TestPagesRender(t *testing.T) {
	zero := map[string]content{
		"error": errorData{}, "signin": signInData{}, "events": eventsData{}, "event": eventData{}, "conflicts": conflictsData{},
		"conflict": conflictData{}, "failed": failedData{}, "dryrun": dryRunData{}, "replays": replaysData{}, "replay": replayData{},
		"reconcile": reconcileData{Ran: true}, "overview": overviewData{},
		"replay-results": replayData{}, "find": findData{}, "find-nothing": findData{}, "failures": failuresData{}, "rejections": rejectionsData{},
		"gaps": gapsData{}, "redrive": redriveData{}, "search": searchData{}, "search-ran": searchData{Ran: true},
		"destinations": destinationsData{}, "destination": destinationData{},
	}
	same := func(s string) string { return s }
	for name := range pages(same) {
		if _, ok := zero[strings.TrimSuffix(name, "-missing")]; !ok {
			t.Errorf("page %s has no zero data in this test", name)
		}
	}
	for what, set := range map[string]map[string]content{"zero": zero, "data": pages(same)} {
		for name, data := range set {
			for _, op := range []bool{false, true} {
				out := render(data, op, same)
				if err := checkMarkup(out); err != "" {
					t.Errorf("%s with %s data (operator %v): %s\n%s", name, what, op, err, out)
				}
			}
		}
	}
}

// hostile is what a provider, a tenant or an operator could store in a
// value the console shows: markup, quotes of both kinds, an event handler
// and a URL scheme that runs script.
const hostile = `javascript:alert(1)//<script>alert(2)</script><img src=x onerror=alert(3)>"' onmouseover="alert(4)" x='`

// TestPagesInertWithHostileValues renders every page with every value from
// Postgres, NATS or the request made hostile, and reads the markup back:
// the only elements and attributes are the page's own, every value shows
// as text, and every link stays under /ui/.
func TestPagesInertWithHostileValues(t *testing.T) {
	evil := func(s string) string { return s + hostile }
	for name, data := range pages(evil) {
		out := render(data, true, evil)
		if err := checkMarkup(out); err != "" {
			t.Errorf("%s: %s\n%s", name, err, out)
			continue
		}
		if n := strings.Count(out, "<script"); n != 1 {
			t.Errorf("%s: %d <script> elements, want the one of console.js", name, n)
		}
		if !strings.Contains(out, html.EscapeString(hostile)) {
			t.Errorf("%s: the hostile value is not shown escaped:\n%s", name, out)
		}
		for _, m := range attrRE.FindAllStringSubmatch(out, -1) {
			attr, val := strings.ToLower(m[1]), html.UnescapeString(m[2])
			if strings.HasPrefix(attr, "on") || attr == "style" || attr == "formaction" || attr == "srcdoc" {
				t.Errorf("%s: attribute %s=%q", name, attr, val)
			}
			if attr == "href" || attr == "action" || attr == "src" {
				u, err := url.Parse(val)
				if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(val, Prefix+"/") {
					t.Errorf("%s: %s=%q leaves the console", name, attr, val)
				}
			}
		}
	}
}

// TestLinks: the values in a link come back out of it as they went in,
// and a replay id stays one path segment.
func TestLinks(t *testing.T) {
	v := "demo/main/evt 1?&#=%2F" + hostile
	for _, tc := range []struct {
		l     link
		path  string
		query url.Values
	}{
		{eventLink(v), "/ui/event", url.Values{"key": {v}}},
		{conflictLink(v, 3), "/ui/conflict", url.Values{"key": {v}, "id": {"3"}}},
		{replayLink("../"+v, "/cancel"), "/ui/replays/../" + v + "/cancel", url.Values{}},
		{nextLink("/ui/events", url.Values{"tenant": {v}, "cursor": {"old"}}, v), "/ui/events", url.Values{"tenant": {v}, "cursor": {v}}},
		{listLink("/ui/replays", nil), "/ui/replays", url.Values{}},
	} {
		u, err := url.Parse(string(tc.l))
		if err != nil {
			t.Errorf("%s: %v", tc.l, err)
			continue
		}
		if u.Scheme != "" || u.Host != "" || u.Path != tc.path || u.Query().Encode() != tc.query.Encode() {
			t.Errorf("%s: path %q query %v, want %q %v", tc.l, u.Path, u.Query(), tc.path, tc.query)
		}
	}
	if l := replayLink("../"+v, "/cancel"); strings.Count(string(l), "/") != 4 {
		t.Errorf("%s: the replay id spans path segments", l)
	}
}

var (
	// tagRE is one tag: its attribute values all quoted with ", holding
	// no < > or " (escaped values hold none).
	tagRE = regexp.MustCompile(`^<(/?)([a-zA-Z][a-zA-Z0-9]*)((?:\s+[a-zA-Z-]+(?:="[^"<>]*")?)*)\s*>`)
	// attrRE is one attribute inside a tag tagRE matched.
	attrRE = regexp.MustCompile(`\s([a-zA-Z-]+)="([^"<>]*)"`)
	// elements are the pages' own.
	elements = map[string]bool{"html": true, "head": true, "meta": true, "title": true, "link": true, "script": true, "body": true,
		"header": true, "nav": true, "a": true, "form": true, "span": true, "input": true, "button": true, "main": true, "h1": true,
		"h2": true, "h3": true, "p": true, "code": true, "table": true, "thead": true, "tbody": true, "tr": true, "th": true, "td": true,
		"colgroup": true, "col": true, "dl": true, "dt": true, "dd": true, "label": true, "select": true, "option": true,
		"textarea": true, "ol": true, "li": true, "time": true, "b": true, "br": true, "small": true, "pre": true, "div": true,
		"progress": true, "noscript": true, "section": true, "svg": true, "rect": true, "figure": true,
		"figcaption": true, "ul": true, "datalist": true}
	void = map[string]bool{"meta": true, "link": true, "input": true, "br": true, "col": true}
)

// checkMarkup reads a page's markup: every < opens a tag of the pages'
// own elements, > appears only closing one, and every element is closed
// in order. It returns what is wrong, or "".
func checkMarkup(out string) string {
	rest := strings.TrimPrefix(out, "<!doctype html>")
	var open []string
	for {
		i := strings.IndexAny(rest, "<>")
		if i < 0 {
			break
		}
		if rest[i] == '>' {
			return "a > outside a tag: " + around(rest, i)
		}
		m := tagRE.FindStringSubmatch(rest[i:])
		if m == nil {
			return "a < that opens no well-formed tag: " + around(rest, i)
		}
		name := strings.ToLower(m[2])
		switch {
		case !elements[name]:
			return "element " + name + " is not one of the pages' own: " + around(rest, i)
		case m[1] == "" && !void[name]:
			open = append(open, name)
		case m[1] == "/":
			if len(open) == 0 || open[len(open)-1] != name {
				return "</" + name + "> closes " + strings.Join(open, ">") + ": " + around(rest, i)
			}
			open = open[:len(open)-1]
		}
		rest = rest[i+len(m[0]):]
	}
	if len(open) != 0 {
		return "left open: " + strings.Join(open, ", ")
	}
	return ""
}

func around(s string, i int) string {
	return s[max(0, i-80):min(len(s), i+80)]
}

// withUnknown is rep with an unknown key, as a dry run by key answers.
func withUnknown(rep store.Replay, key string) store.Replay {
	rep.UnknownKeys = []string{key}
	return rep
}
