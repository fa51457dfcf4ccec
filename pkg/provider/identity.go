package provider

// After a signature verifies, every provider reads the same four identity
// values: event id, event type, object id and object version. Each comes
// from a Field; the integration's config overrides the provider's default.
//
// A configured field is strict: when it must be read from a body that is not
// JSON the delivery is malformed (400), because the operator asked for it. A
// provider default other than the event id is lenient: a body the default
// cannot read yields "", so, for example, a Shopify topic without
// admin_graphql_api_id still arrives, just without ordering.

import (
	"fmt"
	"net/http"

	"github.com/intakehq/intake/pkg/envelope"
)

// identityReader holds the four validated sources.
type identityReader struct {
	eventID, eventType, objectID, objectVersion source
	// split: each item of the delivery names its own id (split.go), the
	// delivery none.
	split bool
	// hs recognises a POST handshake (handshake.go); nil for none.
	hs *postHandshake
}

// newIdentity resolves cfg's fields over the provider's defaults. A zero
// default means the provider supplies the value itself (or none).
func newIdentity(cfg Config, defaults identityFields) (identityReader, error) {
	id := identityReader{split: !cfg.Split.IsZero()}
	switch cfg.Handshake {
	case HandshakeTwitch, HandshakeZoom, HandshakeDiscord:
		id.hs = &postHandshake{kind: cfg.Handshake, keys: secretKeys(cfg.Secrets)}
	}
	for _, f := range []struct {
		name      string
		cfg, def  Field
		dst       *source
		mustExist bool
	}{
		{"event_id", cfg.EventID, defaults.eventID, &id.eventID, true},
		{"event_type", cfg.EventType, defaults.eventType, &id.eventType, false},
		{"object_id", cfg.ObjectID, defaults.objectID, &id.objectID, false},
		{"object_version", cfg.ObjectVersion, defaults.objectVersion, &id.objectVersion, false},
	} {
		field, lenient := f.cfg, false
		if field.IsZero() {
			field, lenient = f.def, !f.mustExist
		}
		s, err := newSource(f.name, field)
		if err != nil {
			return identityReader{}, err
		}
		s.lenient = lenient
		*f.dst = s
	}
	return id, nil
}

// identityFields are a provider's defaults.
type identityFields struct {
	eventID, eventType, objectID, objectVersion Field
}

// read fills ev from the sources that are set, leaving what the provider put
// there itself (an id from a signed header) where a source is unset. It fails
// when no event id results or a strict source meets a body that is not JSON.
func (id *identityReader) read(h http.Header, body *jsonBody, ev *Identity) error {
	if id.hs != nil {
		// Verified already: every family reads the identity after its
		// signature check.
		if ok, err := id.hs.detect(h, body, ev); ok {
			return err
		}
	}
	var err error
	if !id.eventID.isZero() {
		if ev.ID, err = id.eventID.read(h, body); err != nil {
			return fmt.Errorf("event id: %w", err)
		}
	}
	if ev.ID == "" && !id.split {
		return fmt.Errorf("%w: no event id at %s", ErrMalformed, id.eventID)
	}
	for _, f := range []struct {
		name string
		src  source
		dst  *string
	}{
		{"event type", id.eventType, &ev.Type},
		{"object id", id.objectID, &ev.ObjectID},
		{"object version", id.objectVersion, &ev.ObjectVersion},
	} {
		if f.src.isZero() {
			continue
		}
		if *f.dst, err = f.src.read(h, body); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return checkType(ev.Type)
}

// checkType refuses an event type that is not printable text of at most
// envelope.MaxIDBytes bytes: cleaning it instead would make two types one.
func checkType(t string) error {
	if !envelope.ValidType(t) {
		return fmt.Errorf("%w: event type has control or bidirectional characters or is too long", ErrMalformed)
	}
	return nil
}
