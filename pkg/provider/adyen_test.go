package provider

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// Adyen's published worked example (adyen-go-api-library's hmacvalidator
// tests and Adyen's docs use the same key, item and signature).
const (
	adyenKey  = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
	adyenItem = `{"NotificationRequestItem":{"additionalData":{"hmacSignature":"coqCmt/IZ4E3CzPvMY8zTjQVL5hYJUiBRg8UU+iCWo0="},"amount":{"value":1130,"currency":"EUR"},"pspReference":"7914073381342284","eventCode":"AUTHORISATION","merchantAccountCode":"TestMerchant","merchantReference":"TestPayment-1407325143704","paymentMethod":"visa","success":"true"}}`
)

// adyenSigned signs an item as Adyen does, for the test's own items.
func adyenSignedItem(key, psp, event, ref string) string {
	k, _ := hex.DecodeString(key)
	data := psp + "::TestMerchant:" + ref + ":500:EUR:" + event + ":true"
	sig := base64.StdEncoding.EncodeToString(macOf(sha256.New, string(k), data))
	return `{"NotificationRequestItem":{"additionalData":{"hmacSignature":"` + sig + `"},"amount":{"value":500,"currency":"EUR"},"pspReference":"` + psp +
		`","eventCode":"` + event + `","merchantAccountCode":"TestMerchant","merchantReference":"` + ref + `","success":"true"}}`
}

func TestAdyenVerify(t *testing.T) {
	cfg := Config{Provider: "adyen", Secrets: []string{"00", adyenKey}}
	body := func(items ...string) string {
		return `{"live":"false","notificationItems":[` + strings.Join(items, ",") + `]}`
	}
	two := body(adyenItem, adyenSignedItem(adyenKey, "8815329842815468", "CAPTURE", "order:42"))
	for _, tt := range []struct {
		name  string
		body  string
		err   error
		items []string // ids
	}{
		{"Adyen's worked example", body(adyenItem), nil, []string{"7914073381342284:AUTHORISATION"}},
		{"two items, a colon in merchantReference", two, nil, []string{"7914073381342284:AUTHORISATION", "8815329842815468:CAPTURE"}},
		{"one item tampered: the whole delivery refused", body(adyenItem, strings.Replace(adyenSignedItem(adyenKey, "1", "REFUND", "r"), `"value":500`, `"value":5000`, 1)), ErrBadSignature, nil},
		{"the amount moved into merchantReference", body(strings.Replace(strings.Replace(adyenItem, `"TestPayment-1407325143704"`, `"TestPayment-1407325143704:1130"`, 1), `"value":1130,"currency":"EUR"`, `"value":"EUR","currency":""`, 1)), ErrBadSignature, nil},
		{"a colon in eventCode", body(strings.Replace(adyenItem, `"AUTHORISATION"`, `"AUTHORISATION:x"`, 1)), ErrBadSignature, nil},
		{"the wrong key", body(adyenSignedItem("00ff", "2", "CAPTURE", "r")), ErrBadSignature, nil},
		{"no signature", body(`{"NotificationRequestItem":{"pspReference":"3","eventCode":"CAPTURE"}}`), ErrMissingHeader, nil},
		{"no items", `{"live":"false"}`, ErrMissingHeader, nil},
		{"an empty list", body(), ErrMissingHeader, nil},
		{"not JSON", `{"notificationItems":[`, ErrBadSignature, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newTestVerifier(t, cfg)
			ev, err := v.Verify(&Request{Body: []byte(tt.body)})
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Verify = %+v, %v; want %v", ev, err, tt.err)
				}
				return
			}
			if err != nil || ev.SecretIndex != 1 {
				t.Fatalf("Verify = %+v, %v", ev, err)
			}
			s, err := NewSplitter(cfg)
			if err != nil || s == nil {
				t.Fatalf("NewSplitter: %v", err)
			}
			items, err := s.Split([]byte(tt.body), ev, nil)
			if err != nil || len(items) != len(tt.items) {
				t.Fatalf("Split = %+v, %v", items, err)
			}
			for i := range items {
				if items[i].ID != tt.items[i] {
					t.Errorf("item %d id %q, want %q", i, items[i].ID, tt.items[i])
				}
			}
		})
	}
	if _, err := New(Config{Provider: "adyen", Secrets: []string{"not-hex"}}); err == nil || !strings.Contains(err.Error(), "hex") {
		t.Fatalf("a non-hex key: %v", err)
	}
	if _, err := New(Config{Provider: "adyen", Secrets: []string{adyenKey}, EventID: Field{Field: "x"}}); err == nil {
		t.Fatal("event_id with adyen was accepted")
	}
}

// FuzzAdyenVerify: success means every item's hmacSignature is the MAC of
// its colon-joined fields, all but merchantReference colon-free.
func FuzzAdyenVerify(f *testing.F) {
	f.Add(`{"notificationItems":[` + adyenItem + `]}`)
	f.Add(`{"notificationItems":[` + adyenItem + `,` + adyenItem + `]}`)
	f.Add(`{"notificationItems":[{"NotificationRequestItem":{"pspReference":"1:2"}}]}`)
	v, err := New(Config{Provider: "adyen", Secrets: []string{adyenKey}})
	if err != nil {
		f.Fatal(err)
	}
	key, _ := hex.DecodeString(adyenKey)
	f.Fuzz(func(t *testing.T, body string) {
		if _, err := v.Verify(&Request{Body: []byte(body)}); err != nil {
			checkSentinel(t, err)
			return
		}
		items, _ := walk([]byte(body), "notificationItems")
		for _, it := range items.Array() {
			var fields []string
			for _, f := range adyenSigned {
				s, _ := lookup([]byte(it.Raw), "NotificationRequestItem."+f)
				if f != "merchantReference" && strings.Contains(s, ":") {
					t.Fatalf("accepted a colon in %s", f)
				}
				fields = append(fields, s)
			}
			sig, _ := lookup([]byte(it.Raw), "NotificationRequestItem.additionalData.hmacSignature")
			var raw [sha256.Size + 2]byte
			if !decodeMAC(raw[:], sig, sha256.Size, true) ||
				string(raw[:sha256.Size]) != string(macOf(sha256.New, string(key), strings.Join(fields, ":"))) {
				t.Fatalf("accepted an item whose signature is not its MAC: %s", it.Raw)
			}
		}
	})
}
