package provider

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	hmacSecret      = "generic-hmac-secret-1"
	hmacOtherSecret = "generic-hmac-secret-2"
)

func macOf(h func() hash.Hash, secret, body string) []byte {
	m := hmac.New(h, []byte(secret))
	m.Write([]byte(body))
	return m.Sum(nil)
}

func TestHMACVerify(t *testing.T) {
	const body = `{"id":"evt_42","type":"order.created","data":{"seq":123}}`
	mac256 := macOf(sha256.New, hmacSecret, body)
	mac512 := macOf(sha512.New, hmacSecret, body)
	hex256 := hex.EncodeToString(mac256)

	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	idField := Field{Field: "id"}
	unsigned := HMACConfig{AllowUnsignedID: true}

	tests := []struct {
		name    string
		hmac    HMACConfig
		secrets []string
		eventID Field
		evType  Field
		header  http.Header
		body    string // "" means the default body
		want    Identity
		wantErr error
	}{
		{name: "sha256 hex (defaults)", header: hdr("X-Sig", hex256), want: Identity{ID: "evt_42"}},
		{name: "sha256 hex uppercase", header: hdr("X-Sig", strings.ToUpper(hex256)), want: Identity{ID: "evt_42"}},
		{name: "sha512 hex", hmac: HMACConfig{Algorithm: "sha512"},
			header: hdr("X-Sig", hex.EncodeToString(mac512)), want: Identity{ID: "evt_42"}},
		{name: "sha256 base64", hmac: HMACConfig{Encoding: "base64"},
			header: hdr("X-Sig", base64.StdEncoding.EncodeToString(mac256)), want: Identity{ID: "evt_42"}},
		{name: "sha512 base64", hmac: HMACConfig{Algorithm: "sha512", Encoding: "base64"},
			header: hdr("X-Sig", base64.StdEncoding.EncodeToString(mac512)), want: Identity{ID: "evt_42"}},
		{name: "base64 unpadded", hmac: HMACConfig{Encoding: "base64"},
			header: hdr("X-Sig", base64.RawStdEncoding.EncodeToString(mac256)), want: Identity{ID: "evt_42"}},
		{name: "base64 URL-safe", hmac: HMACConfig{Algorithm: "sha512", Encoding: "base64"},
			header: hdr("X-Sig", base64.URLEncoding.EncodeToString(mac512)), want: Identity{ID: "evt_42"}},
		{name: "sha512 MAC under sha256 config", header: hdr("X-Sig", hex.EncodeToString(mac512)), wantErr: ErrBadSignature},
		{name: "hex MAC under base64 config", hmac: HMACConfig{Encoding: "base64"},
			header: hdr("X-Sig", hex256), wantErr: ErrBadSignature},
		{name: "prefix present", hmac: HMACConfig{Prefix: "sha256="},
			header: hdr("X-Sig", "sha256="+hex256), want: Identity{ID: "evt_42"}},
		{name: "prefix absent", hmac: HMACConfig{Prefix: "sha256="},
			header: hdr("X-Sig", hex256), wantErr: ErrBadSignature},
		{name: "unexpected prefix", header: hdr("X-Sig", "sha256="+hex256), wantErr: ErrBadSignature},
		{name: "missing signature header", header: hdr("X-Other", hex256), wantErr: ErrMissingHeader},
		{name: "truncated MAC", header: hdr("X-Sig", hex256[:62]), wantErr: ErrBadSignature},
		{name: "not hex", header: hdr("X-Sig", "zz"+hex256[2:]), wantErr: ErrBadSignature},
		{name: "tampered body", header: hdr("X-Sig", hex256), body: strings.Replace(body, "42", "43", 1), wantErr: ErrBadSignature},
		{name: "wrong secret", secrets: []string{hmacOtherSecret}, header: hdr("X-Sig", hex256), wantErr: ErrBadSignature},
		{name: "rotated: second secret matches", secrets: []string{hmacOtherSecret, hmacSecret},
			header: hdr("X-Sig", hex256), want: Identity{ID: "evt_42", SecretIndex: 1}},
		{name: "id from header", eventID: Field{Header: "X-Event-Id"}, hmac: unsigned,
			header: hdr("X-Sig", hex256, "X-Event-Id", "hdr_1"), want: Identity{ID: "hdr_1"}},
		// Issue 14: the unsigned header used to override the signed field.
		{name: "signed id field wins over the header", eventID: Field{Header: "X-Event-Id", Field: "id"}, hmac: unsigned,
			header: hdr("X-Sig", hex256, "X-Event-Id", "hdr_1"), want: Identity{ID: "evt_42"}},
		{name: "signed type field wins over the header", evType: Field{Header: "X-Topic", Field: "type"},
			header: hdr("X-Sig", hex256, "X-Topic", "refund.created"), want: Identity{ID: "evt_42", Type: "order.created"}},
		{name: "id field absent falls back to the header", eventID: Field{Header: "X-Event-Id", Field: "data.nope"}, hmac: unsigned,
			header: hdr("X-Sig", hex256, "X-Event-Id", "hdr_1"), want: Identity{ID: "hdr_1"}},
		{name: "id header missing", eventID: Field{Header: "X-Event-Id"}, hmac: unsigned, header: hdr("X-Sig", hex256), wantErr: ErrMalformed},
		{name: "duplicated id key", body: `{"id":"evt_1","id":"evt_2"}`,
			header: hdr("X-Sig", hex.EncodeToString(macOf(sha256.New, hmacSecret, `{"id":"evt_1","id":"evt_2"}`))), wantErr: ErrMalformed},
		{name: "duplicated type key in another case", evType: Field{Field: "type"}, body: `{"id":"evt_1","type":"a","TYPE":"b"}`,
			header: hdr("X-Sig", hex.EncodeToString(macOf(sha256.New, hmacSecret, `{"id":"evt_1","type":"a","TYPE":"b"}`))), wantErr: ErrMalformed},
		{name: "type with a bidi override", evType: Field{Field: "type"}, body: `{"id":"evt_1","type":"a\u202eb"}`,
			header: hdr("X-Sig", hex.EncodeToString(macOf(sha256.New, hmacSecret, `{"id":"evt_1","type":"a\u202eb"}`))), wantErr: ErrMalformed},
		{name: "numeric id from nested field", eventID: Field{Field: "data.seq"}, header: hdr("X-Sig", hex256), want: Identity{ID: "123"}},
		{name: "id field absent", eventID: Field{Field: "data.nope"}, header: hdr("X-Sig", hex256), wantErr: ErrMalformed},
		{name: "id field is an object", eventID: Field{Field: "data"}, header: hdr("X-Sig", hex256), wantErr: ErrMalformed},
		{name: "id field on malformed JSON", body: `{"id":"evt_42"`,
			header: hdr("X-Sig", hex.EncodeToString(macOf(sha256.New, hmacSecret, `{"id":"evt_42"`))), wantErr: ErrMalformed},
		{name: "type from field", evType: Field{Field: "type"}, header: hdr("X-Sig", hex256),
			want: Identity{ID: "evt_42", Type: "order.created"}},
		{name: "type from header", evType: Field{Header: "X-Topic"}, header: hdr("X-Sig", hex256, "X-Topic", "orders/create"),
			want: Identity{ID: "evt_42", Type: "orders/create"}},
		{name: "type absent is fine", evType: Field{Field: "kind"}, header: hdr("X-Sig", hex256), want: Identity{ID: "evt_42"}},
		{name: "id from header, type field on non-JSON body", eventID: Field{Header: "X-Event-Id"}, hmac: unsigned, evType: Field{Field: "type"},
			body: "a=b", header: hdr("X-Sig", hex.EncodeToString(macOf(sha256.New, hmacSecret, "a=b")), "X-Event-Id", "hdr_1"),
			wantErr: ErrMalformed},
		{name: "id from header, non-JSON body never parsed", eventID: Field{Header: "X-Event-Id"}, hmac: unsigned,
			body: "a=b", header: hdr("X-Sig", hex.EncodeToString(macOf(sha256.New, hmacSecret, "a=b")), "X-Event-Id", "hdr_1"),
			want: Identity{ID: "hdr_1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hc := tt.hmac
			hc.Header = "x-sig"
			cfg := Config{Provider: "hmac", Secrets: tt.secrets, HMAC: hc, EventID: tt.eventID, EventType: tt.evType}
			if cfg.Secrets == nil {
				cfg.Secrets = []string{hmacSecret}
			}
			if cfg.EventID.IsZero() {
				cfg.EventID = idField
			}
			b := body
			if tt.body != "" {
				b = tt.body
			}
			v := newTestVerifier(t, cfg)
			ev, err := v.Verify(&Request{Header: tt.header, Body: []byte(b)})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if got, want := Reason(err), Reason(tt.wantErr); got != want {
					t.Errorf("Reason = %q, want %q", got, want)
				}
				assertNoLeak(t, err, append(cfg.Secrets, tt.header.Get("X-Sig"), hex256, b)...)
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if ev != tt.want {
				t.Fatalf("event = %+v, want %+v", ev, tt.want)
			}
		})
	}
}

func BenchmarkHMACVerify(b *testing.B) {
	body := []byte(`{"id":"evt_42","type":"order.created","data":{"seq":123,"lines":[1,2,3]}}`)
	v, err := New(Config{Provider: "hmac", Secrets: []string{hmacSecret},
		HMAC: HMACConfig{Header: "X-Sig", Prefix: "sha256="}, EventID: Field{Field: "id"}, EventType: Field{Field: "type"}})
	if err != nil {
		b.Fatal(err)
	}
	d := &Request{Header: http.Header{"X-Sig": {"sha256=" + hex.EncodeToString(macOf(sha256.New, hmacSecret, string(body)))}}, Body: body}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(d); err != nil {
			b.Fatal(err)
		}
	}
}

func TestHMACTimestampAndTemplate(t *testing.T) {
	const body = `{"id":"evt_t","type":"order.paid"}`
	now := time.Unix(1_700_000_000, 0)
	tsStr := strconv.FormatInt(now.Unix(), 10)
	sig := func(secret, content string) string { return hex.EncodeToString(macOf(sha256.New, secret, content)) }
	signedAt := func(offset time.Duration) http.Header {
		ts := strconv.FormatInt(now.Add(offset).Unix(), 10)
		return hdr("X-Sig", sig(hmacSecret, ts+"."+body), "X-Ts", ts)
	}
	good := signedAt(0)
	base := Config{Provider: "hmac", Secrets: []string{hmacSecret}, EventID: Field{Field: "id"}, EventType: Field{Field: "type"},
		HMAC: HMACConfig{Header: "X-Sig", TimestampHeader: "X-Ts", Template: "{timestamp}.{body}"}}
	want := Identity{ID: "evt_t", Type: "order.paid"}
	template := func(tmpl string) func(*Config) { return func(c *Config) { c.HMAC.Template = tmpl } }

	runVerifyCases(t, base, body, now, []verifyCase{
		{name: "valid", header: good, want: want},
		{name: "rotated: second secret", cfg: func(c *Config) { c.Secrets = []string{hmacOtherSecret, hmacSecret} },
			header: good, want: Identity{ID: "evt_t", Type: "order.paid", SecretIndex: 1}},
		{name: "wrong secret", header: with(good, "X-Sig", sig(hmacOtherSecret, tsStr+"."+body)), wantErr: ErrBadSignature},
		{name: "tampered body", body: strp(body + " "), header: good, wantErr: ErrBadSignature},
		{name: "tampered timestamp", header: with(good, "X-Ts", strconv.FormatInt(now.Unix()+1, 10)), wantErr: ErrBadSignature},
		{name: "body-only MAC under a timestamp template", header: with(good, "X-Sig", sig(hmacSecret, body)), wantErr: ErrBadSignature},
		{name: "stale at the boundary", header: signedAt(-DefaultTolerance), want: want},
		{name: "stale just past the boundary", header: signedAt(-DefaultTolerance - time.Second), wantErr: ErrTimestamp},
		{name: "future at the boundary", header: signedAt(DefaultTolerance), want: want},
		{name: "future just past the boundary", header: signedAt(DefaultTolerance + time.Second), wantErr: ErrTimestamp},
		{name: "timestamp not an integer", header: hdr("X-Sig", sig(hmacSecret, "1.5."+body), "X-Ts", "1.5"), wantErr: ErrTimestamp},
		{name: "missing timestamp", header: with(good, "X-Ts", ""), wantErr: ErrMissingHeader, errHas: "X-Ts"},
		{name: "missing signature", header: with(good, "X-Sig", ""), wantErr: ErrMissingHeader, errHas: "X-Sig"},
		{name: "Slack-like template", cfg: template("v0:{timestamp}:{body}"),
			header: hdr("X-Sig", sig(hmacSecret, "v0:"+tsStr+":"+body), "X-Ts", tsStr), want: want},
		{name: "body first", cfg: template("{body}|{timestamp}"),
			header: hdr("X-Sig", sig(hmacSecret, body+"|"+tsStr), "X-Ts", tsStr), want: want},
		{name: "literal braces kept", cfg: template("{ {timestamp} }{body}"),
			header: hdr("X-Sig", sig(hmacSecret, "{ "+tsStr+" }"+body), "X-Ts", tsStr), want: want},
		{name: "signed id header", cfg: func(c *Config) {
			c.HMAC.Template = "{id}.{timestamp}.{body}"
			c.EventID = Field{Header: "X-Id"}
		}, header: hdr("X-Sig", sig(hmacSecret, "hdr_9."+tsStr+"."+body), "X-Ts", tsStr, "X-Id", "hdr_9"),
			want: Identity{ID: "hdr_9", Type: "order.paid"}},
		{name: "signed id header changed", cfg: func(c *Config) {
			c.HMAC.Template = "{id}.{timestamp}.{body}"
			c.EventID = Field{Header: "X-Id"}
		}, header: hdr("X-Sig", sig(hmacSecret, "hdr_9."+tsStr+"."+body), "X-Ts", tsStr, "X-Id", "hdr_8"), wantErr: ErrBadSignature},
		{name: "signed id header missing", cfg: func(c *Config) {
			c.HMAC.Template = "{id}.{timestamp}.{body}"
			c.EventID = Field{Header: "X-Id", Field: "id"}
		}, header: good, wantErr: ErrMissingHeader, errHas: "X-Id"},
		{name: "sha512 base64 with template", cfg: func(c *Config) { c.HMAC.Algorithm, c.HMAC.Encoding = "sha512", "base64" },
			header: hdr("X-Sig", base64.StdEncoding.EncodeToString(macOf(sha512.New, hmacSecret, tsStr+"."+body)), "X-Ts", tsStr), want: want},
		{name: "object fields", cfg: func(c *Config) {
			c.ObjectID = Field{Field: "id"}
			c.ObjectVersion = Field{Header: "X-Ts"}
		}, header: good, want: Identity{ID: "evt_t", Type: "order.paid", ObjectID: "evt_t", ObjectVersion: tsStr}},
	})
}

// TestHMACBodyTimestamp: hmac.timestamp_field, the send time inside the
// signed body (Linear's webhookTimestamp), checked once the MAC matched.
func TestHMACBodyTimestamp(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	bodyAt := func(ts string) string { return `{"id":"evt_b","meta":{"sent":` + ts + `}}` }
	ms := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).UnixMilli(), 10) }
	signed := func(b string) http.Header { return hdr("X-Sig", hex.EncodeToString(macOf(sha256.New, hmacSecret, b))) }
	base := Config{Provider: "hmac", Secrets: []string{hmacSecret}, EventID: Field{Field: "id"}, Tolerance: time.Minute,
		HMAC: HMACConfig{Header: "X-Sig", TimestampField: "meta.sent", TimestampFormat: "unix_ms"}}
	want := Identity{ID: "evt_b"}
	var cases []verifyCase
	for _, c := range []struct {
		name, ts string
		err      error
	}{
		{"now", ms(0), nil},
		{"59 s old", ms(-59 * time.Second), nil},
		{"at the boundary", ms(-time.Minute), nil},
		{"1 ms past the boundary", ms(-time.Minute - time.Millisecond), ErrTimestamp},
		{"future at the boundary", ms(time.Minute), nil},
		{"future past the boundary", ms(time.Minute + time.Second), ErrTimestamp},
		{"a string, not a number", `"` + ms(0) + `"`, ErrTimestamp},
		{"a fraction", ms(0) + ".5", ErrTimestamp},
		{"negative", "-" + ms(0), ErrTimestamp},
		{"null", "null", ErrTimestamp},
		{"far future", "99999999999999999999999", ErrTimestamp},
	} {
		b := bodyAt(c.ts)
		cases = append(cases, verifyCase{name: c.name, body: strp(b), header: signed(b), want: want, wantErr: c.err})
	}
	noTS := `{"id":"evt_b","meta":{}}`
	dup := `{"id":"evt_b","meta":{"sent":` + ms(0) + `,"sent":` + ms(-time.Hour) + `}}`
	cases = append(cases,
		verifyCase{name: "absent", body: strp(noTS), header: signed(noTS), wantErr: ErrTimestamp, errHas: "meta.sent"},
		verifyCase{name: "a duplicated key", body: strp(dup), header: signed(dup), wantErr: ErrMalformed},
		verifyCase{name: "not JSON", body: strp("sent=1"), header: signed("sent=1"), wantErr: ErrMalformed},
		// The MAC comes first: a stale body with a bad MAC is a bad signature.
		verifyCase{name: "tampered", body: strp(bodyAt(ms(0))), header: signed(bodyAt(ms(-time.Second))), wantErr: ErrBadSignature},
		verifyCase{name: "rfc3339 string", cfg: func(c *Config) { c.HMAC.TimestampFormat = "rfc3339" },
			body: strp(bodyAt(`"2023-11-14T22:13:00Z"`)), header: signed(bodyAt(`"2023-11-14T22:13:00Z"`)), want: want},
		verifyCase{name: "rfc3339 as a number", cfg: func(c *Config) { c.HMAC.TimestampFormat = "rfc3339" },
			body: strp(bodyAt(ms(0))), header: signed(bodyAt(ms(0))), wantErr: ErrTimestamp},
	)
	runVerifyCases(t, base, "", now, cases)
}

func TestHMACTemplateConfig(t *testing.T) {
	cfg := func(h HMACConfig, id Field) Config {
		h.Header = "X-Sig"
		return Config{Provider: "hmac", Secrets: []string{"s"}, HMAC: h, EventID: id}
	}
	idField := Field{Field: "id"}
	for _, tt := range []struct {
		name   string
		cfg    Config
		errHas string
	}{
		{"timestamp header without template", cfg(HMACConfig{TimestampHeader: "X-Ts"}, idField), "must sign {timestamp}"},
		{"timestamp header, template without it", cfg(HMACConfig{TimestampHeader: "X-Ts", Template: "{body}"}, idField), "must sign {timestamp}"},
		{"template timestamp without header", cfg(HMACConfig{Template: "{timestamp}.{body}"}, idField), "needs hmac.timestamp_header"},
		{"no body", cfg(HMACConfig{Template: "{timestamp}", TimestampHeader: "X-Ts"}, idField), "{body} exactly once"},
		{"body twice", cfg(HMACConfig{Template: "{body}.{body}"}, idField), "{body} exactly once"},
		// Issue 14: side by side, one MAC verifies every split of the bytes
		// between id and body, so a captured delivery verifies under
		// several ids.
		{"id next to body", cfg(HMACConfig{Template: "{id}{body}"}, Field{Header: "X-Id"}), "{body} follows {id}"},
		{"body next to id", cfg(HMACConfig{Template: "{body}{id}"}, Field{Header: "X-Id"}), "{id} follows {body}"},
		{"free-form id next to timestamp", cfg(HMACConfig{Template: "{id}{timestamp}.{body}", TimestampHeader: "X-Ts"}, Field{Header: "X-Id"}),
			"{timestamp} follows {id}"},
		{"unknown id_format", cfg(HMACConfig{Template: "{id}.{body}", IDFormat: "ulid"}, Field{Header: "X-Id"}), "hmac.id_format"},
		{"id_format without {id}", cfg(HMACConfig{IDFormat: "uuid"}, idField), "hmac.id_format"},
		{"unknown timestamp_format", cfg(HMACConfig{Template: "{timestamp}.{body}", TimestampHeader: "X-Ts", TimestampFormat: "iso"}, idField),
			"hmac.timestamp_format"},
		{"timestamp_format without header", cfg(HMACConfig{TimestampFormat: "rfc3339"}, idField), "hmac.timestamp_format"},
		{"timestamp field and header", cfg(HMACConfig{Template: "{timestamp}.{body}", TimestampHeader: "X-Ts", TimestampField: "ts"}, idField),
			"hmac.timestamp_field"},
		{"timestamp field, template {timestamp}", cfg(HMACConfig{Template: "{timestamp}.{body}", TimestampField: "ts"}, idField),
			"hmac.template"},
		{"timestamp field, a gjson pattern", cfg(HMACConfig{TimestampField: "a.*"}, idField), "hmac.timestamp_field"},
		// Issue 14: an unsigned header id needs the explicit opt-in.
		{"unsigned id header", cfg(HMACConfig{}, Field{Header: "X-Event-Id"}), "hmac.allow_unsigned_id"},
		{"unsigned id header beside a field", cfg(HMACConfig{}, Field{Header: "X-Event-Id", Field: "id"}), "hmac.allow_unsigned_id"},
		{"typo", cfg(HMACConfig{Template: "{timestmp}.{body}", TimestampHeader: "X-Ts"}, idField), "unknown placeholder {timestmp}"},
		{"id without id header", cfg(HMACConfig{Template: "{id}.{body}"}, idField), "{id} needs event_id.header"},
		{"bad timestamp header", cfg(HMACConfig{Template: "{timestamp}.{body}", TimestampHeader: "X Ts"}, idField), "hmac.timestamp_header"},
	} {
		_, err := New(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: err = %v, want it to name %q", tt.name, err, tt.errHas)
		}
	}
	// Side by side where a fixed format gives the split (template_test.go).
	for _, tmpl := range []string{"{body}", "a{-}c{body}", "{timestamp}.{body}", "}{{body}{", "{ {body} }",
		"{timestamp}{body}", "{body}{timestamp}", "{timestamp}{id}.{body}"} {
		c := cfg(HMACConfig{Template: tmpl}, idField)
		if strings.Contains(tmpl, "{id}") {
			c.EventID = Field{Header: "X-Id"}
		}
		if strings.Contains(tmpl, "{timestamp}") {
			c.HMAC.TimestampHeader = "X-Ts"
		}
		if _, err := New(c); err != nil {
			t.Errorf("template %q: %v", tmpl, err)
		}
	}
}

// A signed {id} must not contain the template's bytes beside it: with
// "{id}.{body}", the signed bytes "a.{...}" also split as id "a.{" plus a
// shorter body, one signature for several ids.
func TestHMACSignedIDCannotShiftIntoTheBody(t *testing.T) {
	cfg := Config{Provider: "hmac", Secrets: []string{hmacSecret}, EventID: Field{Header: "X-Id"},
		HMAC: HMACConfig{Header: "X-Sig", Template: "{id}.{body}"}}
	v := newTestVerifier(t, cfg)
	const body = `{"n":1}.tail`
	mac := hex.EncodeToString(macOf(sha256.New, hmacSecret, `evt.`+body))
	// The genuine split verifies.
	if ev, err := v.Verify(&Request{Header: http.Header{"X-Sig": {mac}, "X-Id": {"evt"}}, Body: []byte(body)}); err != nil || ev.ID != "evt" {
		t.Fatalf("genuine: %+v, %v", ev, err)
	}
	// The same MAC under id `evt.{"n":1}` and body "tail" is refused.
	_, err := v.Verify(&Request{Header: http.Header{"X-Sig": {mac}, "X-Id": {`evt.{"n":1}`}}, Body: []byte("tail")})
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("shifted split: err = %v, want ErrMalformed", err)
	}
	if got := idBounds(mustTemplate(t, "{timestamp}:{id}-{body}")); got != ":-" {
		t.Fatalf("idBounds = %q", got)
	}
}

func mustTemplate(t *testing.T, s string) []templatePart {
	t.Helper()
	p, err := parseTemplate(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHMACFormats: the shapes the adjacency rule and the timestamp formats
// open up: Twitch EventSub ("{id}{timestamp}{body}", UUID id, RFC 3339),
// Box ("{body}{timestamp}", base64, RFC 3339 with an offset), a millisecond
// timestamp, and SHA-1.
func TestHMACFormats(t *testing.T) {
	const body = `{"subscription":{"type":"channel.follow"},"event":{}}`
	now := time.Date(2019, 11, 16, 10, 11, 12, 0, time.UTC)
	const uuid = "e76c6bd4-55c9-4987-8304-da1588d8988b"
	twitchTS := now.Add(634234626).Format(time.RFC3339Nano)
	twitch := Config{Provider: "hmac", Secrets: []string{hmacSecret}, EventID: Field{Header: "Twitch-Eventsub-Message-Id"},
		EventType: Field{Field: "subscription.type"},
		HMAC: HMACConfig{Header: "Twitch-Eventsub-Message-Signature", Prefix: "sha256=", Template: "{id}{timestamp}{body}",
			TimestampHeader: "Twitch-Eventsub-Message-Timestamp", TimestampFormat: "rfc3339", IDFormat: "uuid"}}
	th := func(id, ts, sig string) map[string][]string {
		return hdr("Twitch-Eventsub-Message-Id", id, "Twitch-Eventsub-Message-Timestamp", ts, "Twitch-Eventsub-Message-Signature", sig)
	}
	good := "sha256=" + hex.EncodeToString(macOf(sha256.New, hmacSecret, uuid+twitchTS+body))
	runVerifyCases(t, twitch, body, now, []verifyCase{
		{name: "twitch", header: th(uuid, twitchTS, good), want: Identity{ID: uuid, Type: "channel.follow"}},
		{name: "twitch: id not a UUID", header: th(uuid[:35], twitchTS, good), wantErr: ErrMalformed},
		{name: "twitch: a digit moved from the time into the id", header: th(uuid+"2", twitchTS[1:], good), wantErr: ErrTimestamp},
		{name: "twitch: timestamp not RFC 3339", header: th(uuid, now.Format(time.RFC1123), good), wantErr: ErrTimestamp},
		{name: "twitch: stale", now: DefaultTolerance + 2*time.Second, header: th(uuid, twitchTS, good), wantErr: ErrTimestamp},
		{name: "twitch: other id", header: th("f76c6bd4-55c9-4987-8304-da1588d8988b", twitchTS, good), wantErr: ErrBadSignature},
	})

	boxTS := now.In(time.FixedZone("", -8*3600)).Format(time.RFC3339)
	box := Config{Provider: "hmac", Secrets: []string{"box-secondary", "box-primary"}, EventID: Field{Header: "Box-Delivery-Id"},
		HMAC: HMACConfig{Header: "Box-Signature-Primary", Encoding: "base64", Template: "{body}{timestamp}",
			TimestampHeader: "Box-Delivery-Timestamp", TimestampFormat: "rfc3339", AllowUnsignedID: true}}
	boxSig := base64.StdEncoding.EncodeToString(macOf(sha256.New, "box-primary", body+boxTS))
	runVerifyCases(t, box, body, now, []verifyCase{
		{name: "box", header: hdr("Box-Signature-Primary", boxSig, "Box-Delivery-Timestamp", boxTS, "Box-Delivery-Id", "d-1"),
			want: Identity{ID: "d-1", SecretIndex: 1}},
		{name: "box: timestamp changed", header: hdr("Box-Signature-Primary", boxSig, "Box-Delivery-Timestamp", now.Format(time.RFC3339), "Box-Delivery-Id", "d-1"),
			wantErr: ErrBadSignature},
	})

	ms := strconv.FormatInt(now.UnixMilli(), 10)
	msCfg := Config{Provider: "hmac", Secrets: []string{hmacSecret}, EventID: Field{Field: "event.id"},
		HMAC: HMACConfig{Header: "X-Sig", Template: "{timestamp}{body}", TimestampHeader: "X-Ts", TimestampFormat: "unix_ms"}}
	msSig := hex.EncodeToString(macOf(sha256.New, hmacSecret, ms+`{"event":{"id":"e"}}`))
	runVerifyCases(t, msCfg, `{"event":{"id":"e"}}`, now, []verifyCase{
		{name: "unix ms beside the body", header: hdr("X-Sig", msSig, "X-Ts", ms), want: Identity{ID: "e"}},
		{name: "seconds where ms are expected", header: hdr("X-Sig", msSig, "X-Ts", ms[:len(ms)-3]), wantErr: ErrTimestamp},
		{name: "leading zero beside the body", header: hdr("X-Sig", msSig, "X-Ts", "0"+ms), wantErr: ErrTimestamp},
	})

	sha1Cfg := Config{Provider: "hmac", Secrets: []string{hmacSecret}, EventID: Field{Field: "id"},
		HMAC: HMACConfig{Header: "X-Hub-Signature", Prefix: "sha1=", Algorithm: "sha1"}}
	const sbody = `{"id":"s1"}`
	runVerifyCases(t, sha1Cfg, sbody, now, []verifyCase{
		{name: "sha1", header: hdr("X-Hub-Signature", "sha1="+hex.EncodeToString(macOf(sha1.New, hmacSecret, sbody))), want: Identity{ID: "s1"}},
		{name: "sha256 MAC under sha1", header: hdr("X-Hub-Signature", "sha1="+hex.EncodeToString(macOf(sha256.New, hmacSecret, sbody))),
			wantErr: ErrBadSignature},
	})
}
