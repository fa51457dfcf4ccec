package ingress

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/provider"
)

// handleHandshakeGET answers a sender's GET check of the endpoint (Okta's
// verification, Dropbox's challenge) for integrations configured with
// one; any other integration answers 405 as POST-only routes do.
func (s *Service) handleHandshakeGET(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	name := chi.URLParam(r, "integration")
	in, ok := s.integrations[name]
	if !ok || in.handshaker == nil || in.handshaker.Method() != http.MethodGet {
		w.Header().Set("Allow", http.MethodPost)
		writeAnswer(w, http.StatusMethodNotAllowed, Answer{Status: envelope.AnswerRejected, Reason: "method_not_allowed"})
		return
	}
	in.m.received.Inc()
	s.answerUnverified(w, r, in, start)
}

// answerUnverified answers a handshake that comes before any signature
// check: a GET one, or Microsoft Graph's POST with ?validationToken
// (handleWebhook). Nothing is published and no event id is reserved. The
// client-address limit applies: Dropbox's GET and Graph's POST are
// unsigned.
func (s *Service) answerUnverified(w http.ResponseWriter, r *http.Request, in *integration, start time.Time) {
	q := request{w: w, r: r, in: in, now: start}
	code := http.StatusOK
	if v := s.limitClient(&q); v.refused() {
		code, _ = s.reject(&q, v)
	} else if ev, err := in.handshaker.Answer(r.Header, r.URL.Query()); err != nil {
		code = http.StatusUnauthorized
		if errors.Is(err, provider.ErrMalformed) {
			code = http.StatusBadRequest
		}
		code, _ = s.reject(&q, rejected(code, provider.Reason(err)))
	} else {
		s.refundClient(&q)
		q.ev = ev
		s.countVerified(&q)
		code, _ = s.answerHandshake(&q)
	}
	s.metrics.RequestLatency.WithLabelValues(in.Name, strconv.Itoa(code)).Observe(time.Since(start).Seconds())
}

// writeHandshake answers a verified handshake in the shape its sender
// expects. Each echoes one bounded value the verifier checked
// (provider/handshake.go, provider/slack.go).
func writeHandshake(w http.ResponseWriter, ev *provider.Identity) {
	switch ev.ChallengeFormat {
	case provider.ChallengeText:
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(ev.Challenge))
	case provider.ChallengeZoom:
		writeJSON(w, http.StatusOK, zoomAnswer{PlainToken: ev.Challenge, EncryptedToken: ev.ChallengeMAC})
	case provider.ChallengeDiscord:
		writeJSON(w, http.StatusOK, discordPong{Type: 1})
	case provider.ChallengeOkta:
		writeJSON(w, http.StatusOK, oktaAnswer{Verification: ev.Challenge})
	default:
		writeJSON(w, http.StatusOK, challengeAnswer{Challenge: ev.Challenge})
	}
}

type zoomAnswer struct {
	PlainToken     string `json:"plainToken"`
	EncryptedToken string `json:"encryptedToken"`
}

type discordPong struct {
	Type int `json:"type"`
}

type oktaAnswer struct {
	Verification string `json:"verification"`
}
