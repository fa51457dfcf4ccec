package provider

import (
	"errors"
	"net/http"
	"testing"
)

func TestIdentityDefaultsAndOverrides(t *testing.T) {
	defaults := identityFields{
		eventID:       Field{Field: "id"},
		eventType:     Field{Field: "type"},
		objectID:      Field{Field: "obj.id"},
		objectVersion: Field{Header: "X-Version"},
	}
	h := hdr("X-Version", "v7", "X-Other", "o1")
	tests := []struct {
		name    string
		cfg     Config
		body    string
		want    Identity
		wantErr error
	}{
		{name: "defaults", body: `{"id":"e1","type":"t","obj":{"id":"o"}}`,
			want: Identity{ID: "e1", Type: "t", ObjectID: "o", ObjectVersion: "v7"}},
		{name: "defaults absent", body: `{"id":"e1"}`, want: Identity{ID: "e1", ObjectVersion: "v7"}},
		{name: "default id on non-JSON body is malformed", body: `id=e1`, wantErr: ErrMalformed},
		{name: "overrides replace defaults", cfg: Config{EventType: Field{Header: "X-Other"}, ObjectID: Field{Field: "id"},
			ObjectVersion: Field{Field: "obj.v"}}, body: `{"id":"e1","type":"t","obj":{"id":"o","v":3}}`,
			want: Identity{ID: "e1", Type: "o1", ObjectID: "e1", ObjectVersion: "3"}},
		{name: "configured id header over the default field", cfg: Config{EventID: Field{Header: "X-Other"}}, body: `not json`,
			want: Identity{ID: "o1", ObjectVersion: "v7"}},
		{name: "configured field on non-JSON body is malformed", cfg: Config{EventID: Field{Header: "X-Other"},
			ObjectID: Field{Field: "obj.id"}}, body: `not json`, wantErr: ErrMalformed},
		{name: "empty id", body: `{"id":""}`, wantErr: ErrMalformed},
		{name: "numeric values as raw text", body: `{"id":12345678901234567890,"type":1.50,"obj":{"id":7}}`,
			want: Identity{ID: "12345678901234567890", Type: "1.50", ObjectID: "7", ObjectVersion: "v7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := newIdentity(tt.cfg, defaults)
			if err != nil {
				t.Fatal(err)
			}
			var ev Identity
			body := jsonBody{raw: []byte(tt.body)}
			err = id.read(h, &body, &ev)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || ev != tt.want {
				t.Fatalf("read = %+v, %v; want %+v", ev, err, tt.want)
			}
		})
	}
}

// A provider that supplies the id itself (a signed header) keeps it unless
// event_id is configured.
func TestIdentityKeepsProviderID(t *testing.T) {
	id, err := newIdentity(Config{}, identityFields{})
	if err != nil {
		t.Fatal(err)
	}
	ev := Identity{ID: "from-header"}
	if err := id.read(http.Header{}, &jsonBody{raw: []byte("x")}, &ev); err != nil || ev.ID != "from-header" {
		t.Fatalf("read = %+v, %v", ev, err)
	}
	ev = Identity{}
	if err := id.read(http.Header{}, &jsonBody{raw: []byte("{}")}, &ev); !errors.Is(err, ErrMalformed) {
		t.Fatalf("no id anywhere: err = %v, want ErrMalformed", err)
	}
}
