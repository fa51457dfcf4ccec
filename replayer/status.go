package replayer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/replayer/apiclient"
)

// statusWindow is what GET /api/v1/status's per-integration counts cover.
const statusWindow = time.Hour

func (r *Replayer) status(w http.ResponseWriter, req *http.Request) {
	s, err := r.Status(req.Context(), time.Now())
	if err != nil {
		r.writeFailure(w, failure{call: "status"}, err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

// Status is health at a glance (GET /api/v1/status, `intake status`, the
// console's overview): INTAKE_IN's backlog as the processors' durable sees
// it, and per integration over the last hour the events accepted (and per
// second), duplicates, failed and quarantined, processing lag without
// replays, the events retrying now, its messages waiting in INTAKE_IN (how
// many, the oldest's age), and the requests ingress refused by status code
// and reason.
func (r *Replayer) Status(ctx context.Context, now time.Time) (apiclient.Status, error) {
	s := apiclient.Status{At: now.UTC(), Window: statusWindow.String()}
	var err error
	if s.Stream, err = r.streamStatus(ctx, now); err != nil {
		return s, err
	}
	since := now.Add(-statusWindow)
	by := map[string]*apiclient.IntegrationStatus{}
	get := func(name string) *apiclient.IntegrationStatus {
		if x, ok := by[name]; ok {
			return x
		}
		x := &apiclient.IntegrationStatus{Name: name, LagP50: "0s", LagP95: "0s", Refusals: []apiclient.Refusal{}, Backlog: new(uint64)}
		by[name] = x
		return x
	}
	for _, name := range r.o.Integrations {
		get(name)
	}
	received, err := r.o.Store.ReceivedSince(ctx, since)
	if err != nil {
		return s, err
	}
	for _, c := range received {
		x := get(c.Integration)
		x.Accepted, x.Duplicates = c.Events, c.Duplicates
		x.PerSecond = float64(c.Events) / statusWindow.Seconds()
		x.LagP50, x.LagP95 = c.LagP50.String(), c.LagP95.String()
	}
	unresolved, err := r.o.Store.UnresolvedSince(ctx, since)
	if err != nil {
		return s, err
	}
	for _, u := range unresolved {
		if x := get(u.Integration); u.Status == string(inbox.StatusFailed) {
			x.Failed = u.Count
		} else {
			x.Quarantined = u.Count
		}
	}
	retrying, err := r.o.Store.RetryingCounts(ctx)
	if err != nil {
		return s, err
	}
	for name, n := range retrying {
		get(name).Retrying = int64(n)
	}
	refused, err := r.o.Store.RefusalsSince(ctx, since)
	if err != nil {
		return s, err
	}
	for _, c := range refused {
		x := get(c.Integration)
		x.Refused += c.Count
		x.Refusals = append(x.Refusals, apiclient.Refusal{StatusCode: c.StatusCode, Reason: c.Reason, Count: c.Count})
	}
	for name, at := range s.Stream.OldestByIntegration {
		x := get(name)
		t := at
		x.OldestUnprocessedAt, x.OldestAgeSeconds = &t, now.Sub(at).Seconds()
		x.Backlog = nil // uncounted, unless counted below
		if n, ok := s.Stream.BacklogByIntegration[name]; ok {
			x.Backlog = &n
		}
	}
	for name, x := range by {
		if r.mine(name) {
			s.Integrations = append(s.Integrations, *x)
		}
	}
	slices.SortFunc(s.Integrations, func(a, b apiclient.IntegrationStatus) int { return strings.Compare(a.Name, b.Name) })
	return s, nil
}

// backlogSlotWait bounds how long GET /api/v1/status waits for a scan
// slot to count an integration's backlog: past it, the count is null.
const backlogSlotWait = 2 * time.Second

// countBacklog counts the messages on subject from sequence from on: the
// pending count of a scan slot's consumer as created (nothing is pulled),
// deleted at once. NATS counts a durable's backlog, not a subject's.
func (r *Replayer) countBacklog(ctx context.Context, s jetstream.Stream, subject string, from uint64) (uint64, error) {
	wctx, cancel := context.WithTimeout(ctx, backlogSlotWait)
	defer cancel()
	cons, err := createScanConsumer(wctx, s, scanConfig(scanRange{From: from, Subjects: []string{subject}}))
	if err != nil {
		return 0, err
	}
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer dcancel()
	_ = s.DeleteConsumer(dctx, cons.CachedInfo().Name) // else the server deletes it after scanInactiveThreshold
	return cons.CachedInfo().NumPending, nil
}

// streamStatus reads the processors' durable: undelivered and unacked
// counts, and the oldest message past its ack floor on the subjects it
// (this replayer's shard) consumes.
func (r *Replayer) streamStatus(ctx context.Context, now time.Time) (apiclient.StreamStatus, error) {
	st := apiclient.StreamStatus{Durable: r.durable()}
	c, err := r.o.JS.Consumer(ctx, envelope.StreamIn, st.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return st, nil // no processor has started yet
	}
	if err != nil {
		return st, fmt.Errorf("consumer %s: %w", st.Durable, err)
	}
	info := c.CachedInfo()
	st.Pending, st.AckPending, st.AckFloor, st.Delivered = info.NumPending, info.NumAckPending, info.AckFloor.Stream, info.Delivered.Stream
	if info.NumPending == 0 && info.NumAckPending == 0 {
		return st, nil
	}
	s, err := r.o.JS.Stream(ctx, envelope.StreamIn)
	if err != nil {
		return st, fmt.Errorf("stream %s: %w", envelope.StreamIn, err)
	}
	// Per integration where they are known (the oldest of each is on the
	// overview and in `intake status`), else the shard's or every subject.
	type probe struct{ integration, subject string }
	var probes []probe
	for _, name := range r.o.Integrations {
		if r.mine(name) {
			probes = append(probes, probe{name, envelope.SubjectInPrefix(name) + ">"})
		}
	}
	if len(probes) == 0 {
		subjects := r.inSubjects("")
		if subjects == nil {
			subjects = []string{envelope.SubjectInAll}
		}
		for _, subj := range subjects {
			probes = append(probes, probe{"", subj})
		}
	}
	for _, pr := range probes {
		m, err := s.GetMsg(ctx, st.AckFloor+1, jetstream.WithGetMsgSubject(pr.subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return st, fmt.Errorf("stream %s: oldest unprocessed message: %w", envelope.StreamIn, err)
		}
		t := m.Time.UTC()
		if pr.integration != "" {
			if st.OldestByIntegration == nil {
				st.OldestByIntegration, st.BacklogByIntegration = map[string]time.Time{}, map[string]uint64{}
			}
			st.OldestByIntegration[pr.integration] = t
			// The oldest is at m.Sequence: count from there.
			if n, err := r.countBacklog(ctx, s, pr.subject, m.Sequence); err == nil {
				st.BacklogByIntegration[pr.integration] = n
			} else {
				r.o.Log.Warn("status: backlog of an integration not counted", "integration", pr.integration, "err", err)
			}
		}
		if st.OldestUnprocessedAt == nil || t.Before(*st.OldestUnprocessedAt) {
			st.OldestUnprocessedAt = &t
		}
	}
	if st.OldestUnprocessedAt != nil {
		st.OldestAgeSeconds = now.Sub(*st.OldestUnprocessedAt).Seconds()
	}
	return st, nil
}
