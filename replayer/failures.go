package replayer

import (
	"context"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/intakehq/intake/pkg/store"
	"github.com/intakehq/intake/replayer/apiclient"
)

// maxResolveNote bounds a resolution's note.
const maxResolveNote = 2000

func (r *Replayer) listFailures(w http.ResponseWriter, req *http.Request) {
	q := query{v: req.URL.Query()}
	integration := q.integration(r)
	all := q.str("all") == "true"
	if q.err != nil {
		writeError(w, http.StatusBadRequest, q.err.Error())
		return
	}
	if err := r.checkMine("integration", integration); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	groups, err := r.FailureGroups(req.Context(), integration, all)
	if err != nil {
		r.writeFailure(w, failure{call: "list failures"}, err)
		return
	}
	writeJSON(w, http.StatusOK, apiclient.FailureGroupList{Groups: wireAll(groups, wireFailureGroup)})
}

// FailureGroups are the failed and quarantined events grouped by cause
// (store.FailureGroups), this replayer's integrations only.
func (r *Replayer) FailureGroups(ctx context.Context, integration string, all bool) ([]store.FailureGroup, error) {
	groups, err := r.o.Store.FailureGroups(ctx, integration, all)
	if err != nil {
		return nil, err
	}
	mine := groups[:0]
	for _, g := range groups {
		if r.mine(g.Integration) {
			mine = append(mine, g)
		}
	}
	return mine, nil
}

func (r *Replayer) resolveFailure(w http.ResponseWriter, req *http.Request) {
	var body apiclient.ResolveRequest
	if !decodeBody(w, req, &body) {
		return
	}
	c, _ := CallerFrom(req.Context())
	g, err := r.ResolveFailureGroup(req.Context(), chi.URLParam(req, "id"), c.Name, body.Note)
	if err != nil {
		r.writeFailure(w, failure{call: "resolve failure group", notFound: "no such failure group (GET /api/v1/failures?all=true lists them)"}, err)
		return
	}
	writeJSON(w, http.StatusOK, wireFailureGroup(g))
}

// ResolveFailureGroup records, audited, that who dealt with group id,
// saying what in note (required). The events stay failed or quarantined:
// replay them to apply them. store.ErrNotFound when no group has that id
// now.
func (r *Replayer) ResolveFailureGroup(ctx context.Context, id, who, note string) (store.FailureGroup, error) {
	note = strings.TrimSpace(note)
	switch {
	case note == "":
		return store.FailureGroup{}, badRequest("note: required: say what was done about this failure, or why nothing needs to be")
	case len(note) > maxResolveNote || !utf8.ValidString(note):
		return store.FailureGroup{}, badRequest("note: at most %d bytes of UTF-8", maxResolveNote)
	}
	groups, err := r.FailureGroups(ctx, "", true)
	if err != nil {
		return store.FailureGroup{}, err
	}
	for _, g := range groups {
		if g.ID != id {
			continue
		}
		at, err := r.o.Store.ResolveFailureGroup(ctx, g, who, note)
		if err != nil {
			return g, err
		}
		g.Resolved, g.ResolvedBy, g.ResolvedAt, g.Note = true, &who, &at, &note
		r.o.Log.Info("failure group resolved", "group", g.ID, "integration", g.Integration, "status", g.Status,
			"error_class", g.ErrorClass, "events", g.Events, "token_name", who)
		return g, nil
	}
	return store.FailureGroup{}, store.ErrNotFound
}

func wireFailureGroup(g store.FailureGroup) apiclient.FailureGroup {
	return apiclient.FailureGroup{ID: g.ID, Integration: g.Integration, Status: g.Status, ErrorClass: g.ErrorClass,
		Signature: g.Signature, Events: g.Events, FirstSeen: g.FirstSeen, LastSeen: g.LastSeen, SampleKeys: g.SampleKeys,
		Resolved: g.Resolved, ResolvedBy: g.ResolvedBy, ResolvedAt: g.ResolvedAt, Note: g.Note}
}
