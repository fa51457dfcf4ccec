package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/envelope"
)

// Result is the verdict of a run and what it is based on.
type Result struct {
	Events  int
	Cluster bool
	Control bool // the negative control (Options.Control): it must fail
	// SQLHandler: the business rows came from a SQL handler in the config
	// (Options.Handler HandlerSQL), not the Go one.
	SQLHandler bool
	// Partition: a partition run (Options.Partition); its control turns
	// the processors' Postgres bounds off.
	Partition bool
	// Failover: a primary and a standby, failed over mid-run (Async:
	// replicated asynchronously).
	Failover bool
	Async    bool

	// What the client did.
	HTTPDeliveries int            // HTTP attempts, retries and dropped ones included
	LostResponses  int            // attempts whose answer the client dropped
	Answers        map[string]int // "200 accepted", "503 unavailable", "response dropped", …
	LateDeliveries int            // deliveries sent after the duplicate window

	// The faults as they happened.
	Faults         []FaultRecord
	ProcessorKills int
	NATSFaults     int
	PostgresFaults int
	// PostgresRejoins: with Failover, the old primary back as a standby.
	PostgresRejoins int
	Notes           []string // roles that failed a start while a dependency was down

	// The re-drive (Failover): whether the replayer ran with it, and how
	// many events it published again, from the replays audit table and
	// from its metric intake_redriven_events_total (-1: no answer).
	RedriveConfigured bool
	RedrivenAudit     int
	RedrivenMetric    int

	// Whether the failover bit (Failover; see checkFailover): bytes of WAL
	// the primary wrote between the standby's cut and its kill, and the
	// processors' database failures logged from the cut until failoverTail
	// after the promotion (-1: unknown).
	WALAfterCut int64
	DBFailures  int
	// NoCut: the redelivered outcomes the processors counted from the kill
	// until each committed on the new primary (-1: not measured), on how
	// many processors: commits that landed on the standby while their
	// client saw the connection drop. RedeliveredClean: no processor kill
	// from an ack deadline before the kill on, which could add its own.
	NoCut             bool
	RedeliveredAtKill int
	RedeliveredProcs  int
	RedeliveredClean  bool

	// The evidence.
	Effects           int // rows in the business table
	DuplicateEffects  int // rows beyond the first for one event
	Unacknowledged    int // events that never got a 2xx (or PubAck)
	Lost              int // acknowledged events neither applied nor recorded stale
	Conflicts         int // injected same-id-different-payload events
	ConflictsRecorded int // … found in intake.conflicts with the other payload's hash
	Ordered           int // events with an object version
	Objects           int
	Stale             int // ordered events recorded stale in the inbox (and not applied)
	InMessages        int // messages on INTAKE_IN
	InboxCaught       int // same-payload copies on INTAKE_IN beyond the first: duplicates only the inbox could stop
	LatePastWindow    int // late events whose late delivery is on INTAKE_IN as a second copy
	OutMessages       int // messages on INTAKE_OUT
	OutEvents         int // distinct events on INTAKE_OUT
	// OutSameIDRepeats are copies of one outbox message beyond the first
	// under the same Nats-Msg-Id, past the duplicate window: a relay
	// re-publish, or a re-driven event's outbox message (its id is
	// deterministic). Informational: subscribers deduplicate by
	// Nats-Msg-Id; the verdict counts distinct ids per event.
	OutSameIDRepeats int
	// OutFromLostCommits are events on INTAKE_OUT that are not applied:
	// their execution was published and then lost with an asynchronous
	// primary, and when the re-drive ran them again a newer version of
	// their object had been applied, so the ordering guard recorded them
	// stale. Allowed only with Async, for re-driven stale events: the cost
	// of asynchronous replication docs/failover.md describes. Anywhere
	// else it is a violation.
	OutFromLostCommits int

	// From the client's first 2xx to the inbox's processed_at.
	P50, P95, P99, Max time.Duration
	// LongestPause is the longest time in which acknowledged events waited
	// and the inbox processed none: how long the pipeline stood still.
	LongestPause time.Duration

	LoadDuration time.Duration
	Duration     time.Duration

	Violations []string
}

// OK reports whether the run found no violation.
func (r *Result) OK() bool { return len(r.Violations) == 0 }

// Deliveries counts every HTTP delivery attempt, retries and dropped
// responses included.
func (r *Result) Deliveries() int { return r.HTTPDeliveries }

// Line is the one closing line.
func (r *Result) Line() string {
	tag := ""
	if r.Cluster {
		tag = " (3-node NATS cluster)"
	}
	if r.Failover {
		tag += fmt.Sprintf(" (Postgres failover, %s replication, %d database failures at the kill, %s)",
			replicationMode(r.Async), r.DBFailures, r.redriven())
	}
	if r.SQLHandler {
		tag += " (SQL handler)"
	}
	switch {
	case r.Control && r.Partition:
		tag += " (negative control: the processors' Postgres bounds off)"
	case r.Control:
		tag += " (negative control: effects outside the inbox transaction)"
	}
	verdict := "PASS"
	if !r.OK() {
		verdict = fmt.Sprintf("FAIL (%d violations)", len(r.Violations))
	}
	return fmt.Sprintf("chaos%s: %d events, %d deliveries, %d duplicate effects, %d lost, %d/%d conflicts, %d stale, p50 %s p95 %s p99 %s — %s",
		tag, r.Events, r.Deliveries(), r.DuplicateEffects, r.Lost+r.Unacknowledged, r.ConflictsRecorded, r.Conflicts,
		r.Stale, ms(r.P50), ms(r.P95), ms(r.P99), verdict)
}

// Summary is the detail printed above the closing line.
func (r *Result) Summary() string {
	var b strings.Builder
	pg := fmt.Sprintf("%d Postgres", r.PostgresFaults)
	if r.Failover {
		pg = fmt.Sprintf("%d Postgres failover, %d rejoin", r.PostgresFaults, r.PostgresRejoins)
	}
	fmt.Fprintf(&b, "faults: %d processor kills, %d NATS, %s, %d responses dropped\n",
		r.ProcessorKills, r.NATSFaults, pg, r.LostResponses)
	for _, f := range r.Faults {
		fmt.Fprintf(&b, "  %8s  %3.0f%%  %s\n", f.At.Round(100*time.Millisecond), 100*f.Progress, f.What)
	}
	keys := slices.Sorted(maps.Keys(r.Answers))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, r.Answers[k])
	}
	fmt.Fprintf(&b, "answers: %s\n", strings.Join(parts, ", "))
	fmt.Fprintf(&b, "INTAKE_IN: %d messages; %d same-payload copies past the stream's dedup, stopped by the inbox (%d of %d late deliveries among them)\n",
		r.InMessages, r.InboxCaught, r.LatePastWindow, r.LateDeliveries)
	fmt.Fprintf(&b, "evidence: %d business effects; %d ordered events on %d objects, %d stale; INTAKE_OUT %d messages for %d events, one Nats-Msg-Id each (%d same-id repeats past the window: informational, subscribers deduplicate by Nats-Msg-Id)\n",
		r.Effects, r.Ordered, r.Objects, r.Stale, r.OutMessages, r.OutEvents, r.OutSameIDRepeats)
	if r.Failover {
		fmt.Fprintf(&b, "failover: %s\n", r.biteDetail())
		fmt.Fprintf(&b, "re-drive: %s\n", r.redriveDetail())
	}
	if r.OutFromLostCommits > 0 {
		fmt.Fprintf(&b, "INTAKE_OUT: %d events published by an execution the failover lost, re-driven and then stale "+
			"(a newer version of their object had been applied meanwhile): subscribers saw an output the database no "+
			"longer records — the cost of asynchronous replication (docs/failover.md)\n", r.OutFromLostCommits)
	}
	fmt.Fprintf(&b, "latency 2xx→processed: p50 %s p95 %s p99 %s max %s; longest pause in processing %s; load %s, run %s\n",
		ms(r.P50), ms(r.P95), ms(r.P99), ms(r.Max), ms(r.LongestPause), r.LoadDuration.Round(100*time.Millisecond), r.Duration.Round(100*time.Millisecond))
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "VIOLATION: %s\n", v)
	}
	return b.String()
}

func replicationMode(async bool) string {
	if async {
		return "asynchronous"
	}
	return "synchronous"
}

// redriven says, for the closing line, how many events were re-driven.
func (r *Result) redriven() string {
	switch {
	case !r.RedriveConfigured:
		return "no re-drive"
	case r.RedrivenAudit >= 0:
		return strconv.Itoa(r.RedrivenAudit) + " re-driven"
	case r.RedrivenMetric >= 0:
		return strconv.Itoa(r.RedrivenMetric) + " re-driven"
	}
	return "re-driven: no count"
}

func (r *Result) redriveDetail() string {
	if !r.RedriveConfigured {
		return "not configured (this build's config has no api.redrive_interval): commits lost with the primary stay lost"
	}
	count := func(n int) string {
		if n < 0 {
			return "no answer"
		}
		return strconv.Itoa(n) + " events"
	}
	return fmt.Sprintf("intake.replays %s, %s %s", count(r.RedrivenAudit), redrivenMetric, count(r.RedrivenMetric))
}

func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

func (r *Result) checkFaults(o Options) {
	if r.ProcessorKills < o.ProcessorKills {
		r.violate("only %d of %d processor kills happened", r.ProcessorKills, o.ProcessorKills)
	}
	if !o.NoNATSFault && r.NATSFaults == 0 {
		r.violate("the NATS fault did not happen")
	}
	if !o.NoPostgresFault && r.PostgresFaults == 0 {
		r.violate("the Postgres fault did not happen")
	}
	if !o.NoPostgresFault && o.Failover && r.PostgresRejoins == 0 {
		r.violate("the old primary did not rejoin as a standby")
	}
}

func (r *Result) violate(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

// evidence is what the run left behind, read after the pipeline settled.
type evidence struct {
	effects        map[string][]effectRow // by event id, in commit order for one object
	foreignEffects []string               // keys that are not the run's events
	inbox          map[string]inboxRow
	foreignInbox   []string
	conflicts      map[string][]conflictRow
	objVersions    map[string]int64
	out            map[string]map[string]int // event id → Nats-Msg-Id → copies on INTAKE_OUT
	foreignOut     []string
	outMessages    int
	in             map[string]map[string]int // event id → payload sha256 → copies on INTAKE_IN
	inMessages     int
	redriven       map[string]bool // event ids a re-drive replay covered
}

type effectRow struct {
	id      int64
	sha     string
	version *int64
}

type inboxRow struct {
	status      string
	sha         string
	processedAt *time.Time
}

type conflictRow struct{ original, conflicting string }

// collect reads the business table, Intake's tables and INTAKE_OUT.
func (h *harness) collect(ctx context.Context) (*evidence, error) {
	ev := &evidence{
		effects: map[string][]effectRow{}, inbox: map[string]inboxRow{}, conflicts: map[string][]conflictRow{},
		objVersions: map[string]int64{}, out: map[string]map[string]int{}, in: map[string]map[string]int{},
		redriven: map[string]bool{},
	}
	for _, read := range []func(context.Context, *evidence) error{
		h.readEffects, h.readInbox, h.readRedriven, h.readConflicts, h.readObjectVersions,
	} {
		if err := read(ctx, ev); err != nil {
			return nil, err
		}
	}
	if err := h.readStreamsRetrying(ctx, ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// ourKey reports whether key is one of the run's events.
func ourKey(key envelope.Key) bool { return key.Integration == integration && key.Account == account }

// readEffects reads the business table, in commit order.
func (h *harness) readEffects(ctx context.Context, ev *evidence) error {
	rows, err := h.db.Query(ctx, `SELECT id, key, payload_sha256, object_version FROM chaos.effects ORDER BY id`)
	if err != nil {
		return fmt.Errorf("chaos: read effects: %w", err)
	}
	var id int64
	var key string
	var r effectRow
	if _, err := pgx.ForEachRow(rows, []any{&id, &key, &r.sha, &r.version}, func() error {
		r.id = id
		k, ok := envelope.ParseKey(key)
		if !ok || !ourKey(k) {
			ev.foreignEffects = append(ev.foreignEffects, key)
			return nil
		}
		ev.effects[k.EventID] = append(ev.effects[k.EventID], r)
		return nil
	}); err != nil {
		return fmt.Errorf("chaos: read effects: %w", err)
	}
	return nil
}

// readInbox reads intake.inbox.
func (h *harness) readInbox(ctx context.Context, ev *evidence) error {
	rows, err := h.db.Query(ctx, `SELECT integration, account, event_id, status, payload_sha256, processed_at FROM intake.inbox`)
	if err != nil {
		return fmt.Errorf("chaos: read inbox: %w", err)
	}
	var k envelope.Key
	var in inboxRow
	if _, err := pgx.ForEachRow(rows, []any{&k.Integration, &k.Account, &k.EventID, &in.status, &in.sha, &in.processedAt}, func() error {
		if !ourKey(k) {
			ev.foreignInbox = append(ev.foreignInbox, k.String())
			return nil
		}
		ev.inbox[k.EventID] = in
		return nil
	}); err != nil {
		return fmt.Errorf("chaos: read inbox: %w", err)
	}
	return nil
}

// readRedriven reads which events a re-drive replay covered.
func (h *harness) readRedriven(ctx context.Context, ev *evidence) error {
	rows, err := h.db.Query(ctx, `SELECT i.integration, i.account, i.event_id FROM intake.replay_items i
		JOIN intake.replays r ON r.id = i.replay_id WHERE r.requested_by = 'redrive'`)
	if err != nil {
		return fmt.Errorf("chaos: read re-driven events: %w", err)
	}
	var k envelope.Key
	if _, err := pgx.ForEachRow(rows, []any{&k.Integration, &k.Account, &k.EventID}, func() error {
		if ourKey(k) {
			ev.redriven[k.EventID] = true
		}
		return nil
	}); err != nil {
		return fmt.Errorf("chaos: read re-driven events: %w", err)
	}
	return nil
}

// readConflicts reads intake.conflicts.
func (h *harness) readConflicts(ctx context.Context, ev *evidence) error {
	rows, err := h.db.Query(ctx, `SELECT integration, account, event_id, original_sha256, conflicting_sha256 FROM intake.conflicts`)
	if err != nil {
		return fmt.Errorf("chaos: read conflicts: %w", err)
	}
	var k envelope.Key
	var c conflictRow
	if _, err := pgx.ForEachRow(rows, []any{&k.Integration, &k.Account, &k.EventID, &c.original, &c.conflicting}, func() error {
		ev.conflicts[k.EventID] = append(ev.conflicts[k.EventID], c)
		return nil
	}); err != nil {
		return fmt.Errorf("chaos: read conflicts: %w", err)
	}
	return nil
}

// readObjectVersions reads the ordering guard's stored versions.
func (h *harness) readObjectVersions(ctx context.Context, ev *evidence) error {
	rows, err := h.db.Query(ctx, `SELECT object_id, version FROM intake.object_versions WHERE integration = $1`, integration)
	if err != nil {
		return fmt.Errorf("chaos: read object versions: %w", err)
	}
	var obj string
	var ver int64
	if _, err := pgx.ForEachRow(rows, []any{&obj, &ver}, func() error {
		ev.objVersions[obj] = ver
		return nil
	}); err != nil {
		return fmt.Errorf("chaos: read object versions: %w", err)
	}
	return nil
}

// readStreamsRetrying tries readStreams up to 5 times, 2s apart: a cluster
// may still be electing a leader after the last fault, and the verdict
// should not give up on that.
func (h *harness) readStreamsRetrying(ctx context.Context, ev *evidence) error {
	var err error
	for attempt := range 5 {
		if err = h.readStreams(ctx, ev); err == nil {
			return nil
		}
		h.logf("reading the streams (attempt %d): %v", attempt+1, err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(2 * time.Second):
		}
	}
	return err
}

// readStreams reads INTAKE_OUT (copies per event and outbox message id) and
// INTAKE_IN (copies per event and payload: a payload twice in the stream is
// a duplicate that only the inbox could stop).
func (h *harness) readStreams(ctx context.Context, ev *evidence) error {
	ev.out, ev.in, ev.foreignOut, ev.outMessages, ev.inMessages = map[string]map[string]int{}, map[string]map[string]int{}, nil, 0, 0
	ours := func(m jetstream.Msg) (envelope.Key, bool) {
		k, ok := envelope.ParseKey(m.Headers().Get(envelope.HeaderKey))
		return k, ok && k.Integration == integration && k.Account == account
	}
	err := h.readStream(ctx, envelope.StreamOut, func(m jetstream.Msg) {
		ev.outMessages++
		k, ok := ours(m)
		if !ok {
			ev.foreignOut = append(ev.foreignOut, m.Headers().Get(envelope.HeaderKey))
			return
		}
		if ev.out[k.EventID] == nil {
			ev.out[k.EventID] = map[string]int{}
		}
		ev.out[k.EventID][m.Headers().Get(envelope.HeaderMsgID)]++
	})
	if err != nil {
		return err
	}
	return h.readStream(ctx, envelope.StreamIn, func(m jetstream.Msg) {
		ev.inMessages++
		k, ok := ours(m)
		if !ok {
			return
		}
		if ev.in[k.EventID] == nil {
			ev.in[k.EventID] = map[string]int{}
		}
		ev.in[k.EventID][m.Headers().Get(envelope.HeaderPayloadSHA256)]++
	})
}

// readStream passes every message of a stream to f, in order, with an
// ordered consumer.
func (h *harness) readStream(ctx context.Context, name string, f func(jetstream.Msg)) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	s, err := h.js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("chaos: %s: %w", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("chaos: %s: %w", name, err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return fmt.Errorf("chaos: %s consumer: %w", name, err)
	}
	read := 0
	for ctx.Err() == nil {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return fmt.Errorf("chaos: read %s: %w", name, err)
		}
		last := uint64(0)
		for m := range batch.Messages() {
			read++
			f(m)
			if md, err := m.Metadata(); err == nil {
				last = md.Sequence.Stream
			}
		}
		if err := batch.Error(); err != nil {
			return fmt.Errorf("chaos: read %s: %w", name, err)
		}
		if last >= info.State.LastSeq {
			return nil
		}
	}
	return fmt.Errorf("chaos: read %s: %w (%d of %d messages)", name, ctx.Err(), read, info.State.Msgs)
}

// judge compares what the client sent and saw with the evidence.
func judge(o Options, events []*event, ev *evidence) *Result {
	j := &judgement{o: o, ev: ev, r: &Result{Events: len(events)},
		counts: map[string]int{}, examples: map[string][]string{}, objects: map[string][]*event{}}
	for _, e := range events {
		f := j.facts(e)
		j.checkApplied(e, f)
		j.checkConflict(e, f)
		j.checkStreamIn(e, f)
		j.countOrdered(e, f)
		j.checkStreamOut(e, f)
		j.latency(e, f)
	}
	j.checkOrdering()
	j.checkForeign()
	j.r.OutMessages, j.r.InMessages = ev.outMessages, ev.inMessages
	j.summarize(events)
	return j.r
}

// judgement is a verdict in the making: the result's counts so far, and
// each kind of violation with its count and up to 5 example ids.
type judgement struct {
	o        Options
	ev       *evidence
	r        *Result
	counts   map[string]int
	examples map[string][]string
	lat      []time.Duration     // first 2xx to processed_at, per event
	objects  map[string][]*event // ordered events by object
}

// bad counts one violation of kind, keeping id as an example.
func (j *judgement) bad(kind, id string) {
	j.counts[kind]++
	if len(j.examples[kind]) < 5 {
		j.examples[kind] = append(j.examples[kind], id)
	}
}

// eventFacts is what the evidence says about one event.
type eventFacts struct {
	effs     []effectRow
	in       inboxRow
	hasInbox bool
	applied  bool // it has a business effect
	acked    bool // the client saw a 2xx
	stale    bool // the inbox recorded it stale
}

// facts reads what the evidence holds for e.
func (j *judgement) facts(e *event) eventFacts {
	f := eventFacts{effs: j.ev.effects[e.id], acked: e.first2xx.Load() != 0}
	f.in, f.hasInbox = j.ev.inbox[e.id]
	f.applied = len(f.effs) > 0
	f.stale = f.hasInbox && f.in.status == "stale"
	return f
}

// checkApplied: an acknowledged event is applied exactly once, with its
// inbox row processed and holding the applied payload, or recorded stale
// (an ordered event only) and not applied.
func (j *judgement) checkApplied(e *event, f eventFacts) {
	j.r.Effects += len(f.effs)
	if !f.acked {
		j.r.Unacknowledged++
		j.bad("never acknowledged (no 2xx before the run ended)", e.id)
	}
	if len(f.effs) > 1 {
		j.r.DuplicateEffects += len(f.effs) - 1
		j.bad("duplicate business effects", fmt.Sprintf("%s ×%d", e.id, len(f.effs)))
	}
	switch {
	case f.applied && f.stale:
		j.bad("applied although recorded stale", e.id)
	case !f.applied && !f.stale && f.acked:
		j.r.Lost++
		status := "no inbox row"
		if f.hasInbox {
			status = "inbox " + f.in.status
		}
		j.bad("lost: acknowledged but never applied", e.id+" ("+status+")")
	case f.applied && !f.hasInbox:
		j.bad("business effect without inbox row", e.id)
	case f.applied && f.in.status != "processed":
		j.bad("applied but inbox status is not processed", e.id+" ("+f.in.status+")")
	}
	if f.applied && f.hasInbox && f.effs[0].sha != f.in.sha {
		j.bad("applied payload differs from the inbox's payload", e.id)
	}
	if f.stale && e.kind != kindOrdered {
		j.bad("stale without an object version", e.id)
	}
}

// checkConflict: a conflict event's inbox holds one of its payloads and
// intake.conflicts the other; no other event is recorded as a conflict.
func (j *judgement) checkConflict(e *event, f eventFacts) {
	if e.kind != kindConflict {
		if n := len(j.ev.conflicts[e.id]); n > 0 {
			j.bad("false conflict (same payload recorded as a conflict)", e.id)
		}
		return
	}
	j.r.Conflicts++
	if !f.hasInbox || (f.in.sha != e.sha && f.in.sha != e.shaB) {
		j.bad("conflict event: inbox holds neither payload", e.id)
		return
	}
	other := e.shaB
	if f.in.sha == e.shaB {
		other = e.sha
	}
	found := false
	for _, c := range j.ev.conflicts[e.id] {
		if c.conflicting == other && c.original == f.in.sha {
			found = true
		}
	}
	if found {
		j.r.ConflictsRecorded++
	} else {
		j.bad("conflict not recorded in intake.conflicts", e.id)
	}
}

// checkStreamIn counts the copies on INTAKE_IN that only the inbox could
// stop, and requires every acknowledged event on the stream.
func (j *judgement) checkStreamIn(e *event, f eventFacts) {
	inCopies := j.ev.in[e.id]
	for _, n := range inCopies {
		j.r.InboxCaught += n - 1
	}
	if e.kind == kindLate {
		j.r.LateDeliveries++
		if inCopies[e.sha] >= 2 {
			j.r.LatePastWindow++
		}
	}
	if f.acked && len(inCopies) == 0 {
		j.bad("acknowledged but not on INTAKE_IN (an acknowledged write lost by the stream)", e.id)
	}
}

// countOrdered counts an ordered event and files it under its object for
// checkOrdering.
func (j *judgement) countOrdered(e *event, f eventFacts) {
	if e.kind != kindOrdered {
		return
	}
	j.r.Ordered++
	j.objects[e.object] = append(j.objects[e.object], e)
	if f.stale && !f.applied {
		j.r.Stale++
	}
}

// checkStreamOut: an applied event is on INTAKE_OUT under exactly one
// Nats-Msg-Id, and an event not applied is not there (except the output
// of a commit lost with an asynchronous primary: OutFromLostCommits).
func (j *judgement) checkStreamOut(e *event, f eventFacts) {
	copies := j.ev.out[e.id]
	if len(copies) > 0 {
		j.r.OutEvents++
	}
	// copies is by Nats-Msg-Id: an applied event has exactly one id.
	for _, n := range copies {
		j.r.OutSameIDRepeats += n - 1
	}
	switch {
	case f.applied && len(copies) == 0:
		j.bad("applied but missing on INTAKE_OUT", e.id)
	case len(copies) > 1:
		j.bad("several outbox message ids on INTAKE_OUT for one event", fmt.Sprintf("%s ×%d", e.id, len(copies)))
	case !f.applied && len(copies) > 0 && j.o.Async && f.stale && j.ev.redriven[e.id]:
		j.r.OutFromLostCommits++
	case !f.applied && len(copies) > 0:
		j.bad("on INTAKE_OUT but never applied", e.id)
	}
}

// latency keeps an acknowledged, processed event's time from its first
// 2xx to the inbox's processed_at.
func (j *judgement) latency(e *event, f eventFacts) {
	if f.acked && f.hasInbox && f.in.processedAt != nil {
		j.lat = append(j.lat, max(0, f.in.processedAt.Sub(time.Unix(0, e.first2xx.Load()))))
	}
}

// checkOrdering: per object, versions applied in increasing order, the
// newest applied, and the guard's stored version the newest.
func (j *judgement) checkOrdering() {
	j.r.Objects = len(j.objects)
	for obj, evs := range j.objects {
		var applied []effectRow
		newest := int64(0)
		for _, e := range evs {
			applied = append(applied, j.ev.effects[e.id]...)
			newest = max(newest, e.version)
		}
		sort.Slice(applied, func(i, k int) bool { return applied[i].id < applied[k].id })
		var prev int64
		newestApplied := false
		for _, a := range applied {
			if a.version == nil {
				j.bad("ordered effect without object version", obj)
				continue
			}
			if *a.version <= prev {
				j.bad("object version applied after a newer one", fmt.Sprintf("%s v%d after v%d", obj, *a.version, prev))
			}
			prev = max(prev, *a.version)
			if *a.version == newest {
				newestApplied = true
			}
		}
		if !newestApplied {
			j.bad("newest object version not applied", obj)
		}
		if got := j.ev.objVersions[obj]; got != newest {
			j.bad("intake.object_versions does not hold the newest version", fmt.Sprintf("%s: %d, want %d", obj, got, newest))
		}
	}
}

// checkForeign: nothing in the business table, the inbox or INTAKE_OUT
// belongs to a key the run never sent.
func (j *judgement) checkForeign() {
	for _, k := range j.ev.foreignEffects {
		j.bad("business effect for a key the run never sent", k)
	}
	for _, k := range j.ev.foreignInbox {
		j.bad("inbox row for a key the run never sent", k)
	}
	for _, k := range j.ev.foreignOut {
		j.bad("INTAKE_OUT message for a key the run never sent", k)
	}
}

// summarize writes one violation per kind, sorted by kind, then the
// latency percentiles and the longest pause.
func (j *judgement) summarize(events []*event) {
	for _, kind := range slices.Sorted(maps.Keys(j.counts)) {
		j.r.violate("%s: %d (e.g. %s)", kind, j.counts[kind], strings.Join(j.examples[kind], ", "))
	}
	j.r.LongestPause = longestPause(events, j.ev.inbox)
	lat := j.lat
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	j.r.P50, j.r.P95, j.r.P99 = pct(0.50), pct(0.95), pct(0.99)
	if len(lat) > 0 {
		j.r.Max = lat[len(lat)-1]
	}
}

// longestPause is the longest interval in which at least one acknowledged
// event waited and no event was processed (inbox processed_at). Sorted by
// processed time, the events processed at or after the k-th one include
// every event waiting just before it; the earliest acknowledgement among
// them (a suffix minimum) says since when something waited.
func longestPause(events []*event, inbox map[string]inboxRow) time.Duration {
	type point struct{ processed, acked time.Time }
	var pts []point
	for _, e := range events {
		in, ok := inbox[e.id]
		if n := e.first2xx.Load(); ok && n != 0 && in.processedAt != nil {
			pts = append(pts, point{*in.processedAt, time.Unix(0, n)})
		}
	}
	slices.SortFunc(pts, func(a, b point) int { return a.processed.Compare(b.processed) })
	var longest time.Duration
	earliest := time.Time{}
	for k := len(pts) - 1; k > 0; k-- {
		if earliest.IsZero() || pts[k].acked.Before(earliest) {
			earliest = pts[k].acked
		}
		from := pts[k-1].processed
		if earliest.After(from) {
			from = earliest
		}
		longest = max(longest, pts[k].processed.Sub(from))
	}
	return longest
}
