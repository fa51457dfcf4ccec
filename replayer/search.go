package replayer

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/replayer/apiclient"
)

// maxSearchMatches stops a payload search: narrow the window past it.
const maxSearchMatches = 100

// search answers GET /api/v1/search?path=&value=&integration=&since=&until=:
// the INTAKE_IN messages of a bounded window whose JSON payload holds value
// at path. It reads payloads, so a viewer may search only with
// api.payload_search.viewers; the value is never logged.
func (r *Replayer) search(w http.ResponseWriter, req *http.Request) {
	c, _ := CallerFrom(req.Context())
	if c.Role != config.RoleOperator && !r.o.PayloadSearch.Viewers {
		writeError(w, http.StatusForbidden, "payload search reads payloads: an operator token, or api.payload_search.viewers: true")
		return
	}
	q := query{v: req.URL.Query()}
	sq := apiclient.SearchQuery{Path: q.str("path"), Value: q.str("value"), Integration: q.integration(r),
		Since: q.time("since"), Until: q.time("until")}
	if q.err != nil {
		writeError(w, http.StatusBadRequest, q.err.Error())
		return
	}
	if _, ok := q.v["value"]; !ok {
		writeError(w, http.StatusBadRequest, "value: required (the empty string is a value: pass value=)")
		return
	}
	res, err := r.Search(req.Context(), sq, time.Now())
	if err != nil {
		r.writeFailure(w, failure{call: "search"}, err)
		return
	}
	r.o.Log.Info("payload search", "token_name", c.Name, "path", sq.Path, "integration", sq.Integration,
		"scanned", res.Scanned, "matches", len(res.Matches))
	writeJSON(w, http.StatusOK, res)
}

// Search scans the window's INTAKE_IN messages (original deliveries, not
// replay copies) for payloads with q.Value at q.Path.
func (r *Replayer) Search(ctx context.Context, q apiclient.SearchQuery, now time.Time) (apiclient.SearchResult, error) {
	path, err := parsePath(q.Path)
	if err != nil {
		return apiclient.SearchResult{}, err
	}
	if err := r.checkMine("integration", q.Integration); err != nil {
		return apiclient.SearchResult{}, err
	}
	if q.Until.IsZero() {
		q.Until = now
	}
	if q.Since.IsZero() {
		q.Since = q.Until.Add(-time.Hour)
	}
	switch {
	case !q.Since.Before(q.Until):
		return apiclient.SearchResult{}, badRequest("since: must be before until")
	case q.Until.Sub(q.Since) > r.o.PayloadSearch.MaxWindow:
		return apiclient.SearchResult{}, badRequest("since..until: at most %s (api.payload_search.max_window): narrow the window",
			r.o.PayloadSearch.MaxWindow)
	}
	res := apiclient.SearchResult{Path: q.Path, Since: q.Since.UTC(), Until: q.Until.UTC(), Matches: []apiclient.SearchMatch{}}
	rg := scanRange{Since: q.Since, Until: q.Until, Subjects: r.inSubjects(q.Integration), Bodies: true}
	_, err = scanStream(ctx, r.o.JS, envelope.StreamIn, rg, func(m scanned) error {
		if res.Scanned >= r.o.PayloadSearch.MaxMessages || len(res.Matches) >= maxSearchMatches {
			res.Truncated = true
			return errStopScan
		}
		res.Scanned++
		if m.Header.Get(envelope.HeaderReplayID) != "" {
			return nil // a replay's copy of a message the window may hold too
		}
		if matchPath(m.Body, path, q.Value) {
			res.Matches = append(res.Matches, apiclient.SearchMatch{Key: m.Header.Get(envelope.HeaderKey), StreamSeq: m.Seq,
				StoredAt: m.Time.UTC(), EventType: m.Header.Get(envelope.HeaderEventType)})
		}
		return nil
	})
	return res, err
}

// parsePath reads a dotted JSON path: at most 32 segments of at most 128
// bytes; a segment of digits also indexes an array.
func parsePath(p string) ([]string, error) {
	if p == "" || len(p) > 512 {
		return nil, badRequest("path: required, a dotted JSON path such as data.object.customer (at most 512 bytes)")
	}
	segs := strings.Split(p, ".")
	if len(segs) > 32 {
		return nil, badRequest("path: at most 32 segments")
	}
	for i, s := range segs {
		if s == "" {
			return nil, badRequest("path: segment %d is empty (%q)", i+1, p)
		}
	}
	return segs, nil
}

// matchPath reports whether body, a JSON document, holds value at path.
func matchPath(body []byte, path []string, value string) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return false
	}
	for _, seg := range path {
		switch node := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = node[seg]; !ok {
				return false
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(node) {
				return false
			}
			v = node[i]
		default:
			return false
		}
	}
	switch leaf := v.(type) {
	case string:
		return leaf == value
	case json.Number:
		return leaf.String() == value
	case bool:
		return strconv.FormatBool(leaf) == value
	case nil:
		return value == "null"
	}
	return false // an object or an array is not a value
}
