package replayer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/inbox"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

// recordedRedelivery is what intake.replays.selector holds for a
// redelivery: the source next to the selector, so the audit says where the
// messages came from.
type recordedRedelivery struct {
	Source      string `json:"source"`
	Destination string `json:"destination,omitempty"`
	apiclient.RedeliverySelector
}

// RequestError is a request the replayer refuses as asked (400).
type RequestError struct{ msg string }

func (e *RequestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &RequestError{msg: fmt.Sprintf(format, args...)}
}

// ErrTooMany: the selector matches more events than Options.MaxMatched.
var ErrTooMany = errors.New("replayer: selector matches too many events")

const maxKeys = 100_000

// eventStatuses are the statuses an events list filters by: the inbox's,
// and retrying (failed attempts, no inbox row yet).
var eventStatuses = append(slices.Clone(replayStatuses), string(store.StatusRetrying))

var replayStatuses = []string{string(inbox.StatusProcessed), string(inbox.StatusStale), string(inbox.StatusFailed), string(inbox.StatusQuarantined)}

func (r *Replayer) normalizeReplay(req *apiclient.ReplayRequest) error {
	if req.Mode == "" {
		req.Mode = inbox.ReplayExact
	}
	if req.Mode != inbox.ReplayExact && req.Mode != inbox.ReplayReexecute {
		return badRequest("mode: must be exact or reexecute, got %q", req.Mode)
	}
	if req.DryRun == nil {
		t := true
		req.DryRun = &t
	}
	req.Reason = strings.TrimSpace(req.Reason)
	if req.Mode == inbox.ReplayReexecute && req.Reason == "" {
		return badRequest("reason: required for mode reexecute (the handler runs again; say why)")
	}
	if err := r.normalizeRate(&req.Rate); err != nil {
		return err
	}
	s := &req.Selector
	if err := checkKeys(s.Keys); err != nil {
		return err
	}
	if err := r.checkMine("selector.integration", s.Integration); err != nil {
		return err
	}
	if err := r.checkKeysMine(s.Keys); err != nil {
		return err
	}
	if s.Status != "" && !slices.Contains(replayStatuses, s.Status) {
		return badRequest("selector.status: must be one of %s, got %q", strings.Join(replayStatuses, ", "), s.Status)
	}
	if err := checkRange(s.StreamSeq, s.Since, s.Until); err != nil {
		return err
	}
	if len(s.Keys) == 0 && s.StreamSeq == nil && s.Since == nil && s.Until == nil && s.Status == "" {
		return badRequest("selector: give keys, stream_seq, since/until or status (replaying everything is refused)")
	}
	if req.AdmitReplayedBodies && len(s.Keys) == 0 {
		return badRequest("admit_replayed_bodies: requires selector.keys, the deliveries you judged genuine " +
			"(a range or status replay would apply every captured copy it selects)")
	}
	return nil
}

func (r *Replayer) normalizeRedelivery(req *apiclient.RedeliveryRequest) error {
	if req.Source == "" {
		req.Source = apiclient.SourceStream
	}
	if req.DryRun == nil {
		t := true
		req.DryRun = &t
	}
	req.Reason = strings.TrimSpace(req.Reason)
	if err := r.normalizeRate(&req.Rate); err != nil {
		return err
	}
	s := &req.Selector
	if err := checkKeys(s.Keys); err != nil {
		return err
	}
	if err := r.checkMine("selector.integration", s.Integration); err != nil {
		return err
	}
	if err := r.checkKeysMine(s.Keys); err != nil {
		return err
	}
	if err := checkRange(s.StreamSeq, s.Since, s.Until); err != nil {
		return err
	}
	switch req.Source {
	case apiclient.SourceStream:
		if s.StreamSeq == nil && s.Since == nil && s.Until == nil {
			return badRequest("selector: a redelivery from the stream needs stream_seq or since/until (of INTAKE_OUT)")
		}
		if s.Subject != "" && !envelope.IsSubjectOutFilter(s.Subject) {
			return badRequest("selector.subject: must be an INTAKE_OUT subject (intake.out.…), got %q", s.Subject)
		}
	case apiclient.SourceOutbox:
		if s.StreamSeq != nil || s.Subject != "" {
			return badRequest("selector: stream_seq and subject apply to source stream only")
		}
		if len(s.Keys) == 0 && s.Since == nil && s.Until == nil {
			return badRequest("selector: a redelivery from the outbox needs keys or since/until")
		}
	case apiclient.SourceFailed:
		if req.Destination == "" {
			return badRequest("destination: required with source failed (whose failed deliveries to retry)")
		}
		if s.StreamSeq != nil || s.Subject != "" || len(s.Keys) > 0 || s.Integration != "" || s.Tenant != "" || s.EventType != "" {
			return badRequest("selector: source failed takes since/until only (when the deliveries failed)")
		}
	default:
		return badRequest("source: must be stream, outbox or failed, got %q", req.Source)
	}
	if req.Destination != "" {
		if err := r.checkDestination("destination", req.Destination); err != nil {
			return err
		}
	}
	return nil
}

func (r *Replayer) normalizeRate(rate *int) error {
	switch {
	case *rate < 0:
		return badRequest("rate: must be positive")
	case *rate == 0:
		*rate = r.o.DefaultRate
	case *rate > r.o.MaxRate:
		return badRequest("rate: at most %d events/s, got %d", r.o.MaxRate, *rate)
	}
	return nil
}

func checkKeys(keys []string) error {
	if len(keys) > maxKeys {
		return badRequest("selector.keys: at most %d keys, got %d", maxKeys, len(keys))
	}
	for i, k := range keys {
		if _, ok := envelope.ParseKey(k); !ok {
			return badRequest("selector.keys[%d]: %q is not a scoped key {integration}/{account}/{event_id}", i, k)
		}
	}
	return nil
}

func checkRange(seq *apiclient.SeqRange, since, until *time.Time) error {
	if seq != nil {
		if seq.From < 1 {
			return badRequest("selector.stream_seq.from: must be at least 1")
		}
		if seq.To != 0 && seq.To < seq.From {
			return badRequest("selector.stream_seq.to: must not be below from")
		}
	}
	if since != nil && until != nil && !until.After(*since) {
		return badRequest("selector.until: must be after since")
	}
	return nil
}

func parseKeys(keys []string) []envelope.Key {
	out := make([]envelope.Key, 0, len(keys))
	seen := make(map[envelope.Key]bool, len(keys))
	for _, s := range keys {
		k, _ := envelope.ParseKey(s)
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}
