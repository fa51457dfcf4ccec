package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/config"
)

// The dispatcher stage's two scenarios, each on a destination (and a
// receiver) of its own, with 1 KiB bodies, judged from the receiver's
// record (checkDeliveries), with Intake's delivery log checked beside it:
//
//   - outage: messages flow at Config.DispatchRate; the receiver goes down
//     (listener and connections closed: connection refused) for
//     Config.Outage, then comes back and the flow stops. Reported: the
//     attempts made during the outage (the breaker's probes), how long
//     after the restore the first delivery and the last came.
//   - kills: a backlog the size of Duration at the dispatcher's measured
//     rate, plus the flow; the dispatcher is killed with SIGKILL at even
//     steps of the backlog's progress and started again at once. What it
//     held comes back after the consumer's ack wait (the destination's
//     timeout + 30 s).

// DeliveryCheck is what a scenario's receiver recorded, against what was
// published.
type DeliveryCheck struct {
	Scenario  string `json:"scenario"`
	Published int    `json:"published"`
	// Received is how many published messages arrived at least once;
	// Deliveries counts every delivery of them, so Duplicates =
	// Deliveries - Received.
	Received   int `json:"received"`
	Deliveries int `json:"deliveries"`
	Duplicates int `json:"duplicates"`
	Lost       int `json:"lost"`
	// OtherID counts messages that arrived under a webhook-id other than
	// their Nats-Msg-Id, or under two: a duplicate the receiver could not
	// recognise.
	OtherID int `json:"other_webhook_id"`
	// Unknown counts deliveries of messages never published, or whose body
	// had no id.
	Unknown       int `json:"unknown"`
	BadSignatures int `json:"bad_signatures"`
	// Intake's own delivery log, checked too: messages without a delivered
	// row, failed rows, the most attempts any message took.
	Unlogged   int `json:"no_delivered_row"`
	Failed     int `json:"failed_rows"`
	MaxAttempt int `json:"max_attempt"`
	// The outage's timings, from the receiver's record.
	Down                  string `json:"down,omitempty"`
	AttemptsDuringOutage  int    `json:"attempts_during_outage,omitempty"`
	FirstAfterRestore     string `json:"first_delivery_after_restore,omitempty"`
	DrainedAfterRestore   string `json:"drained_after_restore,omitempty"`
	Kills                 int    `json:"kills,omitempty"`
	DrainedAfterLastStart string `json:"drained_after_last_restart,omitempty"`
	Note                  string `json:"note,omitempty"`
}

// OK reports that nothing was lost and every duplicate was recognisable.
func (c DeliveryCheck) OK() bool { return c.Published > 0 && c.Problems() == "" }

// Problems names what failed, "" when nothing did.
func (c DeliveryCheck) Problems() string {
	var p []string
	for _, f := range []struct {
		n    int
		what string
	}{{c.Lost, "lost"}, {c.OtherID, "under another webhook-id"}, {c.Unknown, "unknown deliveries"},
		{c.BadSignatures, "bad signatures"}, {c.Unlogged, "without a delivered row"}, {c.Failed, "failed rows"}} {
		if f.n > 0 {
			p = append(p, fmt.Sprintf("%d %s", f.n, f.what))
		}
	}
	if c.Published == 0 {
		p = append(p, "nothing published")
	}
	return strings.Join(p, ", ")
}

// checkDeliveries compares what was published (event id → Nats-Msg-Id,
// the webhook-id its deliveries must carry) with what the receiver got.
func checkDeliveries(published map[string]string, got map[string]receipt) DeliveryCheck {
	c := DeliveryCheck{Published: len(published)}
	for id, want := range published {
		r, ok := got[id]
		if !ok {
			c.Lost++
			continue
		}
		c.Received++
		c.Deliveries += r.n
		if len(r.webhookIDs) != 1 || r.webhookIDs[0] != want {
			c.OtherID++
		}
	}
	for id, r := range got {
		if _, ok := published[id]; !ok {
			c.Unknown += r.n
		}
	}
	c.Duplicates = c.Deliveries - c.Received
	return c
}

// judge draws the scenario's verdict from the receiver's record and checks
// Intake's delivery log of dest beside it.
func (d *dispatchRun) judge(ctx context.Context, scenario string, dest config.Destination, pub *outPublisher, rc *receiver) (DeliveryCheck, map[string]receipt, error) {
	got, bad, unparsed := rc.record()
	published := pub.published()
	c := checkDeliveries(published, got)
	c.Scenario, c.BadSignatures, c.Unknown = scenario, bad, c.Unknown+unparsed
	rows, err := d.env.st.Pool().Query(ctx, `SELECT msg_id, outcome, attempt FROM intake.dispatch_attempts WHERE destination = $1`, dest.Name)
	if err != nil {
		return c, got, err
	}
	delivered := map[string]bool{}
	var msgID, outcome string
	var attempt int
	if _, err := pgx.ForEachRow(rows, []any{&msgID, &outcome, &attempt}, func() error {
		switch outcome {
		case "delivered":
			delivered[msgID] = true
		case "failed":
			c.Failed++
		}
		c.MaxAttempt = max(c.MaxAttempt, attempt)
		return nil
	}); err != nil {
		return c, got, err
	}
	for _, want := range published {
		if !delivered[want] {
			c.Unlogged++
		}
	}
	return c, got, nil
}

// waitReceived waits until the receiver has every message published, up
// to wait; false when it has not.
func waitReceived(ctx context.Context, rc *receiver, pub *outPublisher, wait time.Duration) (bool, error) {
	ids := pub.ids()
	deadline := time.Now().Add(wait)
	for !rc.has(ids) {
		if time.Now().After(deadline) {
			return false, nil
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return false, err
		}
	}
	return true, nil
}

// drainBound is how long a scenario waits for the backlog after its fault:
// the breaker's longest probe wait and the fourth retry wait, on the
// schedule's scale, and at least a minute.
func (d *dispatchRun) drainBound() time.Duration {
	return max((config.MaxBreakerProbe+30*time.Minute)/d.sched.scale, time.Minute)
}

// outage holds the destination down for Config.Outage with messages
// flowing, restores it, and waits for the backlog.
func (d *dispatchRun) outage(ctx context.Context) error {
	rc, err := startReceiver(dispatchSecret)
	if err != nil {
		return err
	}
	defer rc.close()
	dest := d.destination("outage", "outage", rc.url())
	cfgPath, err := d.prepare(ctx, dest)
	if err != nil {
		return err
	}
	ch, base, err := d.startDispatcher(cfgPath, "dispatcher-outage.log")
	if err != nil {
		return err
	}
	defer ch.stop()
	if err := ch.waitReady(ctx, base+"/readyz"); err != nil {
		return err
	}
	pub := newOutPublisher(d.env.js, "outage", 1024)
	stopFlow := pub.flow(ctx, d.c.DispatchRate)
	defer stopFlow()
	// Flowing before the outage, delivered as they come.
	lead := min(max(d.c.Outage/10, 2*time.Second), 10*time.Second)
	if err := sleepCtx(ctx, lead); err != nil {
		return err
	}
	if rc.distinct() == 0 {
		return fmt.Errorf("nothing delivered in the %s before the outage (log %s)", lead, ch.log.Name())
	}
	d.log.Info("outage: destination down", "for", d.c.Outage)
	rc.down()
	downAt := time.Now()
	if err := sleepCtx(ctx, d.c.Outage); err != nil {
		return err
	}
	if err := rc.up(ctx); err != nil {
		return err
	}
	upAt := time.Now()
	if err := stopFlow(); err != nil {
		return err
	}
	d.log.Info("outage: destination restored", "published", len(pub.ids()))
	bound := d.drainBound()
	drained, err := waitReceived(ctx, rc, pub, bound)
	if err != nil {
		return err
	}
	if drained {
		if err := d.settled(ctx, dest, time.Minute); err != nil {
			return err
		}
	}
	ch.stop()
	c, got, err := d.judge(ctx, "outage", dest, pub, rc)
	if err != nil {
		return err
	}
	if err := d.env.st.Pool().QueryRow(ctx, `SELECT count(*) FROM intake.dispatch_attempts WHERE destination = $1 AND attempted_at >= $2 AND attempted_at < $3`,
		dest.Name, downAt, upAt).Scan(&c.AttemptsDuringOutage); err != nil {
		return err
	}
	var firstAfter, last time.Time
	for _, r := range got {
		if r.first.After(upAt) && (firstAfter.IsZero() || r.first.Before(firstAfter)) {
			firstAfter = r.first
		}
		if r.first.After(last) {
			last = r.first
		}
	}
	c.Down = fmtDuration(d.c.Outage)
	if !firstAfter.IsZero() {
		c.FirstAfterRestore = firstAfter.Sub(upAt).Round(100 * time.Millisecond).String()
	}
	if drained {
		c.DrainedAfterRestore = max(last.Sub(upAt), 0).Round(100 * time.Millisecond).String()
	}
	c.Note = fmt.Sprintf("receiver down (connection refused) with %.0f messages/s flowing from %s before it until the restore; schedule %s",
		d.c.DispatchRate, fmtDuration(lead), d.sched)
	if !drained {
		c.Note += fmt.Sprintf("; NOT drained %s after the restore", bound)
	}
	d.rep.Deliveries = append(d.rep.Deliveries, c)
	d.log.Info("outage: judged", "lost", c.Lost, "duplicates", c.Duplicates, "drained_after_restore", c.DrainedAfterRestore)
	return nil
}

// kills kills the dispatcher with SIGKILL Config.DispatchKills times while
// it drains a backlog with messages flowing, starting it again each time.
func (d *dispatchRun) kills(ctx context.Context) error {
	rc, err := startReceiver(dispatchSecret)
	if err != nil {
		return err
	}
	defer rc.close()
	dest := d.destination("kills", "kills", rc.url())
	cfgPath, err := d.prepare(ctx, dest)
	if err != nil {
		return err
	}
	backlog := d.c.DispatchMessages
	if backlog == 0 {
		backlog = min(max(int(d.rate1k*d.c.Duration.Seconds()), 1000), 200000)
	}
	pub := newOutPublisher(d.env.js, "kills", 1024)
	if err := pub.backlog(ctx, backlog); err != nil {
		return err
	}
	start := func(i int) (*child, error) {
		ch, base, err := d.startDispatcher(cfgPath, fmt.Sprintf("dispatcher-kills-%d.log", i))
		if err != nil {
			return nil, err
		}
		return ch, ch.waitReady(ctx, base+"/readyz")
	}
	ch, err := start(0)
	if err != nil {
		return err
	}
	stopFlow := pub.flow(ctx, d.c.DispatchRate)
	defer stopFlow()
	k := d.c.DispatchKills
	var lastStart time.Time
	for i := 1; i <= k; i++ {
		target := backlog * i / (k + 1)
		deadline := time.Now().Add(5 * time.Minute)
		for rc.distinct() < target {
			if time.Now().After(deadline) {
				return fmt.Errorf("kill %d: the receiver got %d messages of the %d awaited in 5 minutes (log %s)", i, rc.distinct(), target, ch.log.Name())
			}
			if err := sleepCtx(ctx, 2*time.Millisecond); err != nil {
				return err
			}
		}
		ch.kill()
		d.log.Info("kills: dispatcher killed", "kill", i, "received", rc.distinct())
		lastStart = time.Now()
		if ch, err = start(i); err != nil {
			return err
		}
	}
	// The flow runs a moment past the last start, into the new process.
	if err := sleepCtx(ctx, time.Second); err != nil {
		return err
	}
	if err := stopFlow(); err != nil {
		return err
	}
	wait := dest.Timeout + 30*time.Second + d.drainBound()
	drained, err := waitReceived(ctx, rc, pub, wait)
	if err != nil {
		return err
	}
	if drained {
		if err := d.settled(ctx, dest, time.Minute); err != nil {
			return err
		}
	}
	ch.stop()
	c, got, err := d.judge(ctx, "kills", dest, pub, rc)
	if err != nil {
		return err
	}
	c.Kills = k
	var last time.Time
	for _, r := range got {
		last = maxTime(last, r.first)
	}
	if drained {
		c.DrainedAfterLastStart = max(last.Sub(lastStart), 0).Round(100 * time.Millisecond).String()
	}
	c.Note = fmt.Sprintf("backlog %d, then %.0f messages/s; SIGKILL at each 1/%d of the backlog, started again at once; what a killed dispatcher held comes back after the ack wait (timeout %s + 30 s)",
		backlog, d.c.DispatchRate, k+1, fmtDuration(dest.Timeout))
	if !drained {
		c.Note += fmt.Sprintf("; NOT drained %s after the last start", wait)
	}
	d.rep.Deliveries = append(d.rep.Deliveries, c)
	d.log.Info("kills: judged", "lost", c.Lost, "duplicates", c.Duplicates)
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// printDeliveries writes the scenarios' verdicts.
func printDeliveries(w io.Writer, cs []DeliveryCheck) error {
	if len(cs) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "dispatcher scenario (the receiver's record)\tpublished\treceived\tlost\tduplicates\tunder another webhook-id\tbad signatures\tno delivered row\tfailed rows\tmax attempt\tverdict")
	for _, c := range cs {
		verdict := "ok"
		if !c.OK() {
			verdict = "FAIL: " + c.Problems()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", c.Scenario, c.Published, c.Received, c.Lost, c.Duplicates,
			c.OtherID, c.BadSignatures, c.Unlogged, c.Failed, c.MaxAttempt, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range cs {
		var parts []string
		if c.Down != "" {
			parts = append(parts, fmt.Sprintf("down %s, %d attempts during it, first delivery %s after the restore, drained %s after it",
				c.Down, c.AttemptsDuringOutage, orDash(c.FirstAfterRestore), orDash(c.DrainedAfterRestore)))
		}
		if c.Kills > 0 {
			parts = append(parts, fmt.Sprintf("%d kills, drained %s after the last start", c.Kills, orDash(c.DrainedAfterLastStart)))
		}
		parts = append(parts, c.Note)
		fmt.Fprintf(w, "  %s: %s\n", c.Scenario, strings.Join(parts, "; "))
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
