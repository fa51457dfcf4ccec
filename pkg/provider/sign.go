package provider

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Message is what SignMessage signs: the body plus the identity a provider
// sends beside it in headers.
type Message struct {
	// ID is the event id for providers that send it in a header (standard,
	// svix, github, shopify, hmac with event_id.header). Stripe and Slack
	// carry it in the body.
	ID string
	// Type is the event type for providers that send it in a header
	// (github X-GitHub-Event, shopify X-Shopify-Topic); omitted when "".
	Type string
	Body []byte
	Time time.Time
}

// Sign produces the headers a provider would send for body, signed with
// cfg.Secrets[secretIndex]; see SignMessage.
func Sign(cfg Config, secretIndex int, eventID string, body []byte, now time.Time) (http.Header, error) {
	return SignMessage(cfg, secretIndex, Message{ID: eventID, Body: body, Time: now})
}

// SignMessage produces the headers a provider would send for m, signed with
// cfg.Secrets[secretIndex]. It serves `intake send`, the load generators and
// tests; it is the sending side of each scheme, so it shares no code path
// with verification beyond the standard library. For standard and svix a
// "whsk_" secret signs v1a (ed25519); a "whpk_" public key cannot sign.
func SignMessage(cfg Config, secretIndex int, m Message) (http.Header, error) {
	if secretIndex < 0 || secretIndex >= len(cfg.Secrets) {
		return nil, fmt.Errorf("secrets[%d]: no such secret", secretIndex)
	}
	cfg, err := resolvePreset(cfg)
	if err != nil {
		return nil, err
	}
	secret := cfg.Secrets[secretIndex]
	ts := strconv.FormatInt(m.Time.Unix(), 10)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	switch cfg.Provider {
	case "standard", "svix":
		sig, err := signStandardScheme(secret, m.ID+"."+ts+".", m.Body)
		if err != nil {
			return nil, fmt.Errorf("secrets[%d]: %w", secretIndex, err)
		}
		prefix := "webhook-"
		if cfg.Provider == "svix" {
			prefix = "svix-"
		}
		h.Set(prefix+"id", m.ID)
		h.Set(prefix+"timestamp", ts)
		h.Set(prefix+"signature", sig)
	case "stripe":
		h.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(macSum(sha256.New, secret, ts+".", m.Body)))
	case "github":
		h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(macSum(sha256.New, secret, "", m.Body)))
		h.Set("X-GitHub-Delivery", m.ID)
		if m.Type != "" {
			h.Set("X-GitHub-Event", m.Type)
		}
		h.Set("User-Agent", "GitHub-Hookshot/intake-send")
	case "shopify":
		shop := "intake-dev.myshopify.com"
		if len(cfg.AllowedShops) > 0 {
			shop = cfg.AllowedShops[0]
		}
		h.Set("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(macSum(sha256.New, secret, "", m.Body)))
		h.Set("X-Shopify-Shop-Domain", shop)
		h.Set("X-Shopify-Webhook-Id", m.ID)
		h.Set("X-Shopify-Event-Id", m.ID)
		h.Set("X-Shopify-Triggered-At", m.Time.UTC().Format(time.RFC3339Nano))
		if m.Type != "" {
			h.Set("X-Shopify-Topic", m.Type)
		}
	case "slack":
		h.Set("X-Slack-Request-Timestamp", ts)
		h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(macSum(sha256.New, secret, "v0:"+ts+":", m.Body)))
	case "hmac":
		signHMAC(h, cfg, secret, m)
	case "pairs":
		signPairs(h, cfg, secret, m)
	case "token":
		name := cfg.Token.Header
		if name == "" {
			name = "Authorization"
		}
		h.Set(name, cfg.Token.Prefix+secret)
		setIdentityHeaders(h, cfg, m)
	case "basic":
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(secret)))
		setIdentityHeaders(h, cfg, m)
	case "twilio":
		params, err := url.ParseQuery(string(m.Body))
		if err != nil {
			return nil, fmt.Errorf("provider twilio: the body must be form-encoded: %w", err)
		}
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		h.Set("X-Twilio-Signature", base64.StdEncoding.EncodeToString(macSum(sha1.New, secret, twilioSignedText(cfg.PublicURL, params), nil)))
		h.Set("I-Twilio-Idempotency-Token", m.ID)
	default:
		return nil, fmt.Errorf("provider %q: signing not supported", cfg.Provider)
	}
	return h, nil
}

// macSum is the HMAC of prefix followed by body under the secret's bytes.
func macSum(newHash func() hash.Hash, secret, prefix string, body []byte) []byte {
	m := hmac.New(newHash, []byte(secret))
	m.Write([]byte(prefix))
	m.Write(body)
	return m.Sum(nil)
}

// signStandardScheme returns one webhook-signature entry over prefix+body:
// v1 for a whsec_ secret, v1a for a whsk_ ed25519 secret key (base64 of the
// 32-byte seed or of the 64-byte seed+public key).
func signStandardScheme(secret, prefix string, body []byte) (string, error) {
	switch {
	case strings.HasPrefix(secret, "whpk_"):
		return "", fmt.Errorf("a whpk_ public key cannot sign; sign with its whsk_ secret key")
	case strings.HasPrefix(secret, "whsk_"):
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsk_"))
		var priv ed25519.PrivateKey
		switch {
		case err != nil:
		case len(raw) == ed25519.SeedSize:
			priv = ed25519.NewKeyFromSeed(raw)
		case len(raw) == ed25519.PrivateKeySize:
			priv = ed25519.PrivateKey(raw)
		}
		if priv == nil {
			return "", fmt.Errorf("whsk_ key is not base64 of a 32-byte seed or a 64-byte ed25519 private key")
		}
		return "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(priv, append([]byte(prefix), body...))), nil
	default:
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if err != nil {
			return "", fmt.Errorf("whsec secret is not base64 after the prefix")
		}
		m := hmac.New(sha256.New, key)
		m.Write([]byte(prefix))
		m.Write(body)
		return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
	}
}

// formatTime writes t as a timestamp_format option says.
func formatTime(format string, t time.Time) string {
	switch format {
	case "unix_ms":
		return strconv.FormatInt(t.UnixMilli(), 10)
	case "rfc3339":
		return t.UTC().Format(time.RFC3339Nano)
	}
	return strconv.FormatInt(t.Unix(), 10)
}

// signHMAC fills the generic provider's headers, expanding hmac.template by
// plain substitution.
func signHMAC(h http.Header, cfg Config, secret string, m Message) {
	newHash, _, err := macAlgorithm(cfg.HMAC.Algorithm)
	if err != nil {
		newHash = sha256.New // New refuses it; the signature will not verify
	}
	ts := formatTime(cfg.HMAC.TimestampFormat, m.Time)
	template := cfg.HMAC.Template
	if template == "" {
		template = "{body}"
	}
	before, after, _ := strings.Cut(template, "{body}")
	expand := strings.NewReplacer("{timestamp}", ts, "{id}", m.ID, "{url}", cfg.PublicURL, "{method}", "POST")
	mac := hmac.New(newHash, []byte(secret))
	mac.Write([]byte(expand.Replace(before)))
	mac.Write(m.Body)
	mac.Write([]byte(expand.Replace(after)))
	sum := mac.Sum(nil)
	enc := hex.EncodeToString(sum)
	if strings.EqualFold(cfg.HMAC.Encoding, "base64") {
		enc = base64.StdEncoding.EncodeToString(sum)
	}
	h.Set(cfg.HMAC.Header, cfg.HMAC.Prefix+enc)
	if cfg.HMAC.TimestampHeader != "" {
		h.Set(cfg.HMAC.TimestampHeader, ts)
	}
	setIdentityHeaders(h, cfg, m)
}

// setIdentityHeaders sets the id and type headers a configuration reads.
func setIdentityHeaders(h http.Header, cfg Config, m Message) {
	if cfg.EventID.Header != "" {
		h.Set(cfg.EventID.Header, m.ID)
	}
	if cfg.EventType.Header != "" && m.Type != "" {
		h.Set(cfg.EventType.Header, m.Type)
	}
}

// signPairs fills a pairs header: the timestamp pair (or header), then one
// signature pair over the template.
func signPairs(h http.Header, cfg Config, secret string, m Message) {
	c := cfg.Pairs
	newHash, _, err := macAlgorithm(c.Algorithm)
	if err != nil {
		newHash = sha256.New
	}
	ts := formatTime(c.TimestampFormat, m.Time)
	template := orDefault(c.Template, "{timestamp}.{body}")
	before, after, _ := strings.Cut(template, "{body}")
	expand := strings.NewReplacer("{timestamp}", ts, "{url}", cfg.PublicURL, "{method}", "POST")
	mac := hmac.New(newHash, []byte(secret))
	mac.Write([]byte(expand.Replace(before)))
	mac.Write(m.Body)
	mac.Write([]byte(expand.Replace(after)))
	sig := hex.EncodeToString(mac.Sum(nil))
	if strings.EqualFold(c.Encoding, "base64") {
		sig = base64.StdEncoding.EncodeToString(mac.Sum(nil))
	}
	kv, sep := orDefault(c.KVSeparator, "="), orDefault(c.PairSeparator, ",")
	value := orDefault(c.SignatureKey, "v1") + kv + sig
	if c.TimestampHeader != "" {
		h.Set(c.TimestampHeader, ts)
	} else {
		value = orDefault(c.TimestampKey, "t") + kv + ts + sep + value
	}
	h.Set(c.Header, value)
	setIdentityHeaders(h, cfg, m)
}

// SampleBody returns a small JSON event of the provider's shape from which
// its verifier reads id and typ: `intake send`'s default payload. It depends
// only on its arguments, so the same id twice is the same delivery.
func SampleBody(cfg Config, id, typ string) []byte {
	if r, err := resolvePreset(cfg); err == nil {
		cfg = r
	}
	msg := map[string]any{"message": "hello from intake send"}
	if sp := cfg.Split; !sp.IsZero() && plainPath(sp.ID) && plainPath(sp.Field) && plainPath(sp.Type) {
		// A batch of one item, where the splitter reads it.
		item := map[string]any{"data": msg}
		setPath(item, sp.ID, id)
		if sp.Type != "" && typ != "" {
			setPath(item, sp.Type, typ)
		}
		var b []byte
		if sp.Field == "" {
			b, _ = json.Marshal([]any{item})
		} else {
			outer := map[string]any{}
			setPath(outer, sp.Field, []any{item})
			b, _ = json.Marshal(outer)
		}
		return b
	}
	var ev map[string]any
	switch cfg.Provider {
	case "stripe":
		// created is Stripe's default object version and must be there (a
		// version-less object id is refused with 400). It is a constant, not
		// now: the body must depend only on id and type, so that sending the
		// same id twice is the same delivery twice.
		ev = map[string]any{"id": id, "object": "event", "type": typ, "created": 1764374400,
			"data": map[string]any{"object": map[string]any{"id": "obj_" + id, "object": "intake_sample", "metadata": msg}}}
	case "slack":
		ev = map[string]any{"type": "event_callback", "event_id": id, "team_id": "T0INTAKE",
			"event": map[string]any{"type": typ, "text": msg["message"]}}
	default:
		ev = map[string]any{"id": id, "type": typ, "data": msg}
		// Put the id and type where configured fields read them, when
		// those are plain dotted paths.
		if p := cfg.EventID.Field; cfg.EventID.Header == "" && p != "" && p != "id" && !strings.Contains(p, `\`) {
			delete(ev, "id")
			setPath(ev, p, id)
		}
		if p := cfg.EventType.Field; p != "" && p != "type" && !strings.Contains(p, `\`) && typ != "" {
			delete(ev, "type")
			setPath(ev, p, typ)
		}
	}
	b, _ := json.Marshal(ev) // maps of strings always marshal
	return b
}

// StampBody returns body with the send time t written where cfg's scheme
// signs it inside the body (hmac.timestamp_field: Linear's
// webhookTimestamp), in its timestamp_format; for any other scheme, body
// as it is. SampleBody depends on id and type only; a body-time scheme
// needs this before SignMessage (`intake send`, tests). body must be a JSON
// object (its numbers are kept as written; its keys come out sorted).
func StampBody(cfg Config, body []byte, t time.Time) ([]byte, error) {
	if r, err := resolvePreset(cfg); err == nil {
		cfg = r
	}
	field := cfg.HMAC.TimestampField
	if cfg.Provider != "hmac" || field == "" {
		return body, nil
	}
	if !plainPath(field) {
		return nil, fmt.Errorf("hmac.timestamp_field %q: only a plain dotted path can be stamped", field)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var ev map[string]any
	if err := dec.Decode(&ev); err != nil || ev == nil {
		return nil, fmt.Errorf("the body must be a JSON object to carry %s", field)
	}
	var v any = json.Number(formatTime(cfg.HMAC.TimestampFormat, t))
	if cfg.HMAC.TimestampFormat == "rfc3339" {
		v = formatTime("rfc3339", t)
	}
	setPath(ev, field, v)
	return json.Marshal(ev)
}

// plainPath: p is empty or dotted keys without escapes.
func plainPath(p string) bool { return !strings.Contains(p, `\`) }

// setPath sets the dotted path p in ev to v, making objects on the way.
func setPath(ev map[string]any, p string, v any) {
	keys := strings.Split(p, ".")
	node := ev
	for _, k := range keys[:len(keys)-1] {
		next, ok := node[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			node[k] = next
		}
		node = next
	}
	node[keys[len(keys)-1]] = v
}
