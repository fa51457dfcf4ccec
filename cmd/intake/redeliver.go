package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/replayer/apiclient"
)

func newRedeliverCmd() *cobra.Command {
	var (
		sel         rangeFlags
		run         = runOptions{what: "redelivery"}
		source      string
		destination string
		subject     string
		reason      string
		rate        int
	)
	cmd := &cobra.Command{
		Use:   "redeliver",
		Short: "Publish processed events to subscribers again (from INTAKE_OUT or the outbox)",
		Long: `redeliver publishes processed messages again on INTAKE_OUT, for a subscriber that
lost data. Nothing runs again: these are the messages the handlers emitted.

Copies carry a new Nats-Msg-Id ("redeliver:{id}:{original}") so INTAKE_OUT's duplicate
window does not swallow them, the original id in Intake-Original-Msg-Id, and every
Intake-* header unchanged: subscribers deduplicate by Intake-Key (or the original id).

From the stream (default) select an INTAKE_OUT range (--from-seq/--to-seq,
--since/--until), optionally --subject (wildcards), --tenant, --integration, --type,
--key. From the outbox (--source outbox) select --key or --since/--until (rows are kept
for outbox.retention).

--destination NAME sends the copies to that HTTP destination only
(intake.dispatch.NAME, which subscribers of intake.out.> never see), under their
original webhook-id. --source failed --destination NAME takes the messages whose
delivery to it failed (--since/--until: when they failed): intake destinations retry.

Exit codes as for replay.`,
		Args: cobra.NoArgs,
	}
	af := addAPIFlags(cmd)
	sel.add(cmd, "INTAKE_OUT")
	run.add(cmd)
	f := cmd.Flags()
	f.StringVar(&source, "source", "stream", "stream (INTAKE_OUT), outbox, or failed (a destination's failed deliveries)")
	f.StringVar(&destination, "destination", "", "send the copies to this HTTP destination only")
	f.StringVar(&subject, "subject", "", "INTAKE_OUT subject filter, e.g. 'intake.out.acme.>'")
	f.StringVar(&reason, "reason", "", "why: recorded in the audit log")
	f.IntVar(&rate, "rate", 0, "messages per second (default: the replayer's, 100)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		api, err := af.client()
		if err != nil {
			return err
		}
		keys, seq, since, until, err := sel.resolve(time.Now())
		if err != nil {
			return err
		}
		req := apiclient.RedeliveryRequest{
			Source: source, Destination: destination,
			Selector: apiclient.RedeliverySelector{Keys: keys, Integration: sel.integration, Tenant: sel.tenant,
				EventType: sel.eventType, Subject: subject, StreamSeq: seq, Since: since, Until: until},
			Reason: reason, Rate: rate,
		}
		return run.run(cmd, api, af, func(ctx context.Context, dry bool) (apiclient.Replay, error) {
			req.DryRun = &dry
			return api.StartRedelivery(ctx, req)
		})
	}
	return cmd
}
