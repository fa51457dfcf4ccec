package processor

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/intakehq/intake/pkg/store"
)

// The replay guard. GitHub, Shopify and hmac with a header id sign the body
// but neither the event id nor a timestamp: a captured body sent again under
// a fresh X-GitHub-Delivery is, to ingress, a new event. For integrations
// with replay_guard on, the batch's transaction records the first key of
// every body and event type (intake.body_type_hashes; a body 0.16 recorded
// in intake.body_hashes keeps that key for every type) before the claim; a
// message whose body came first as its type under another key is refused
// like a message failing the envelope checks — recorded in
// intake.rejected_messages (reason replayed_body, naming the original),
// counted, logged, terminated, never claimed — so the fresh id reserves nothing and no handler runs. Ingress
// has answered 200 already: it cannot know, and the sender must not retry.
//
// The type is part of the key because providers send genuine events of two
// types with identical bodies (Shopify's orders/create and orders/updated):
// keyed on the body alone, the second was answered 200 and never applied.
// The type is unsigned too, so a captured body applies at most once per
// type name (docs/security.md, "Replayed bodies"). A refused delivery an
// operator judges genuine is applied by a replay of its key with
// admit_replayed_bodies: screen marks that replay's verified copies
// admitted, and the guard passes them.
//
// It is a check before the decision, not an inbox.Outcome: it reads a table
// other than the message's inbox row, and concerns messages whose own key
// has no row at all. inbox.Decide stays a function of one row and one
// message; the replayer's dry run predicts the guard apart, from the same
// table (replayer.predictGuard, store.BodyFirstKeys).

// guardBodies runs the replay guard on b's unrefused messages of guarded
// integrations and sets reject on the replayed bodies. One round trip, and
// none when the batch has no guarded message.
func (p *Processor) guardBodies(ctx context.Context, tx pgx.Tx, b []*item) error {
	var (
		claims []store.BodyClaim
		of     []*item
	)
	for _, it := range b {
		if it.reject != nil || it.admitted {
			continue
		}
		if in, ok := p.integrations[it.ev.Key.Integration]; !ok || !in.guardsReplays {
			continue
		}
		claims = append(claims, store.BodyClaim{Key: it.ev.Key, EventType: it.ev.EventType, PayloadSHA256: it.ev.PayloadSHA256, StreamSeq: it.ev.StreamSeq})
		of = append(of, it)
	}
	if len(claims) == 0 {
		return nil
	}
	first, err := store.FirstKeys(ctx, tx, claims)
	if err != nil {
		return err
	}
	for j, it := range of {
		if first[j] == it.ev.Key {
			continue
		}
		orig := first[j]
		it.reject = it.ev.rejection(it.msg.Subject(), store.RejectReplayedBody,
			fmt.Sprintf("body first accepted as %s", orig))
		it.reject.Original = &orig
	}
	return nil
}
