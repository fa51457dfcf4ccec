package provider

// Adyen standard webhooks (JSON): the signature is inside each item of the
// body, notificationItems[].NotificationRequestItem.additionalData
// .hmacSignature, base64 HMAC-SHA256 under the HEX-DECODED HMAC key of
//
//	pspReference:originalReference:merchantAccountCode:merchantReference:amount.value:amount.currency:eventCode:success
//
// (an absent field is empty), as adyen-go-api-library's hmacvalidator and
// Adyen's worked example compute it. Every item must verify, or the whole
// delivery is refused (401). The fields are joined by ':' without escaping,
// so a colon inside one of them would let the same signed text split into
// other fields (another amount, another eventCode): every field but
// merchantReference, which the merchant chooses, must be colon-free, and
// then the split is unique (count from both ends). Items whose signature
// verifies are split into one event each (split: its default names
// notificationItems, the id pspReference and eventCode together, as Adyen
// documents them unique).

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/intakehq/intake/internal/hmacpool"
)

// adyenAccepted is what Adyen expects in the body of its webhook's answer
// once the notification is stored; another answer (even a 200 with
// Intake's JSON) leaves it retrying, per its documentation.
const adyenAccepted = "[accepted]"

// Acknowledgement returns the body cfg's sender expects in the 200 to a
// stored delivery (accepted, or a duplicate: stored before) instead of
// Intake's JSON answer: Adyen's "[accepted]". "" for every other sender.
func Acknowledgement(cfg Config) string {
	if r, err := resolvePreset(cfg); err == nil && r.Provider == "adyen" {
		return adyenAccepted
	}
	return ""
}

// adyenSplit is provider adyen's split default.
var adyenSplit = SplitConfig{Field: "notificationItems", ID: "NotificationRequestItem.pspReference",
	Type: "NotificationRequestItem.eventCode", IDWithType: true}

// adyenSigned are the signed fields, in order, inside NotificationRequestItem.
var adyenSigned = [...]string{"pspReference", "originalReference", "merchantAccountCode", "merchantReference",
	"amount.value", "amount.currency", "eventCode", "success"}

type adyen struct {
	keys     []*hmacpool.Key // HMAC-SHA256 under the hex-decoded keys
	max      int
	identity identityReader
}

func newAdyen(cfg Config) (Verifier, error) {
	a := &adyen{max: cfg.Split.MaxItems}
	if a.max == 0 {
		a.max = DefaultMaxSplitItems
	}
	for i, s := range cfg.Secrets {
		k, err := hex.DecodeString(s)
		if err != nil || len(k) == 0 {
			return nil, fmt.Errorf("secrets[%d]: an Adyen HMAC key is hex (as the Customer Area shows it)", i)
		}
		a.keys = append(a.keys, hmacpool.New(sha256.New, k))
	}
	if cfg.Split.IsZero() {
		return nil, fmt.Errorf("split: required for provider adyen (its default fills it)")
	}
	var err error
	if a.identity, err = newIdentity(cfg, identityFields{}); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *adyen) Verify(d *Request) (Identity, error) {
	if !gjson.ValidBytes(d.Body) {
		return Identity{}, fmt.Errorf("%w: body is not valid JSON", ErrBadSignature)
	}
	items, err := walk(d.Body, "notificationItems")
	if err != nil || !items.IsArray() {
		return Identity{}, fmt.Errorf("%w: body notificationItems", ErrMissingHeader)
	}
	idx, n := -1, 0
	var fail error
	items.ForEach(func(_, it gjson.Result) bool {
		if n++; n > a.max {
			fail = fmt.Errorf("%w: more than %d notificationItems", ErrMalformed, a.max)
			return false
		}
		i, err := a.verifyItem([]byte(it.Raw))
		if err != nil {
			fail = fmt.Errorf("%w (notificationItems %d)", err, n-1)
			return false
		}
		if idx < 0 {
			idx = i
		}
		return true
	})
	if fail != nil {
		return Identity{}, fail
	}
	if n == 0 {
		return Identity{}, fmt.Errorf("%w: no notificationItems", ErrMissingHeader)
	}
	ev := Identity{SecretIndex: idx}
	body := jsonBody{raw: d.Body}
	if err := a.identity.read(d.Header, &body, &ev); err != nil {
		return Identity{}, err
	}
	return ev, nil
}

// verifyItem checks one item's signature; the index of the key that made it.
func (a *adyen) verifyItem(raw []byte) (int, error) {
	var fields [len(adyenSigned)]string
	for i, f := range adyenSigned {
		v, err := lookup(raw, "NotificationRequestItem."+f)
		if err != nil {
			return -1, fmt.Errorf("%w: %s", ErrBadSignature, f)
		}
		if f != "merchantReference" && strings.IndexByte(v, ':') >= 0 {
			return -1, fmt.Errorf("%w: %s contains ':', which separates the signed fields", ErrBadSignature, f)
		}
		fields[i] = v
	}
	sig, err := lookup(raw, "NotificationRequestItem.additionalData.hmacSignature")
	if err != nil || sig == "" {
		return -1, fmt.Errorf("%w: additionalData.hmacSignature", ErrMissingHeader)
	}
	var want [sha256.Size + 2]byte
	if !decodeMAC(want[:], sig, sha256.Size, true) {
		return -1, fmt.Errorf("%w: additionalData.hmacSignature is not 32 bytes of base64", ErrBadSignature)
	}
	msg := []byte(strings.Join(fields[:], ":"))
	idx := firstMatch(a.keys, want[:sha256.Size], msg)
	if idx < 0 {
		return -1, fmt.Errorf("%w: additionalData.hmacSignature does not match", ErrBadSignature)
	}
	return idx, nil
}
