package replayer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

// Predicted outcomes of a replay item (the keys of "outcomes"). Those of a
// replay are the inbox's decision (inbox.Decide) on the replay copy, named
// by Prediction.
const (
	// WouldApply: no inbox row yet (the event was never processed), or a
	// re-execution: the handler runs.
	WouldApply = "would_apply"
	// WouldDeduplicate: exact replay of a processed or stale event: the
	// inbox refuses it, nothing is applied.
	WouldDeduplicate = "would_deduplicate"
	// WouldRetry: exact replay of a failed or quarantined event: the
	// handler runs again.
	WouldRetry = "would_retry"
	// WouldConflict: the message's payload differs from the inbox row's:
	// the processor records a conflict and applies nothing.
	WouldConflict = "would_conflict"
	// WouldRedeliver: a redelivery republishes the processed message.
	WouldRedeliver = "would_redeliver"
	// WouldRefuseReplayedBody: the replay guard holds the copy's body and
	// type under another key: the copy is refused (replayed_body) unless
	// the replay admits replayed bodies.
	WouldRefuseReplayedBody = apiclient.OutcomeWouldRefuseReplayedBody
	// Missing: the source message is gone (max_age, deleted) or, for a key
	// without an inbox row (or replayed_body record), was not found:
	// nothing is published.
	Missing = store.OutcomeMissing
)

// plan is a resolved selector: what would be published, and predictions.
type plan struct {
	items   []store.ReplayItem
	lastSeq uint64 // the target stream's last sequence before publishing
	// bodies are the published items' bodies and types, by Pos, for the
	// replay guard's prediction (predictGuard).
	bodies map[int]store.BodyClaim
	// unknown are the selected keys that name no event: no inbox row, no
	// refusal record (apiclient.Replay.UnknownKeys).
	unknown []envelope.Key
}

// addBody notes the body hash and type of the item just added.
func (p *plan) addBody(typ, sha string) {
	it := p.items[len(p.items)-1]
	if p.bodies == nil {
		p.bodies = map[int]store.BodyClaim{}
	}
	p.bodies[it.Pos] = store.BodyClaim{Key: it.Key, EventType: typ, PayloadSHA256: sha}
}

func (p *plan) add(it store.ReplayItem) {
	it.Pos = len(p.items)
	p.items = append(p.items, it)
}

// summary counts a plan's items by outcome and by tenant, integration,
// type and outcome, and picks sample keys, each outcome represented.
func (p *plan) summary() (map[string]int64, []store.OutcomeCount, []string) {
	outcomes := map[string]int64{}
	type group struct{ tenant, integration, eventType, outcome string }
	counts := map[group]int64{}
	byOutcome := map[string][]string{}
	for _, it := range p.items {
		outcomes[it.Outcome]++
		counts[group{it.Tenant, it.Key.Integration, it.EventType, it.Outcome}]++
		if len(byOutcome[it.Outcome]) < sampleSize {
			byOutcome[it.Outcome] = append(byOutcome[it.Outcome], it.Key.String())
		}
	}
	list := make([]store.OutcomeCount, 0, len(counts))
	for g, n := range counts {
		list = append(list, store.OutcomeCount{Tenant: g.tenant, Integration: g.integration, EventType: g.eventType, Outcome: g.outcome, Count: n})
	}
	slices.SortFunc(list, func(a, b store.OutcomeCount) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Integration, b.Integration),
			cmp.Compare(a.EventType, b.EventType), cmp.Compare(a.Outcome, b.Outcome))
	})
	names := make([]string, 0, len(byOutcome))
	for o := range byOutcome {
		names = append(names, o)
	}
	slices.Sort(names)
	sample := []string{}
	for i := 0; len(sample) < sampleSize; i++ {
		added := false
		for _, o := range names {
			if i < len(byOutcome[o]) && len(sample) < sampleSize {
				sample = append(sample, byOutcome[o][i])
				added = true
			}
		}
		if !added {
			break
		}
	}
	return outcomes, list, sample
}

const sampleSize = 10

// predict says what the processor will do with an exact or reexecute copy
// of a message with payload hash sha, given the event's inbox row: the
// inbox's own decision on a copy not yet published (no stream sequence).
// The object-version guard, the decision's second step, is not predicted: a
// copy that would apply or retry may still turn out stale.
func predict(mode inbox.ReplayMode, row store.InboxState, hasRow bool, sha string) string {
	d := inbox.Decide(inbox.Row{PayloadSHA256: row.PayloadSHA256, StreamSeq: row.StreamSeq, Status: row.Status}, hasRow,
		inbox.Message{PayloadSHA256: sha, ReplayMode: mode})
	return Prediction(d.Outcome)
}

// Prediction names the inbox's decision on a replay copy as a dry run
// reports it.
func Prediction(o inbox.Outcome) string {
	switch o {
	case inbox.New, inbox.Reexecuted:
		return WouldApply
	case inbox.Retried:
		return WouldRetry
	case inbox.Conflict:
		return WouldConflict
	default: // Replayed; a copy is never a duplicate or a redelivery
		return WouldDeduplicate
	}
}

// planReplay resolves a replay's selector against the stream and the inbox.
func (r *Replayer) planReplay(ctx context.Context, id string, req apiclient.ReplayRequest) (*plan, error) {
	s := req.Selector
	if s.StreamSeq != nil || s.Since != nil || s.Until != nil {
		return r.planFromStream(ctx, id, req)
	}
	p := &plan{}
	last, err := lastSeq(ctx, r.o.JS, envelope.StreamIn)
	if err != nil {
		return nil, err
	}
	p.lastSeq = last
	stream, err := r.o.JS.Stream(ctx, envelope.StreamIn)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", envelope.StreamIn, err)
	}
	matches := func(st store.InboxState) bool {
		return r.mine(st.Key.Integration) && (s.Integration == "" || st.Key.Integration == s.Integration) &&
			(s.Tenant == "" || st.Tenant == s.Tenant) &&
			(s.EventType == "" || st.EventType == s.EventType) &&
			(s.Status == "" || string(st.Status) == s.Status)
	}
	addRow := func(st store.InboxState) error {
		it := store.ReplayItem{Key: st.Key, Tenant: st.Tenant, EventType: st.EventType, StreamSeq: st.StreamSeq,
			MsgID: envelope.ReplayMsgID(id, st.Key)}
		sha, err := originalHash(ctx, stream, st)
		switch {
		case errors.Is(err, errGone):
			it.Outcome = Missing
		case err != nil:
			return err
		default:
			it.Outcome = predict(req.Mode, st, true, sha)
		}
		p.add(it)
		if it.Outcome != Missing {
			p.addBody(st.EventType, sha)
		}
		if len(p.items) > r.o.MaxMatched {
			return ErrTooMany
		}
		return nil
	}

	if len(s.Keys) > 0 {
		keys := parseKeys(s.Keys)
		pctx, cancel := pgBound(ctx)
		rows, err := r.o.Store.LookupInbox(pctx, keys)
		cancel()
		if err != nil {
			return nil, err
		}
		var unrowed []envelope.Key
		for _, k := range keys {
			if _, ok := rows[k]; !ok {
				unrowed = append(unrowed, k)
			}
		}
		pctx, cancel = pgBound(ctx)
		refused, err := r.o.Store.RefusedBodies(pctx, unrowed)
		cancel()
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			st, ok := rows[k]
			if !ok {
				// Never processed: its message is found by a range
				// (reconcile gives one), or through the rejection record of
				// the replay guard's refusal.
				if err := r.addRefused(ctx, p, stream, id, req, k, refused); err != nil {
					return nil, err
				}
				continue
			}
			if !matches(st) {
				continue
			}
			if err := addRow(st); err != nil {
				return nil, err
			}
		}
		return p, r.predictGuard(ctx, p, req.AdmitReplayedBodies)
	}
	err = r.o.Store.SelectInbox(ctx, store.InboxSelector{Integration: s.Integration, Tenant: s.Tenant,
		EventType: s.EventType, Status: s.Status, Limit: r.o.MaxMatched + 1}, addRow)
	if err != nil {
		return nil, err
	}
	return p, r.predictGuard(ctx, p, false)
}

// addRefused adds key k, which has no inbox row, from the record of the
// replay guard's refusal of its delivery, or as Missing without one (or
// once its message has left INTAKE_IN).
func (r *Replayer) addRefused(ctx context.Context, p *plan, stream jetstream.Stream, id string, req apiclient.ReplayRequest,
	k envelope.Key, refused map[envelope.Key]store.RefusedBody) error {
	s := req.Selector
	it := store.ReplayItem{Key: k, MsgID: envelope.ReplayMsgID(id, k), Outcome: Missing}
	b, ok := refused[k]
	if !ok {
		p.add(it)
		p.unknown = append(p.unknown, k)
		return nil
	}
	if (s.Integration != "" && k.Integration != s.Integration) || (s.Tenant != "" && b.Tenant != s.Tenant) ||
		(s.EventType != "" && b.EventType != s.EventType) || s.Status != "" {
		return nil // the filters leave it out, as they would an inbox row
	}
	it.Tenant, it.EventType = b.Tenant, b.EventType
	sha, err := originalHash(ctx, stream, store.InboxState{Key: k, StreamSeq: b.StreamSeq})
	switch {
	case errors.Is(err, errGone):
		p.add(it)
		return nil
	case err != nil:
		return err
	}
	it.StreamSeq, it.Outcome = b.StreamSeq, predict(req.Mode, store.InboxState{}, false, sha)
	p.add(it)
	p.addBody(b.EventType, sha)
	return nil
}

// predictGuard predicts the replay guard (processor/replayguard.go) on the
// plan's copies: one whose body and type the guard holds under another key
// is refused — unless the replay admits replayed bodies, whose copies the
// guard passes. Like the guard, it reads intake.body_hashes and
// intake.body_type_hashes (store.BodyFirstKeys).
func (r *Replayer) predictGuard(ctx context.Context, p *plan, admit bool) error {
	if admit || len(p.bodies) == 0 {
		return nil
	}
	pos := make([]int, 0, len(p.bodies))
	for i := range p.bodies {
		pos = append(pos, i)
	}
	slices.Sort(pos)
	claims := make([]store.BodyClaim, len(pos))
	for j, i := range pos {
		claims[j] = p.bodies[i]
	}
	pctx, cancel := pgBound(ctx)
	first, err := r.o.Store.BodyFirstKeys(pctx, claims)
	cancel()
	if err != nil {
		return err
	}
	for j, i := range pos {
		if first[j] != (envelope.Key{}) && first[j] != claims[j].Key {
			p.items[i].Outcome = WouldRefuseReplayedBody
		}
	}
	return nil
}

// errGone: the message an item points at is no longer in its stream.
var errGone = errors.New("message gone from the stream")

// originalHash reads the inbox row's original message and returns its
// payload hash, or errGone.
func originalHash(ctx context.Context, s jetstream.Stream, st store.InboxState) (string, error) {
	m, err := s.GetMsg(ctx, st.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", errGone
	}
	if err != nil {
		return "", fmt.Errorf("stream %s: get %d: %w", envelope.StreamIn, st.StreamSeq, err)
	}
	if m.Header.Get(envelope.HeaderKey) != st.Key.String() {
		// The stream was recreated and the sequence reused: not our message.
		return "", errGone
	}
	return m.Header.Get(envelope.HeaderPayloadSHA256), nil
}

// candidate is one INTAKE_IN message of a key found in a range.
type candidate struct {
	seq    uint64
	sha    string
	replay bool // a copy published by an earlier replay
}

// planFromStream scans INTAKE_IN over the range and picks one message per
// key: preferably the inbox row's own, else an original (not a replay copy)
// with the inbox row's payload, else the first original, else the first copy.
func (r *Replayer) planFromStream(ctx context.Context, id string, req apiclient.ReplayRequest) (*plan, error) {
	s := req.Selector
	rg := newScanRange(s.StreamSeq, s.Since, s.Until)
	rg.Subjects = r.inSubjects(s.Integration)
	keyFilter := keySet(s.Keys)
	type found struct {
		tenant, eventType string
		cands             []candidate
	}
	byKey := map[envelope.Key]*found{}
	var order []envelope.Key
	last, err := scanStream(ctx, r.o.JS, envelope.StreamIn, rg, func(m scanned) error {
		k, ok := envelope.ParseKey(m.Header.Get(envelope.HeaderKey))
		if !ok {
			return nil // not an Intake delivery
		}
		tenant, typ := m.Header.Get(envelope.HeaderTenant), m.Header.Get(envelope.HeaderEventType)
		if !r.mine(k.Integration) || (s.Integration != "" && k.Integration != s.Integration) || (s.Tenant != "" && tenant != s.Tenant) ||
			(s.EventType != "" && typ != s.EventType) || (keyFilter != nil && !keyFilter[k]) {
			return nil
		}
		f := byKey[k]
		if f == nil {
			if len(order) >= r.o.MaxMatched {
				return ErrTooMany
			}
			f = &found{tenant: tenant, eventType: typ}
			byKey[k] = f
			order = append(order, k)
		}
		if len(f.cands) < 8 { // a handful per key is plenty to choose from
			f.cands = append(f.cands, candidate{seq: m.Seq, sha: m.Header.Get(envelope.HeaderPayloadSHA256),
				replay: m.Header.Get(envelope.HeaderReplayID) != ""})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	pctx, cancel := pgBound(ctx)
	rows, err := r.o.Store.LookupInbox(pctx, order)
	cancel()
	if err != nil {
		return nil, err
	}
	p := &plan{lastSeq: last}
	for _, k := range order {
		f := byKey[k]
		row, hasRow := rows[k]
		if s.Status != "" && (!hasRow || string(row.Status) != s.Status) {
			continue
		}
		c := choose(f.cands, row, hasRow)
		p.add(store.ReplayItem{Key: k, Tenant: f.tenant, EventType: f.eventType, StreamSeq: c.seq,
			MsgID: envelope.ReplayMsgID(id, k), Outcome: predict(req.Mode, row, hasRow, c.sha)})
		p.addBody(f.eventType, c.sha)
	}
	return p, r.predictGuard(ctx, p, req.AdmitReplayedBodies)
}

func choose(cands []candidate, row store.InboxState, hasRow bool) candidate {
	rank := func(c candidate) int {
		switch {
		case hasRow && c.seq == row.StreamSeq:
			return 0
		case hasRow && !c.replay && c.sha == row.PayloadSHA256:
			return 1
		case !c.replay:
			return 2
		}
		return 3
	}
	best := cands[0]
	for _, c := range cands[1:] {
		if rank(c) < rank(best) {
			best = c
		}
	}
	return best
}

// planRedelivery resolves a redelivery's selector against INTAKE_OUT or the
// published outbox rows.
func (r *Replayer) planRedelivery(ctx context.Context, id string, req apiclient.RedeliveryRequest) (*plan, error) {
	switch req.Source {
	case apiclient.SourceOutbox:
		return r.planRedeliveryFromOutbox(ctx, id, req.Selector)
	case apiclient.SourceFailed:
		return r.planRedeliveryOfFailed(ctx, id, req.Destination, req.Selector)
	}
	return r.planRedeliveryFromStream(ctx, id, req.Selector)
}

// planRedeliveryOfFailed picks the messages whose delivery to destination
// failed (the delivery log's last word on them) within s's since/until, by
// their INTAKE_OUT sequence.
func (r *Replayer) planRedeliveryOfFailed(ctx context.Context, id, destination string, s apiclient.RedeliverySelector) (*plan, error) {
	last, err := lastSeq(ctx, r.o.JS, envelope.StreamOut)
	if err != nil {
		return nil, err
	}
	p := &plan{lastSeq: last}
	var since, until time.Time
	if s.Since != nil {
		since = *s.Since
	}
	if s.Until != nil {
		until = *s.Until
	}
	err = r.o.Store.FailedDeliveries(ctx, destination, since, until, func(a store.DispatchAttempt) error {
		k, ok := envelope.ParseKey(a.Key)
		if !ok || !r.mine(k.Integration) {
			return nil
		}
		if len(p.items) >= r.o.MaxMatched {
			return ErrTooMany
		}
		p.add(store.ReplayItem{Key: k, Tenant: a.Tenant, EventType: a.EventType, StreamSeq: a.StreamSeq,
			MsgID: envelope.RedeliveryMsgID(id, a.MsgID), Outcome: WouldRedeliver})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// planRedeliveryFromOutbox picks the published outbox rows s matches, one
// copy per message id.
func (r *Replayer) planRedeliveryFromOutbox(ctx context.Context, id string, s apiclient.RedeliverySelector) (*plan, error) {
	last, err := lastSeq(ctx, r.o.JS, envelope.StreamOut)
	if err != nil {
		return nil, err
	}
	p := &plan{lastSeq: last}
	sel := store.OutboxSelector{Keys: parseKeys(s.Keys), Integration: s.Integration, Tenant: s.Tenant, EventType: s.EventType,
		Limit: r.o.MaxMatched + 1}
	if s.Since != nil {
		sel.Since = *s.Since
	}
	if s.Until != nil {
		sel.Until = *s.Until
	}
	seen := map[string]bool{}
	err = r.o.Store.SelectPublishedOutbox(ctx, sel, func(o store.OutboxRef) error {
		if !r.mine(o.Key.Integration) {
			return nil // an integration moved to another shard: its replayer's now
		}
		if seen[o.MsgID] {
			// Rows that share a message id (the event ran again as an
			// original once its inbox row was gone): one message to
			// subscribers, one copy, as from the stream.
			return nil
		}
		seen[o.MsgID] = true
		if len(p.items) >= r.o.MaxMatched {
			return ErrTooMany
		}
		p.add(store.ReplayItem{Key: o.Key, Tenant: o.Tenant, EventType: o.EventType, OutboxID: o.ID,
			MsgID: envelope.RedeliveryMsgID(id, o.MsgID), Outcome: WouldRedeliver})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// planRedeliveryFromStream scans INTAKE_OUT over s's range and picks each
// processed message s matches once (by message id), leaving out earlier
// redeliveries' copies.
func (r *Replayer) planRedeliveryFromStream(ctx context.Context, id string, s apiclient.RedeliverySelector) (*plan, error) {
	keyFilter := keySet(s.Keys)
	rg := newScanRange(s.StreamSeq, s.Since, s.Until)
	if s.Subject != "" {
		rg.Subjects = []string{s.Subject}
	} else {
		rg.Subjects = r.outSubjects(s.Tenant, s.Integration)
	}
	p := &plan{}
	seen := map[string]bool{}
	last, err := scanStream(ctx, r.o.JS, envelope.StreamOut, rg, func(m scanned) error {
		if m.Header.Get(HeaderRedeliveryID) != "" {
			return nil // a copy from an earlier redelivery: its original is what counts
		}
		k, ok := envelope.ParseKey(m.Header.Get(envelope.HeaderKey))
		if !ok {
			return nil
		}
		tenant, typ := m.Header.Get(envelope.HeaderTenant), m.Header.Get(envelope.HeaderEventType)
		if !r.mine(k.Integration) || (s.Integration != "" && k.Integration != s.Integration) || (s.Tenant != "" && tenant != s.Tenant) ||
			(s.EventType != "" && typ != s.EventType) || (keyFilter != nil && !keyFilter[k]) {
			return nil
		}
		orig := m.Header.Get(envelope.HeaderMsgID)
		if orig == "" {
			orig = envelope.SeqMsgID(m.Seq)
		}
		if seen[orig] {
			return nil // the same message id twice (published again after the window)
		}
		seen[orig] = true
		if len(p.items) >= r.o.MaxMatched {
			return ErrTooMany
		}
		p.add(store.ReplayItem{Key: k, Tenant: tenant, EventType: typ, StreamSeq: m.Seq,
			MsgID: envelope.RedeliveryMsgID(id, orig), Outcome: WouldRedeliver})
		return nil
	})
	if err != nil {
		return nil, err
	}
	p.lastSeq = last
	return p, nil
}

// keySet is keys (scoped keys, checked) as a set; nil without any: no
// filter.
func keySet(keys []string) map[envelope.Key]bool {
	if len(keys) == 0 {
		return nil
	}
	set := map[envelope.Key]bool{}
	for _, k := range parseKeys(keys) {
		set[k] = true
	}
	return set
}
