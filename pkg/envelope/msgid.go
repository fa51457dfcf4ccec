package envelope

import (
	"crypto/sha1"
	"encoding/binary"
	"strconv"

	"github.com/google/uuid"

	"github.com/intakehq/intake/pkg/inbox"
)

// Every Nats-Msg-Id Intake publishes with is made here, one function per
// scheme. A stream drops a message whose id it saw inside its duplicate
// window, so each scheme decides what its stream treats as the same message;
// the prefixes keep the schemes of one stream apart.

// hashPrefixHex is how much of the payload hash DeliveryMsgID keeps.
const hashPrefixHex = 16

// DeliveryMsgID is the Nats-Msg-Id ingress publishes a delivery with on
// INTAKE_IN: the scoped key plus the first 16 hex characters of the payload
// hash. With the hash in the id an exact retry is stopped by the stream,
// while a same-id-different-payload delivery reaches the inbox, where it is
// recorded as a conflict instead of being swallowed.
func DeliveryMsgID(k Key, payloadSHA256 string) string {
	h := payloadSHA256
	if len(h) > hashPrefixHex {
		h = h[:hashPrefixHex]
	}
	return k.String() + "#" + h
}

// ReplayMsgID is the Nats-Msg-Id of a replay's copy of an event on
// INTAKE_IN, "replay:{replay id}:{key}": unique per replay and key, so a
// copy published again after a replayer crashed is a stream duplicate,
// while the next replay of the same event is not.
func ReplayMsgID(replayID string, k Key) string {
	return "replay:" + replayID + ":" + k.String()
}

// RedeliveryMsgID is the Nats-Msg-Id of a redelivery's copy of a processed
// message on INTAKE_OUT, "redeliver:{redelivery id}:{original id}". It
// cannot be the original id: INTAKE_OUT would drop the copy as a duplicate
// inside its window (and accept it after), so the outcome would depend on
// the clock. The original id travels in Intake-Original-Msg-Id.
func RedeliveryMsgID(redeliveryID, original string) string {
	return "redeliver:" + redeliveryID + ":" + original
}

// SeqMsgID stands for the id of a stream message published without a
// Nats-Msg-Id (not by Intake), "seq:{sequence}": a redelivery of it takes
// this as the original id.
func SeqMsgID(seq uint64) string {
	return "seq:" + strconv.FormatUint(seq, 10)
}

// outboxNamespace is the UUIDv5 namespace of outbox message ids. Fixed
// forever: changing it changes every id, and a re-driven event would then
// reach subscribers twice.
var outboxNamespace = uuid.MustParse("99727558-a198-46e1-8f05-7e0187781c0f")

// OutboxMsgID is the Nats-Msg-Id on INTAKE_OUT of the output at position
// pos (0-based, in the order the handler returned them) of one execution of
// the event k, a UUIDv5 (RFC 9562) in outboxNamespace.
//
// It is derived, not drawn, so that running the same execution again gives
// the same ids: after a Postgres failover loses a commit whose outbox
// messages were already published, the event is re-driven and runs again
// as an original execution, and INTAKE_OUT's duplicate window (or a
// subscriber deduplicating by Nats-Msg-Id) drops the repeat. An original
// execution and a retry (which runs only after every earlier run rolled
// back, so it is still the event's first effective one) share the key's
// ids; a re-execution is a deliberate new run and takes its replay's id
// into the name, so a re-driven re-execution is idempotent as well. The id
// assumes the handler returns the same outputs in the same order when run
// again.
//
// One SHA-1 and the id's string per output: it runs for every outbox row
// on the processor's hot path.
func OutboxMsgID(k Key, mode inbox.Mode, replayID string, pos int) string {
	var buf [256]byte
	b := append(buf[:0], outboxNamespace[:]...)
	b = outboxName(b, k, mode, replayID, pos)
	// uuid.NewSHA1, without its hash.Hash and Sum allocations.
	sum := sha1.Sum(b)
	var id uuid.UUID
	copy(id[:], sum[:])
	id[6] = id[6]&0x0f | 0x50 // version 5
	id[8] = id[8]&0x3f | 0x80 // RFC 9562 variant
	return id.String()
}

// outboxName appends the name OutboxMsgID hashes: every field length-
// prefixed, so no two (key, replay, position) triples share a name however
// their fields split (a plain join of "a/b" and "c" would equal "a" and
// "b/c"), and a tag that keeps re-executions apart from first executions
// even were a replay id empty.
func outboxName(b []byte, k Key, mode inbox.Mode, replayID string, pos int) []byte {
	field := func(b []byte, s string) []byte {
		return append(binary.AppendUvarint(b, uint64(len(s))), s...)
	}
	b = field(b, k.Integration)
	b = field(b, k.Account)
	b = field(b, k.EventID)
	if mode == inbox.ModeReexecute {
		b = append(b, 'r')
		b = field(b, replayID)
	} else {
		b = append(b, 'o')
	}
	return binary.AppendUvarint(b, uint64(pos))
}
