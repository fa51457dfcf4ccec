package replayer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

// maxFindQuery bounds GET /api/v1/find's q.
const maxFindQuery = 1024

// find answers GET /api/v1/find?q=: the events an operator's one string
// names, whatever they have at hand — the scoped key, "integration/id",
// the provider's event id alone (looked up in every integration this
// replayer answers for), or an INTAKE_IN sequence ("42", "in:42",
// "seq:42"). Every reading that applies is tried, and the answer lists
// them (searched), so an empty answer says where nothing was found.
func (r *Replayer) find(w http.ResponseWriter, req *http.Request) {
	q := strings.TrimSpace(req.URL.Query().Get("q"))
	switch {
	case q == "":
		writeError(w, http.StatusBadRequest, "q: required: a scoped key, integration/event_id, an event id, or an INTAKE_IN sequence")
		return
	case len(q) > maxFindQuery:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("q: at most %d bytes", maxFindQuery))
		return
	}
	res, err := r.Find(req.Context(), q)
	if err != nil {
		r.writeFailure(w, failure{call: "find"}, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// Find is GET /api/v1/find's lookup (the console's search box calls it too).
func (r *Replayer) Find(ctx context.Context, q string) (apiclient.FindResult, error) {
	res := apiclient.FindResult{Query: q, Matches: []apiclient.FindMatch{}}
	seen := map[string]bool{}
	add := func(how string, ev store.EventRecord) {
		if seen[ev.Key] {
			return
		}
		seen[ev.Key] = true
		e := wireEvent(ev)
		res.Matches = append(res.Matches, apiclient.FindMatch{How: how, Key: ev.Key, Event: &e})
	}
	// lookup reads k's inbox row, else its retrying state.
	lookup := func(k envelope.Key, find bool) (store.EventRecord, bool, error) {
		var ev store.EventRecord
		var err error
		if find {
			ev, err = r.o.Store.FindEvent(ctx, k.Integration, k.EventID)
		} else {
			ev, err = r.o.Store.GetEvent(ctx, k)
		}
		if errors.Is(err, store.ErrNotFound) {
			ev, err = r.o.Store.RetryingEvent(ctx, k)
		}
		if errors.Is(err, store.ErrNotFound) {
			return ev, false, nil
		}
		return ev, err == nil, err
	}

	if k, ok := envelope.ParseKey(q); ok && strings.Count(q, "/") >= 2 && r.mine(k.Integration) {
		res.Searched = append(res.Searched, "scoped key "+k.String())
		ev, ok, err := lookup(k, false)
		if err != nil {
			return res, err
		}
		if ok {
			add("key", ev)
		}
	}
	if in, id, ok := strings.Cut(q, "/"); ok && id != "" && r.known(in) {
		res.Searched = append(res.Searched, fmt.Sprintf("event id %q in integration %s", id, in))
		ev, ok, err := lookup(envelope.Key{Integration: in, EventID: id}, true)
		if err != nil {
			return res, err
		}
		if ok {
			add("event_id", ev)
		}
	}
	if seq, ok := parseSeq(q); ok {
		res.Searched = append(res.Searched, fmt.Sprintf("INTAKE_IN sequence %d", seq))
		if err := r.findSeq(ctx, seq, &res, add, lookup); err != nil {
			return res, err
		}
	}
	if !strings.Contains(q, "/") {
		for _, in := range r.o.Integrations {
			if !r.mine(in) {
				continue
			}
			res.Searched = append(res.Searched, fmt.Sprintf("event id %q in integration %s", q, in))
			ev, ok, err := lookup(envelope.Key{Integration: in, EventID: q}, true)
			if err != nil {
				return res, err
			}
			if ok {
				add("event_id", ev)
			}
		}
	}
	return res, nil
}

// known reports whether integration is one of this replayer's (any name
// when it was given none).
func (r *Replayer) known(integration string) bool {
	if len(r.o.Integrations) == 0 {
		return integration != ""
	}
	return r.mine(integration) && slices.Contains(r.o.Integrations, integration)
}

// parseSeq reads "42", "in:42" or "seq:42".
func parseSeq(q string) (uint64, bool) {
	for _, p := range []string{"in:", "seq:"} {
		q = strings.TrimPrefix(q, p)
	}
	n, err := strconv.ParseUint(q, 10, 64)
	return n, err == nil && n > 0
}

// findSeq finds the event stored at INTAKE_IN sequence seq: by the inbox
// row that records it, else by the message's own key (a replay copy, a
// duplicate delivery, or an event not yet decided).
func (r *Replayer) findSeq(ctx context.Context, seq uint64, res *apiclient.FindResult, add func(string, store.EventRecord),
	lookup func(envelope.Key, bool) (store.EventRecord, bool, error)) error {
	ev, err := r.o.Store.EventAtSeq(ctx, int64(seq))
	if err == nil {
		add("stream_seq", ev)
		return nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	s, err := r.o.JS.Stream(ctx, envelope.StreamIn)
	if err != nil {
		return fmt.Errorf("stream %s: %w", envelope.StreamIn, err)
	}
	m, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil // not (or no longer) in the stream
	}
	if err != nil {
		return fmt.Errorf("stream %s: message %d: %w", envelope.StreamIn, seq, err)
	}
	k, ok := envelope.ParseKey(m.Header.Get(envelope.HeaderKey))
	if !ok || !r.mine(k.Integration) {
		return nil
	}
	ev, found, err := lookup(k, false)
	if err != nil {
		return err
	}
	if found {
		add("stream_seq", ev)
		return nil
	}
	res.Matches = append(res.Matches, apiclient.FindMatch{How: "stream_seq", Key: k.String(),
		Note: fmt.Sprintf("INTAKE_IN message %d carries this key; the inbox has no row for it (not processed yet, or refused: GET /api/v1/rejections)", seq)})
	return nil
}
