package envelope

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseDeliveryRefusesWhatNoConfigurationCanHold(t *testing.T) {
	good := NewDelivery(Key{Integration: "demo", Account: "main", EventID: "evt_1"}, "acme", "thing.happened", []byte(`{}`), time.Now()).Msg()
	if _, err := ParseDelivery(good.Header, good.Data); err != nil {
		t.Fatalf("a genuine delivery: %v", err)
	}
	for name, mutate := range map[string]func(h map[string][]string){
		"key not UTF-8":           func(h map[string][]string) { h[HeaderKey] = []string{"demo/main/\xff\xfe"} },
		"NUL in the event id":     func(h map[string][]string) { h[HeaderKey] = []string{"demo/main/evt\x00"} },
		"bidi override in the id": func(h map[string][]string) { h[HeaderKey] = []string{"demo/main/evt\u202etxt.exe"} },
		"C1 control in the id":    func(h map[string][]string) { h[HeaderKey] = []string{"demo/main/evt\u0085"} },
		"event id past its bound": func(h map[string][]string) {
			h[HeaderKey] = []string{"demo/main/" + strings.Repeat("x", MaxEventIDBytes+1)}
		},
		"integration not a name":   func(h map[string][]string) { h[HeaderKey] = []string{"de mo/main/evt_1"} },
		"integration past 64":      func(h map[string][]string) { h[HeaderKey] = []string{strings.Repeat("a", 65) + "/main/evt_1"} },
		"tenant with a control":    func(h map[string][]string) { h[HeaderTenant] = []string{"acme\x1b[31m"} },
		"type not UTF-8":           func(h map[string][]string) { h[HeaderEventType] = []string{"thing\xff"} },
		"hash past 64 characters":  func(h map[string][]string) { h[HeaderPayloadSHA256] = []string{strings.Repeat("a", 65)} },
		"message id not UTF-8":     func(h map[string][]string) { h[HeaderMsgID] = []string{"replay:\xff"} },
		"message id past its size": func(h map[string][]string) { h[HeaderMsgID] = []string{strings.Repeat("m", MaxMsgIDBytes+1)} },
	} {
		m := NewDelivery(Key{Integration: "demo", Account: "main", EventID: "evt_1"}, "acme", "thing.happened", []byte(`{}`), time.Now()).Msg()
		mutate(m.Header)
		if _, err := ParseDelivery(m.Header, m.Data); !errors.Is(err, ErrBadEnvelope) {
			t.Errorf("%s: ParseDelivery = %v, want ErrBadEnvelope", name, err)
		}
	}
}

func TestParseReceiptRefusesValuesPostgresWould(t *testing.T) {
	for name, raw := range map[string]string{
		"NUL in the key":     `{"id":"r1","key":"demo/main/evt\u0000","received_at":"2026-11-30T00:00:00Z"}`,
		"key past its bound": `{"id":"r1","key":"demo/main/` + strings.Repeat("x", MaxEventIDBytes+1) + `","received_at":"2026-11-30T00:00:00Z"}`,
		"NUL in the id":      `{"id":"r\u0000","key":"demo/main/evt","received_at":"2026-11-30T00:00:00Z"}`,
	} {
		if _, err := ParseReceipt([]byte(raw)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	r, err := ParseReceipt([]byte(`{"id":"r1","key":"demo/main/evt","received_at":"2026-11-30T00:00:00Z","status_code":200,
		"retry_hints":{"X-Slack-Retry-Reason":"http\u0000_timeout","X-Slack-Retry-Num":"2","bad\u0000name":"1"}}`))
	if err != nil {
		t.Fatalf("a receipt with odd retry hints is still a receipt: %v", err)
	}
	if len(r.RetryHints) != 1 || r.RetryHints["X-Slack-Retry-Num"] != "2" {
		t.Errorf("retry hints %v: only the printable one should be kept", r.RetryHints)
	}
}
