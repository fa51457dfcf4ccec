package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// checkSentinel fails unless err wraps exactly the sentinels Reason knows, so
// ingress can always map a rejection to an answer.
func checkSentinel(t *testing.T, err error) {
	t.Helper()
	if Reason(err) == "error" {
		t.Fatalf("error wraps no sentinel: %v", err)
	}
}

func FuzzStandardVerify(f *testing.F) {
	secrets := []string{whsec(keyA), specSecret}
	specKey, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(specSecret, "whsec_"))
	keys := [][]byte{keyA, specKey}
	now := time.Unix(specTimestamp, 0)
	v, err := New(Config{Provider: "standard", Secrets: secrets})
	if err != nil {
		f.Fatal(err)
	}

	ts := strconv.Itoa(specTimestamp)
	f.Add(specMsgID, ts, specSignature, []byte(specPayload))
	f.Add("msg_1", ts, signStandard(keyA, "msg_1", specTimestamp, `{"type":"a.b"}`), []byte(`{"type":"a.b"}`))
	f.Add("msg_1", ts, "v1a,AAAA "+signStandard(keyA, "msg_1", specTimestamp, "x"), []byte("x"))
	f.Add("msg_1", ts, "v1,!!!! v1, ,v1 v1,", []byte(`{"type":7}`))
	f.Add("", "", "", []byte(nil))
	f.Add("m", "+1614265330", specSignature, []byte("{"))
	f.Add("m", "99999999999999999999999", specSignature, []byte("{}"))

	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", sig)
		ev, err := v.Verify(&Delivery{Header: h, Body: body, Now: now})
		if err != nil {
			checkSentinel(t, err)
			return
		}
		// Success must mean what the spec means: an id, an in-window
		// timestamp and a v1 entry that is the MAC under the reported key.
		if ev.ID != id || id == "" {
			t.Fatalf("ID = %q, want webhook-id %q", ev.ID, id)
		}
		sec, perr := strconv.ParseInt(ts, 10, 64)
		if perr != nil || now.Sub(time.Unix(sec, 0)).Abs() > DefaultTolerance {
			t.Fatalf("accepted timestamp %q", ts)
		}
		m := hmac.New(sha256.New, keys[ev.SecretIndex])
		m.Write([]byte(id + "." + ts + "."))
		m.Write(body)
		want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
		if !strings.Contains(" "+sig+" ", " "+want+" ") {
			t.Fatalf("accepted signature header %q without the entry %q", sig, want)
		}
	})
}

func FuzzHMACVerify(f *testing.F) {
	vhex, err := New(Config{Provider: "hmac", Secrets: []string{hmacOtherSecret, hmacSecret},
		HMAC:    HMACConfig{Header: "X-Sig", Prefix: "sha256="},
		EventID: Field{Header: "X-Event-Id", Field: "id"}, EventType: Field{Field: "type"}})
	if err != nil {
		f.Fatal(err)
	}
	vb64, err := New(Config{Provider: "hmac", Secrets: []string{hmacSecret},
		HMAC: HMACConfig{Header: "X-Sig", Algorithm: "sha512", Encoding: "base64"}, EventID: Field{Field: "data.id"}})
	if err != nil {
		f.Fatal(err)
	}

	body := `{"id":"evt_1","type":"t","data":{"id":42}}`
	f.Add("sha256="+hex.EncodeToString(macOf(sha256.New, hmacSecret, body)), "", []byte(body))
	f.Add("sha256="+hex.EncodeToString(macOf(sha256.New, hmacSecret, "{")), "hdr_1", []byte("{"))
	f.Add("sha256="+hex.EncodeToString(macOf(sha256.New, hmacSecret, "[]")), "", []byte("[]"))
	f.Add("sha256=zz", "", []byte(body))
	f.Add("", "", []byte(nil))
	f.Add("AAAA==", "x", []byte("\xff"))

	f.Fuzz(func(t *testing.T, sig, idHeader string, body []byte) {
		h := http.Header{}
		h.Set("X-Sig", sig)
		h.Set("X-Event-Id", idHeader)
		var hexOK bool
		for _, v := range []Verifier{vhex, vb64} {
			ev, err := v.Verify(&Delivery{Header: h, Body: body})
			if err != nil {
				checkSentinel(t, err)
				continue
			}
			if ev.ID == "" {
				t.Fatal("accepted a delivery without an event id")
			}
			hexOK = hexOK || v == vhex
		}
		if !hexOK {
			return
		}
		// Only a real MAC passes: "sha256=" + hex is its sole spelling apart
		// from the letter case of the hex digits.
		mac, ok := strings.CutPrefix(sig, "sha256=")
		if !ok {
			t.Fatalf("accepted %q without the configured prefix", sig)
		}
		for _, s := range []string{hmacOtherSecret, hmacSecret} {
			if strings.EqualFold(mac, hex.EncodeToString(macOf(sha256.New, s, string(body)))) {
				return
			}
		}
		t.Fatalf("accepted signature %q that is no MAC of the body", sig)
	})
}

func FuzzJSONField(f *testing.F) {
	f.Add([]byte(`{"data":{"object":{"id":"ch_1"}}}`), "data.object.id", "ch_1")
	f.Add([]byte(`{"id":12345678901234567890}`), "id", "")
	f.Add([]byte(`{"a.b":"x"}`), `a\.b`, "\u00e9\"\\")
	f.Add([]byte(`{"items":[{"id":"a"}]}`), "items.0.id", "\x00\xff")
	f.Add([]byte(`{"id":"x"`), "id", "")
	f.Add([]byte(`[1,2,{"a":null}]`), "2.a", "")
	f.Add([]byte(``), "@reverse", "")
	f.Add([]byte(`{"a":{"b":1}}`), "a..b", "")

	f.Fuzz(func(t *testing.T, body []byte, path, value string) {
		if validatePath(path) == nil {
			_, err := jsonField(body, path)
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			// gjson's validator and encoding/json's must agree on what JSON is,
			// or a body would be malformed for one reader and not another.
			if valid := json.Valid(body); valid != (err == nil) {
				t.Fatalf("encoding/json Valid = %v, jsonField err = %v", valid, err)
			}
		}

		// Round trip: whatever string encoding/json writes, the field reads
		// back as encoding/json reads it.
		doc, err := json.Marshal(map[string]map[string]string{"k": {"v": value}})
		if err != nil {
			t.Fatal(err)
		}
		var back map[string]map[string]string
		if err := json.Unmarshal(doc, &back); err != nil {
			t.Fatal(err)
		}
		got, err := jsonField(doc, "k.v")
		if err != nil || got != back["k"]["v"] {
			t.Fatalf("jsonField(%s) = %q, %v; want %q", doc, got, err, back["k"]["v"])
		}
	})
}
