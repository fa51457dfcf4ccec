package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
)

type conflictsData struct {
	Filter    filter
	Query     url.Values
	Conflicts []store.Conflict
	Next      string
}

func (c *Console) conflicts(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query())
	d := conflictsData{Filter: f, Query: f.query()}
	if err != nil {
		c.renderErr(w, r, "conflicts", "Conflicts", d, err.Error())
		return
	}
	d.Conflicts, d.Next, err = c.ro.Store.ListConflicts(r.Context(), store.ConflictFilter{Integration: f.Integration,
		Tenant: f.Tenant, Since: f.since, Until: f.until, KeyPrefix: f.KeyPrefix, Limit: pageSize, Cursor: f.Cursor})
	if errors.Is(err, store.ErrBadCursor) {
		c.renderErr(w, r, "conflicts", "Conflicts", d, "cursor: invalid (start again from the first page)")
		return
	}
	if err != nil {
		c.internal(w, r, "list conflicts", err)
		return
	}
	c.render(w, r, http.StatusOK, "conflicts", "Conflicts", d)
}

type conflictData struct {
	Conflict              store.Conflict
	Original, Conflicting payload
	Diff                  []diffRow
	Changed               int
}

// conflict shows one conflict's two payloads side by side, diffed as
// pretty-printed JSON lines.
func (c *Console) conflict(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	k, ok := envelope.ParseKey(q.Get("key"))
	id, err := strconv.ParseInt(q.Get("id"), 10, 64)
	if !ok || err != nil {
		c.fail(w, r, http.StatusBadRequest, "key and id: give the event's scoped key and the conflict's id")
		return
	}
	list, err := c.ro.Store.EventConflicts(r.Context(), k)
	if err != nil {
		c.internal(w, r, "event conflicts", err)
		return
	}
	d := conflictData{}
	found := false
	for _, cf := range list {
		if cf.ID == id {
			d.Conflict, found = cf, true
		}
	}
	if !found {
		c.fail(w, r, http.StatusNotFound, "No conflict "+q.Get("id")+" for "+k.String()+".")
		return
	}
	d.Original = c.payload(r.Context(), d.Conflict.OriginalStreamSeq, d.Conflict.OriginalSHA256)
	d.Conflicting = c.payload(r.Context(), d.Conflict.ConflictingStreamSeq, d.Conflict.ConflictingSHA256)
	if d.Original.Missing == "" && d.Conflicting.Missing == "" {
		d.Diff = diffLines(d.Original.Text, d.Conflicting.Text)
		for _, row := range d.Diff {
			if row.Op != "same" {
				d.Changed++
			}
		}
	}
	c.render(w, r, http.StatusOK, "conflict", "Conflict on "+k.String(), d)
}
