package store

import (
	"crypto/sha1"
	"encoding/binary"

	"github.com/google/uuid"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
)

// outboxNamespace is the UUIDv5 namespace of outbox message ids. Fixed
// forever: changing it changes every id, and a re-driven event would then
// reach subscribers twice.
var outboxNamespace = uuid.MustParse("99727558-a198-46e1-8f05-7e0187781c0f")

// OutboxMsgID is the Nats-Msg-Id of the output at position pos (0-based,
// in the order the handler returned them) of one execution of the event k,
// a UUIDv5 (RFC 9562) in outboxNamespace.
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
func OutboxMsgID(k envelope.Key, mode inbox.Mode, replayID string, pos int) string {
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
func outboxName(b []byte, k envelope.Key, mode inbox.Mode, replayID string, pos int) []byte {
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
