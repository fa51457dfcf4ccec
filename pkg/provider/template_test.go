package provider

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// splits returns every way the signed bytes s read as v's template: each
// placeholder's value as the verifier would accept it (format, canonical
// form, window, id bounds) and the literals where they must be. One
// signature verifies exactly the readings returned, so an injective
// template must yield one.
func splits(v *hmacVerifier, s string, now time.Time) [][3]string {
	var out [][3]string
	var walk func(i int, rest string, vals [3]string)
	walk = func(i int, rest string, vals [3]string) {
		if i == len(v.template) {
			if rest == "" {
				out = append(out, vals)
			}
			return
		}
		p := v.template[i]
		if p.placeholder == "" {
			if r, ok := strings.CutPrefix(rest, p.literal); ok {
				walk(i+1, r, vals)
			}
			return
		}
		for n := 0; n <= len(rest); n++ {
			val := rest[:n]
			switch p.placeholder {
			case "id":
				if val == "" || (v.idUUID && !isUUID(val)) || (!v.idUUID && containsAnyByte(val, v.idBounds)) {
					continue
				}
				vals[0] = val
			case "timestamp":
				if v.checkTimestamp(val, now) != nil {
					continue
				}
				vals[1] = val
			case "body":
				vals[2] = val
			}
			walk(i+1, rest[n:], vals)
		}
	}
	walk(0, s, [3]string{})
	return out
}

// expand is the sender's side: plain substitution.
func expand(tmpl, id, ts, body string) string {
	return strings.NewReplacer("{id}", id, "{timestamp}", ts, "{body}", body).Replace(tmpl)
}

func adjacencyVerifier(t testing.TB, tmpl, format, idFormat string) (*hmacVerifier, error) {
	t.Helper()
	cfg := Config{Provider: "hmac", Secrets: []string{hmacSecret}, Tolerance: DefaultTolerance, EventID: Field{Field: "id"},
		HMAC: HMACConfig{Header: "X-Sig", Template: tmpl, TimestampFormat: format, IDFormat: idFormat}}
	if strings.Contains(tmpl, "{timestamp}") {
		cfg.HMAC.TimestampHeader = "X-Ts"
	}
	if strings.Contains(tmpl, "{id}") {
		cfg.EventID = Field{Header: "X-Id"}
	}
	v, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return v.(*hmacVerifier), nil
}

// TestTemplateInjective checks the adjacency rule's argument on the
// templates it now admits (Zendesk's, Box's, Twitch's, Discord's shapes):
// hostile ids, times and bodies built to blur the boundary still read one
// way only. The templates it refuses are shown to read several ways.
func TestTemplateInjective(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	unix := strconv.FormatInt(now.Unix(), 10)
	rfc := now.UTC().Format(time.RFC3339Nano)
	rfcFrac := now.Add(634234626).UTC().Format(time.RFC3339Nano)
	const uuid = "befa7b53-d79d-478f-86b9-120f112b044e"
	bodies := []string{`{"id":"e1"}`, "", "0", "00{", "1700000000", "0" + unix, unix + "{}", rfc + "x", "Z", "+00:00",
		".5Z", "-" + uuid, uuid, "2023-11-14T22:13:20Z" + unix}
	for _, tt := range []struct{ tmpl, format, idFormat string }{
		{"{timestamp}{body}", "", ""},
		{"{timestamp}{body}", "unix_ms", ""},
		{"{timestamp}{body}", "rfc3339", ""},
		{"{body}{timestamp}", "", ""},
		{"{body}{timestamp}", "rfc3339", ""},
		{"{id}{timestamp}{body}", "rfc3339", "uuid"},
		{"{id}{timestamp}{body}", "", "uuid"},
		{"{timestamp}{id}.{body}", "", ""},
		{"{id}{body}", "", "uuid"},
		{"{body}{id}", "", "uuid"},
		{"{timestamp}.{id}{body}{timestamp}", "", "uuid"}, // placeholders twice
	} {
		v, err := adjacencyVerifier(t, tt.tmpl, tt.format, tt.idFormat)
		if err != nil {
			t.Fatalf("%s (%s, id %s): refused: %v", tt.tmpl, tt.format, tt.idFormat, err)
		}
		var times []string
		switch tt.format {
		case "rfc3339":
			times = []string{rfc, rfcFrac, now.Add(-time.Minute).Format("2006-01-02T15:04:05-07:00")}
		case "unix_ms":
			times = []string{strconv.FormatInt(now.UnixMilli(), 10)}
		default:
			times = []string{unix, strconv.FormatInt(now.Unix()+9, 10)}
		}
		for _, ts := range times {
			for _, body := range bodies {
				id := "e-1"
				if tt.idFormat == "uuid" {
					id = uuid
				}
				want := [3]string{id, ts, body}
				if !strings.Contains(tt.tmpl, "{id}") {
					want[0] = ""
				}
				if !strings.Contains(tt.tmpl, "{timestamp}") {
					want[1] = ""
				}
				got := splits(v, expand(tt.tmpl, id, ts, body), now)
				if len(got) != 1 || got[0] != want {
					t.Errorf("%s (%s): %q %q %q reads %d ways: %q", tt.tmpl, tt.format, id, ts, body, len(got), got)
				}
			}
		}
	}

	// Why the rule is needed: without a fixed format one signature reads
	// several ways, and a leading zero would move a digit between neighbours.
	loose := &hmacVerifier{template: mustTemplate(t, "{id}{body}")}
	if got := splits(loose, "evt_1{}", now); len(got) < 2 {
		t.Fatalf("{id}{body}: %d readings, want several", len(got))
	}
	for _, tmpl := range []string{"{id}{body}", "{body}{id}", "{id}{timestamp}.{body}", "{body}.{timestamp}{id}"} {
		if _, err := adjacencyVerifier(t, tmpl, "", ""); err == nil || !strings.Contains(err.Error(), "no fixed format") {
			t.Errorf("%s with a free-form id: err = %v, want a refusal", tmpl, err)
		}
	}
	v, err := adjacencyVerifier(t, "{id}{timestamp}{body}", "", "uuid")
	if err != nil {
		t.Fatal(err)
	}
	if err := v.checkTimestamp("0"+unix, now); !errors.Is(err, ErrTimestamp) {
		t.Fatalf("leading zero beside a placeholder: %v, want ErrTimestamp", err)
	}
	// The 24 h cap that keeps one digit more or less out of the window.
	cfg := Config{Provider: "hmac", Secrets: []string{"s"}, Tolerance: 25 * time.Hour, EventID: Field{Field: "id"},
		HMAC: HMACConfig{Header: "X-Sig", Template: "{timestamp}{body}", TimestampHeader: "X-Ts"}}
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "tolerance") {
		t.Fatalf("25h tolerance beside a unix timestamp: %v", err)
	}
}

// FuzzTemplateInjective: for any template the hmac family accepts, the
// bytes a sender signs read back exactly one way, the sender's.
func FuzzTemplateInjective(f *testing.F) {
	for _, s := range []string{"{timestamp}{body}", "{body}{timestamp}", "{id}{timestamp}{body}", "{timestamp}{id}.{body}",
		"{id}.{timestamp}.{body}", "v0:{timestamp}:{body}", "{id}{body}"} {
		f.Add(s, uint8(0), "befa7b53-d79d-478f-86b9-120f112b044e", int64(0), "1700000000{}")
		f.Add(s, uint8(2), "e.1", int64(-300), "2023-11-14T22:13:20Z")
	}
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, tmpl string, mode uint8, id string, offset int64, body string) {
		if len(tmpl) > 64 || len(body) > 64 || len(id) > 40 || strings.ContainsAny(id, "\r\n") {
			return
		}
		if tmpl == "" {
			tmpl = "{body}" // the default
		}
		format := []string{"", "unix_ms", "rfc3339"}[mode%3]
		idFormat := ""
		if mode&4 != 0 {
			idFormat = "uuid"
		}
		v, err := adjacencyVerifier(t, tmpl, format, idFormat)
		if err != nil {
			return
		}
		at := now.Add(time.Duration(offset%301) * time.Second)
		ts := []string{strconv.FormatInt(at.Unix(), 10), strconv.FormatInt(at.UnixMilli(), 10), at.UTC().Format(time.RFC3339Nano)}[mode%3]
		hasID := strings.Contains(tmpl, "{id}")
		if !hasID {
			id = ""
		} else if id == "" || (v.idUUID && !isUUID(id)) || (!v.idUUID && containsAnyByte(id, v.idBounds)) {
			return // the verifier refuses such an id before it reads anything
		}
		if !strings.Contains(tmpl, "{timestamp}") {
			ts = ""
		}
		want := [3]string{id, ts, body}
		got := splits(v, expand(tmpl, id, ts, body), now)
		if len(got) != 1 || got[0] != want {
			t.Fatalf("template %q (%s, id %s): %q reads %d ways: %q", tmpl, format, idFormat, want, len(got), got)
		}
	})
}

var rfc3339Grammar = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})$`)

// FuzzTimestampFormats: the strict RFC 3339 reader is its grammar exactly
// (differential against a regular expression), what it accepts time.Parse
// reads, and canonical unix values have no leading zero.
func FuzzTimestampFormats(f *testing.F) {
	for _, s := range []string{"2019-11-16T10:11:12.634234626Z", "2023-03-23T20:38:17+01:00", "2023-03-23t20:38:17Z",
		"2023-03-23T20:38:17", "2023-03-23T20:38:17.Z", "2023-13-23T20:38:17Z", "1700000000", "01700000000", "0", "1700000000000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := strictRFC3339(s), rfc3339Grammar.MatchString(s); got != want {
			t.Fatalf("strictRFC3339(%q) = %v, grammar says %v", s, got, want)
		}
		if tm, err := formatRFC3339.parse(s, true); err == nil {
			if back, perr := time.Parse(time.RFC3339Nano, s); perr != nil || !back.Equal(tm) {
				t.Fatalf("parse(%q) = %v, time.Parse: %v, %v", s, tm, back, perr)
			}
		} else if !errors.Is(err, ErrTimestamp) {
			t.Fatalf("error %v does not wrap ErrTimestamp", err)
		}
		for _, f := range []timestampFormat{formatUnix, formatUnixMS} {
			if _, err := f.parse(s, true); err == nil && (len(s) > 1 && s[0] == '0' || strings.Trim(s, "0123456789") != "") {
				t.Fatalf("%s: canonical parse accepted %q", f, s)
			}
		}
	})
}
