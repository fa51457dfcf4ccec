package replayer

import (
	"errors"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/store"
)

// API serves /api/v1.
type API struct {
	store  *store.Store
	tokens []config.Token
	log    *slog.Logger
}

// NewAPI builds the operator API.
func NewAPI(s *store.Store, tokens []config.Token, log *slog.Logger) *API {
	return &API{store: s, tokens: tokens, log: log}
}

// Mount adds /api/v1 routes to r.
func (a *API) Mount(r chi.Router) {
	r.Route("/api/v1", func(r chi.Router) {
		r.Use(RequireToken(a.tokens))
		r.Group(func(r chi.Router) {
			r.Use(RequireRole(config.RoleViewer))
			r.Get("/events/{integration}/*", a.getEvent) // event ids may contain '/'
		})
	})
}

// getEvent returns the inbox row of one event. The account is optional
// (?account=): integrations have one account scope unless a verified header
// supplies it.
func (a *API) getEvent(w http.ResponseWriter, r *http.Request) {
	integration := chi.URLParam(r, "integration")
	eventID := chi.URLParam(r, "*")
	if r.URL.RawPath != "" { // chi matched the escaped path
		if un, err := url.PathUnescape(eventID); err == nil {
			eventID = un
		}
	}
	var (
		ev  store.Event
		err error
	)
	if account, ok := r.URL.Query()["account"]; ok {
		ev, err = a.store.GetEvent(r.Context(), envelope.Key{Integration: integration, Account: account[0], EventID: eventID})
	} else {
		ev, err = a.store.FindEvent(r.Context(), integration, eventID)
	}
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no such event")
		return
	}
	if err != nil {
		a.log.Error("get event", "err", err)
		writeError(w, http.StatusInternalServerError, "internal error")
		return
	}
	writeJSON(w, http.StatusOK, ev)
}
