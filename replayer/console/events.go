package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
)

// filter is the events and failed pages' query: the fields of
// GET /api/v1/events, with times also in the browser's datetime-local form.
type filter struct {
	Integration, Tenant, Status, EventType, KeyPrefix string
	Since, Until                                      string // as typed
	Cursor                                            string
	since, until                                      time.Time
}

func parseFilter(v url.Values) (filter, error) {
	f := filter{Integration: v.Get("integration"), Tenant: v.Get("tenant"), Status: v.Get("status"),
		EventType: v.Get("event_type"), KeyPrefix: v.Get("key_prefix"), Since: v.Get("since"), Until: v.Get("until"),
		Cursor: v.Get("cursor")}
	var err error
	if f.since, err = parseTime("since", f.Since); err != nil {
		return f, err
	}
	f.until, err = parseTime("until", f.Until)
	return f, err
}

// parseTime takes RFC 3339 or a datetime-local input's value (read as UTC).
func parseTime(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s: not a time (RFC 3339 or 2006-01-02T15:04, UTC): %q", name, s)
}

func (f filter) store(limit int) store.EventFilter {
	return store.EventFilter{Integration: f.Integration, Tenant: f.Tenant, EventType: f.EventType, Status: f.Status,
		Since: f.since, Until: f.until, KeyPrefix: f.KeyPrefix, Limit: limit, Cursor: f.Cursor}
}

// query is the filter without the cursor, for links to the next page.
func (f filter) query() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"integration": f.Integration, "tenant": f.Tenant, "status": f.Status,
		"event_type": f.EventType, "key_prefix": f.KeyPrefix, "since": f.Since, "until": f.Until} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// pageSize is the rows per page of the console's lists.
const pageSize = 50

type eventsData struct {
	Filter   filter
	Query    url.Values
	Events   []store.Event
	Next     string
	Statuses []string
}

var statuses = []string{"processed", "stale", "failed", "quarantined"}

func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query())
	d := eventsData{Filter: f, Query: f.query(), Statuses: statuses}
	if err != nil {
		c.renderErr(w, r, "events", "Events", d, err.Error())
		return
	}
	d.Events, d.Next, err = c.ro.Store.ListEvents(r.Context(), f.store(pageSize))
	if errors.Is(err, store.ErrBadCursor) {
		c.renderErr(w, r, "events", "Events", d, "cursor: invalid (start again from the first page)")
		return
	}
	if err != nil {
		c.internal(w, r, "list events", err)
		return
	}
	c.render(w, r, http.StatusOK, "events", "Events", d)
}

// renderErr renders a page with a 400 and the message above its form.
func (c *Console) renderErr(w http.ResponseWriter, r *http.Request, name, title string, data any, msg string) {
	s := sessionFrom(r.Context())
	p := page{Title: title, Nav: name, User: s.caller, Data: data, Error: msg, CSRF: s.csrf(), Operator: s.operator()}
	c.write(w, http.StatusBadRequest, name, p)
}

// entry is one line of an event's timeline.
type entry struct {
	At     time.Time
	Kind   string // delivery, execution, replay, conflict, rejection, processed
	What   string
	Detail string
	Link   string
}

type eventData struct {
	Event    store.Event
	Timeline []entry
	Payload  payload
}

// payload is a raw message body from INTAKE_IN, pretty-printed when JSON.
type payload struct {
	Seq     int64
	Text    string
	JSON    bool
	SHA256  string
	Matches bool // the body's hash is the one recorded
	Missing string
}

func (c *Console) event(w http.ResponseWriter, r *http.Request) {
	k, ok := envelope.ParseKey(r.URL.Query().Get("key"))
	if !ok {
		c.fail(w, r, http.StatusBadRequest, "key: not a scoped key {integration}/{account}/{event_id}")
		return
	}
	ctx := r.Context()
	ev, err := c.ro.Store.GetEvent(ctx, k)
	if errors.Is(err, store.ErrNotFound) {
		c.fail(w, r, http.StatusNotFound, "No inbox row for "+k.String()+".")
		return
	}
	if err != nil {
		c.internal(w, r, "get event", err)
		return
	}
	d := eventData{Event: ev}
	if d.Timeline, err = c.timeline(ctx, ev, k); err != nil {
		c.internal(w, r, "event history", err)
		return
	}
	d.Payload = c.payload(ctx, ev.StreamSeq, ev.PayloadSHA256)
	c.render(w, r, http.StatusOK, "event", ev.Key, d)
}

// timeline puts everything that happened to an event in time order:
// deliveries, handler runs, replays that selected it, conflicts, refused
// messages claiming its key and its body refused under other ids.
func (c *Console) timeline(ctx context.Context, ev store.Event, k envelope.Key) ([]entry, error) {
	st := c.ro.Store
	var out []entry
	deliveries, err := st.EventDeliveryHistory(ctx, k)
	if err != nil {
		return nil, err
	}
	for _, d := range deliveries {
		out = append(out, entry{At: d.ReceivedAt, Kind: "delivery", What: fmt.Sprintf("delivery answered %d %s", d.StatusCode, d.Answer),
			Detail: "instance " + d.Instance + hints(d.RetryHints)})
	}
	execs, err := st.EventExecutions(ctx, k)
	if err != nil {
		return nil, err
	}
	for _, e := range execs {
		en := entry{At: e.ExecutedAt, Kind: "execution", What: "handler ran (" + e.Mode + ")",
			Detail: fmt.Sprintf("execution %s, stream seq %d", e.ID, e.StreamSeq)}
		if e.ReplayID != nil {
			en.Link = "/ui/replays/" + *e.ReplayID
		}
		out = append(out, en)
	}
	reps, err := st.ReplaysOfEvent(ctx, k)
	if err != nil {
		return nil, err
	}
	for _, rp := range reps {
		out = append(out, entry{At: rp.CreatedAt, Kind: "replay", What: "replay " + rp.Mode + " by " + rp.RequestedBy + " (" + rp.State + ", item " + rp.ItemState + ")",
			Detail: "reason: " + rp.Reason, Link: "/ui/replays/" + rp.ID})
	}
	conflicts, err := st.EventConflicts(ctx, k)
	if err != nil {
		return nil, err
	}
	for _, cf := range conflicts {
		out = append(out, entry{At: cf.DetectedAt, Kind: "conflict", What: "conflicting payload recorded",
			Detail: fmt.Sprintf("stream seq %d, sha256 %s", cf.ConflictingStreamSeq, cf.ConflictingSHA256),
			Link:   fmt.Sprintf("/ui/conflict?key=%s&id=%d", url.QueryEscape(cf.Key), cf.ID)})
	}
	rejs, err := st.EventRejections(ctx, k)
	if err != nil {
		return nil, err
	}
	for _, rj := range rejs {
		out = append(out, entry{At: rj.RejectedAt, Kind: "rejection", What: "message refused: " + rj.Reason, Detail: rj.Detail})
	}
	bodies, err := st.EventReplayedBodies(ctx, k)
	if err != nil {
		return nil, err
	}
	for _, rj := range bodies {
		out = append(out, entry{At: rj.RejectedAt, Kind: "rejection", What: "its body refused under another event id (" + rj.Key + ")",
			Detail: rj.Detail})
	}
	if ev.ProcessedAt != nil {
		out = append(out, entry{At: *ev.ProcessedAt, Kind: "processed", What: "inbox row " + string(ev.Status)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

func hints(h map[string]string) string {
	if len(h) == 0 {
		return ""
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ", retry hints:"
	for _, k := range keys {
		s += " " + k + "=" + h[k]
	}
	return s
}

// payload reads the raw body of INTAKE_IN message seq.
func (c *Console) payload(ctx context.Context, seq int64, want string) payload {
	p := payload{Seq: seq}
	if seq <= 0 {
		p.Missing = "no stream sequence recorded"
		return p
	}
	s, err := c.ro.JS.Stream(ctx, envelope.StreamIn)
	if err == nil {
		var m *jetstream.RawStreamMsg
		if m, err = s.GetMsg(ctx, uint64(seq)); err == nil {
			sum := sha256.Sum256(m.Data)
			p.SHA256 = hex.EncodeToString(sum[:])
			p.Matches = want == "" || p.SHA256 == want
			p.Text, p.JSON = pretty(m.Data)
			return p
		}
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		p.Missing = fmt.Sprintf("message %d is gone from %s (max_age or deleted)", seq, envelope.StreamIn)
	} else {
		c.log.Warn("console: read payload", "seq", seq, "err", err)
		p.Missing = fmt.Sprintf("message %d could not be read from %s", seq, envelope.StreamIn)
	}
	return p
}

// pretty indents JSON; other bodies are shown as they are.
func pretty(b []byte) (string, bool) {
	var buf bytes.Buffer
	if json.Valid(b) && json.Indent(&buf, b, "", "  ") == nil {
		return buf.String(), true
	}
	return string(b), false
}
