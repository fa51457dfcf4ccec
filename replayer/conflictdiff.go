package replayer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/internal/jsondiff"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

// conflictDiff answers GET /api/v1/conflicts/diff?key=&id=: both payloads of
// one conflict from INTAKE_IN and the JSON fields that differ. It shows
// payloads, as the console's conflict page does to any signed-in token.
func (r *Replayer) conflictDiff(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	k, ok := envelope.ParseKey(q.Get("key"))
	id, err := strconv.ParseInt(q.Get("id"), 10, 64)
	if !ok || err != nil {
		writeError(w, http.StatusBadRequest, "key and id: the event's scoped key and the conflict's id (GET /api/v1/conflicts lists them)")
		return
	}
	if err := r.checkMine("key", k.Integration); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	d, err := r.ConflictDiff(req.Context(), k, id)
	if err != nil {
		r.writeFailure(w, failure{call: "conflict diff", notFound: "no such conflict for this key"}, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// ConflictDiff reads conflict id of k and its two payloads.
func (r *Replayer) ConflictDiff(ctx context.Context, k envelope.Key, id int64) (apiclient.ConflictDiff, error) {
	list, err := r.o.Store.EventConflicts(ctx, k)
	if err != nil {
		return apiclient.ConflictDiff{}, err
	}
	for _, cf := range list {
		if cf.ID != id {
			continue
		}
		d := apiclient.ConflictDiff{Conflict: wireConflict(cf), Fields: []apiclient.FieldChange{}}
		var lb, rb []byte
		if d.Original, lb, err = r.payloadAt(ctx, cf.OriginalStreamSeq, cf.OriginalSHA256); err != nil {
			return d, err
		}
		if d.Conflicting, rb, err = r.payloadAt(ctx, cf.ConflictingStreamSeq, cf.ConflictingSHA256); err != nil {
			return d, err
		}
		if d.Original.Missing == "" && d.Conflicting.Missing == "" {
			lv, _, lok := jsondiff.Canonical(lb)
			rv, _, rok := jsondiff.Canonical(rb)
			if d.Structural = lok && rok; d.Structural {
				for _, c := range jsondiff.Changes(lv, rv, "$", nil) {
					d.Fields = append(d.Fields, apiclient.FieldChange(c))
				}
			}
		}
		return d, nil
	}
	return apiclient.ConflictDiff{}, store.ErrNotFound
}

// payloadAt reads INTAKE_IN message seq's body.
func (r *Replayer) payloadAt(ctx context.Context, seq int64, sha string) (apiclient.ConflictPayload, []byte, error) {
	p := apiclient.ConflictPayload{StreamSeq: seq, SHA256: sha}
	s, err := r.o.JS.Stream(ctx, envelope.StreamIn)
	if err != nil {
		return p, nil, fmt.Errorf("stream %s: %w", envelope.StreamIn, err)
	}
	m, err := s.GetMsg(ctx, uint64(seq))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		p.Missing = fmt.Sprintf("message %d is no longer in %s (nats.stream.max_age)", seq, envelope.StreamIn)
		return p, nil, nil
	}
	if err != nil {
		return p, nil, fmt.Errorf("stream %s: message %d: %w", envelope.StreamIn, seq, err)
	}
	_, _, p.JSON = jsondiff.Canonical(m.Data)
	p.Body = string(m.Data)
	return p, m.Data, nil
}
