package provider

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// SendGrid's Event Webhook body: a top-level array, each event with its
// sg_event_id (the shape of SendGrid's documented example).
const sendgridBatch = `[
  {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"processed","category":"cat facts","sg_event_id":"rbtnWrG1DVDGGGFHFyun0A==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0"},
  {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"deferred","category":"cat facts","sg_event_id":"cWzZwIbMZHt0iUVW2eIaAA==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0","response":"400 try again later","attempt":"5"}
]`

// Okta's event hook body: the events under data.events, each with a uuid
// (the shape of Okta's documented example).
const oktaBatch = `{"eventType":"com.okta.event_hook","eventTypeVersion":"1.0","cloudEventsVersion":"0.1","source":"https://example.okta.com/api/v1/eventHooks/whoql0HfiLGPWc8Jx0g3","eventId":"b5a188b9-5ece-4636-b041-482ffda96311","data":{"events":[{"uuid":"4aa9b2bb-3e1b-11ea-9d0b-5fc7a6fb5b6b","published":"2020-01-23T19:47:12.085Z","eventType":"user.session.start","version":"0","severity":"INFO","displayMessage":"User login to Okta"},{"uuid":"4c5c2e1a-3e1b-11ea-9d0b-5fc7a6fb5b6b","published":"2020-01-23T19:47:14.204Z","eventType":"user.session.end","version":"0","severity":"INFO","displayMessage":"User logout from Okta"}]},"eventTime":"2020-01-23T19:47:15.000Z","contentType":"application/json"}`

func TestSplit(t *testing.T) {
	for _, tt := range []struct {
		name        string
		split       SplitConfig
		body        string
		deliveryTyp string
		want        []Item // Body as substrings of body
		err         bool
	}{
		{name: "sendgrid: the body is the array", split: SplitConfig{ID: "sg_event_id", Type: "event"}, body: sendgridBatch,
			want: []Item{{ID: "rbtnWrG1DVDGGGFHFyun0A==", Type: "processed"}, {ID: "cWzZwIbMZHt0iUVW2eIaAA==", Type: "deferred"}}},
		{name: "okta: data.events", split: SplitConfig{Field: "data.events", ID: "uuid", Type: "eventType"}, body: oktaBatch,
			want: []Item{{ID: "4aa9b2bb-3e1b-11ea-9d0b-5fc7a6fb5b6b", Type: "user.session.start"}, {ID: "4c5c2e1a-3e1b-11ea-9d0b-5fc7a6fb5b6b", Type: "user.session.end"}}},
		{name: "the delivery's type without split.type", split: SplitConfig{Field: "logs", ID: "log_id"}, deliveryTyp: "auth0.log",
			body: `{"logs":[{"log_id":"90020221201"},{"log_id":90020221202}]}`,
			want: []Item{{ID: "90020221201", Type: "auth0.log"}, {ID: "90020221202", Type: "auth0.log"}}},
		{name: "a nested id path", split: SplitConfig{Field: "notificationItems", ID: "NotificationRequestItem.pspReference"},
			body: `{"live":"false","notificationItems":[{"NotificationRequestItem":{"pspReference":"7914073381342284","eventCode":"AUTHORISATION"}}]}`,
			want: []Item{{ID: "7914073381342284"}}},
		{name: "an empty batch (Xero's intent to receive)", split: SplitConfig{Field: "events", ID: "resourceId"},
			body: `{"events":[],"firstEventSequence":0,"lastEventSequence":0,"entropy":"S0m3r4Nd0mt3xt"}`, want: nil},
		{name: "the field is absent", split: SplitConfig{Field: "events", ID: "id"}, body: `{"event":[]}`, err: true},
		{name: "the field is no array", split: SplitConfig{Field: "events", ID: "id"}, body: `{"events":{"id":"a"}}`, err: true},
		{name: "the body is no array", split: SplitConfig{ID: "id"}, body: `{"id":"a"}`, err: true},
		{name: "not JSON", split: SplitConfig{ID: "id"}, body: `[{"id":"a"}`, err: true},
		{name: "one item is no object", split: SplitConfig{ID: "id"}, body: `[{"id":"a"},"b"]`, err: true},
		{name: "one item has no id", split: SplitConfig{ID: "id"}, body: `[{"id":"a"},{"ID2":"b"}]`, err: true},
		{name: "one item's id is an object", split: SplitConfig{ID: "id"}, body: `[{"id":"a"},{"id":{"x":1}}]`, err: true},
		{name: "one item's id key twice", split: SplitConfig{ID: "id"}, body: `[{"id":"a"},{"id":"b","Id":"c"}]`, err: true},
		{name: "a type with a control character", split: SplitConfig{ID: "id", Type: "t"}, body: `[{"id":"a","t":"x\u0007"}]`, err: true},
		{name: "more than max_items", split: SplitConfig{ID: "id", MaxItems: 2}, body: `[{"id":"a"},{"id":"b"},{"id":"c"}]`, err: true},
		{name: "max_items exactly", split: SplitConfig{ID: "id", MaxItems: 2}, body: `[{"id":"a"},{"id":"b"}]`,
			want: []Item{{ID: "a"}, {ID: "b"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSplitter(Config{Provider: "hmac", Split: tt.split})
			if err != nil || s == nil {
				t.Fatalf("NewSplitter: %v", err)
			}
			got, err := s.Split([]byte(tt.body), Identity{Type: tt.deliveryTyp}, nil)
			if tt.err {
				if err == nil || !errors.Is(err, ErrMalformed) {
					t.Fatalf("Split = %+v, %v; want an ErrMalformed", got, err)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("Split = %+v, %v; want %d items", got, err, len(tt.want))
			}
			items := gjson.Get(tt.body, orDefault(tt.split.Field, "@this")).Array()
			for i, it := range got {
				if it.ID != tt.want[i].ID || it.Type != tt.want[i].Type {
					t.Errorf("item %d = %q %q, want %q %q", i, it.ID, it.Type, tt.want[i].ID, tt.want[i].Type)
				}
				// The item's bytes as sent, a slice of the delivery.
				if string(it.Body) != items[i].Raw || !bytes.Contains([]byte(tt.body), it.Body) {
					t.Errorf("item %d body %q, want %q", i, it.Body, items[i].Raw)
				}
			}
		})
	}
}

func TestSplitConfig(t *testing.T) {
	const pub = sendgridPublicKey
	for _, tt := range []struct {
		name   string
		cfg    Config
		errHas string // "" accepted
	}{
		{"hmac", Config{Provider: "hmac", Secrets: []string{"s"}, HMAC: HMACConfig{Header: "X-Sig"}, Split: SplitConfig{ID: "id"}}, ""},
		{"token", Config{Provider: "token", Secrets: []string{"s"}, Split: SplitConfig{Field: "logs", ID: "log_id"}}, ""},
		{"pubkey", Config{Provider: "pubkey", Secrets: []string{pub}, PubKey: PubKeyConfig{Algorithm: "ecdsa-p256", Header: "X-Sig"}, Split: SplitConfig{ID: "sg_event_id"}}, ""},
		{"a preset's type over the batch", Config{Provider: "coinbase", Secrets: []string{"s"}, Split: SplitConfig{ID: "id"}}, ""},
		{"stripe", Config{Provider: "stripe", Secrets: []string{"whsec_x"}, Split: SplitConfig{ID: "id"}}, "split: only for providers"},
		{"no id", Config{Provider: "hmac", Secrets: []string{"s"}, HMAC: HMACConfig{Header: "X-Sig"}, Split: SplitConfig{Field: "events"}}, "split.id: required"},
		{"event_id too", Config{Provider: "hmac", Secrets: []string{"s"}, HMAC: HMACConfig{Header: "X-Sig"}, EventID: Field{Field: "id"}, Split: SplitConfig{ID: "id"}}, "event_id: not with split"},
		{"object_id too", Config{Provider: "hmac", Secrets: []string{"s"}, HMAC: HMACConfig{Header: "X-Sig"}, ObjectID: Field{Field: "o"}, Split: SplitConfig{ID: "id"}}, "object_id: not with split"},
		{"a wildcard path", Config{Provider: "hmac", Secrets: []string{"s"}, HMAC: HMACConfig{Header: "X-Sig"}, Split: SplitConfig{Field: "events.#", ID: "id"}}, "split.field"},
		{"a query id", Config{Provider: "hmac", Secrets: []string{"s"}, HMAC: HMACConfig{Header: "X-Sig"}, Split: SplitConfig{ID: "a|b"}}, "split.id"},
		{"max_items too high", Config{Provider: "hmac", Secrets: []string{"s"}, HMAC: HMACConfig{Header: "X-Sig"}, Split: SplitConfig{ID: "id", MaxItems: MaxSplitItems + 1}}, "split.max_items"},
		{"max_items negative", Config{Provider: "hmac", Secrets: []string{"s"}, HMAC: HMACConfig{Header: "X-Sig"}, Split: SplitConfig{ID: "id", MaxItems: -1}}, "split.max_items"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if tt.errHas == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if s, err := NewSplitter(tt.cfg); s == nil || err != nil {
					t.Fatalf("NewSplitter = %v, %v", s, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("New: %v, want it to name %q", err, tt.errHas)
			}
		})
	}
	if s, err := NewSplitter(Config{Provider: "hmac"}); s != nil || err != nil {
		t.Fatalf("no split: %v, %v", s, err)
	}
}

// TestSplitVerifies: with split, the family verifies the whole delivery and
// names no id of its own; the items carry the ids.
func TestSplitVerifies(t *testing.T) {
	cfg := Config{Provider: "hmac", Secrets: []string{"xero-key"}, Tolerance: DefaultTolerance,
		HMAC:  HMACConfig{Header: "x-xero-signature", Encoding: "base64"},
		Split: SplitConfig{Field: "events", ID: "resourceId", Type: "eventType"}}
	v := newTestVerifier(t, cfg)
	body := `{"events":[{"resourceUrl":"https://api.xero.com/api.xro/2.0/Contacts/717f2bfc","resourceId":"717f2bfc-c6d4-41fd-b238-3f2f0c0cf777","eventDateUtc":"2017-06-21T01:15:39.902","eventType":"UPDATE","eventCategory":"CONTACT","tenantId":"c2cc9b6e","tenantType":"ORGANISATION"}],"lastEventSequence":1,"firstEventSequence":1,"entropy":"S0m3r4Nd0mt3xt"}`
	h := hdr("X-Xero-Signature", base64.StdEncoding.EncodeToString(macOf(sha256.New, "xero-key", body)))
	ev, err := v.Verify(&Request{Header: h, Body: []byte(body)})
	if err != nil || ev.ID != "" {
		t.Fatalf("Verify = %+v, %v", ev, err)
	}
	if _, err := v.Verify(&Request{Header: h, Body: []byte(body + " ")}); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("tampered: %v", err)
	}
	s, _ := NewSplitter(cfg)
	items, err := s.Split([]byte(body), ev, nil)
	if err != nil || len(items) != 1 || items[0].ID != "717f2bfc-c6d4-41fd-b238-3f2f0c0cf777" || items[0].Type != "UPDATE" {
		t.Fatalf("Split = %+v, %v", items, err)
	}
	// SampleBody writes a batch of one where the splitter reads it.
	sample := SampleBody(cfg, "evt_s", "UPDATE")
	if items, err := s.Split(sample, Identity{}, nil); err != nil || len(items) != 1 || items[0].ID != "evt_s" || items[0].Type != "UPDATE" {
		t.Fatalf("SampleBody %s: %+v, %v", sample, items, err)
	}
}

// FuzzSplit holds Split to encoding/json: what it accepts is an array (at
// split.field) of objects, each item's bytes the item as sent, its id the
// string encoding/json reads there; and any failure is ErrMalformed.
func FuzzSplit(f *testing.F) {
	f.Add([]byte(sendgridBatch))
	f.Add([]byte(oktaBatch))
	f.Add([]byte(`{"events":[{"id":"a"},{"id":"b","id":"c"}]}`))
	f.Add([]byte(`{"events":[{"id":"a"},{"id":1e3}]}`))
	f.Add([]byte(`{"events":[]}`))
	f.Add([]byte(`{"events":[{"id":"\u00e9"},{"id":"\ud800"}]}`))
	s, err := NewSplitter(Config{Provider: "hmac", Split: SplitConfig{Field: "events", ID: "id", MaxItems: 50}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		items, err := s.Split(body, Identity{}, nil)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error wraps no ErrMalformed: %v", err)
			}
			return
		}
		var doc struct {
			Events []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("Split accepted what encoding/json rejects: %v", err)
		}
		if len(doc.Events) != len(items) {
			t.Fatalf("%d items, encoding/json reads %d", len(items), len(doc.Events))
		}
		for i, it := range items {
			if !bytes.Equal(bytes.TrimSpace(doc.Events[i]), it.Body) {
				t.Fatalf("item %d: %q, encoding/json: %q", i, it.Body, doc.Events[i])
			}
			var obj map[string]any
			if err := json.Unmarshal(it.Body, &obj); err != nil {
				t.Fatalf("item %d is no object: %v", i, err)
			}
			if id, ok := obj["id"].(string); ok && id != it.ID {
				t.Fatalf("item %d id %q, encoding/json reads %q", i, it.ID, id)
			}
		}
	})
}
