package provider

// Presets name a sender on one of the families: provider paddle is pairs
// with Paddle's header, keys and template, and the event id where Paddle
// puts it. A preset is configuration only, no code of its own; each has a
// test against its provider's published vector or SDK (presets_test.go)
// and a row in docs/providers.md. What the operator sets wins over what the
// preset fills in: identity fields (event_id, event_type, object_id,
// object_version) override the preset's; the family's option block (hmac:,
// pairs:, token:) is the preset's alone, so configuring one is an error
// rather than a silent merge.

import (
	"fmt"
	"sort"
)

// preset is a family and its filled-in configuration.
type preset struct {
	family            string
	hmac              HMACConfig
	pairs             PairsConfig
	token             TokenConfig
	pubkey            PubKeyConfig
	split             SplitConfig
	handshake         string
	eventID, evType   Field
	objectID, version Field
}

var presets = map[string]preset{
	// Paddle Billing: Paddle-Signature "ts=…;h1=…" over "{ts}:{body}"
	// (paddle-go-sdk WebhookVerifier); event_id and event_type in the body.
	"paddle": {family: "pairs",
		pairs:   PairsConfig{Header: "Paddle-Signature", PairSeparator: ";", TimestampKey: "ts", SignatureKey: "h1", Template: "{timestamp}:{body}"},
		eventID: Field{Field: "event_id"}, evType: Field{Field: "event_type"}},
	// WorkOS: WorkOS-Signature "t=<ms>, v1=…" over "{t}.{body}", past-only
	// window (workos-go pkg/webhooks); body id and event.
	"workos": {family: "pairs",
		pairs:   PairsConfig{Header: "WorkOS-Signature", PairSeparator: ", ", TimestampFormat: "unix_ms", Window: "past"},
		eventID: Field{Field: "id"}, evType: Field{Field: "event"}},
	// Vercel: x-vercel-signature, hex HMAC-SHA1 of the body; body id, type.
	"vercel": {family: "hmac",
		hmac:    HMACConfig{Header: "X-Vercel-Signature", Algorithm: "sha1"},
		eventID: Field{Field: "id"}, evType: Field{Field: "type"}},
	// Intercom: X-Hub-Signature "sha1=" + hex HMAC-SHA1 of the body keyed
	// with the app's client secret; body id (notif_…), topic.
	"intercom": {family: "hmac",
		hmac:    HMACConfig{Header: "X-Hub-Signature", Prefix: "sha1=", Algorithm: "sha1"},
		eventID: Field{Field: "id"}, evType: Field{Field: "topic"}},
	// Typeform: Typeform-Signature "sha256=" + base64 HMAC-SHA256 of the
	// body; body event_id, event_type.
	"typeform": {family: "hmac",
		hmac:    HMACConfig{Header: "Typeform-Signature", Prefix: "sha256=", Encoding: "base64"},
		eventID: Field{Field: "event_id"}, evType: Field{Field: "event_type"}},
	// Coinbase Commerce: X-CC-Webhook-Signature, hex HMAC-SHA256 of the
	// body; the event's id and type in body event.
	"coinbase": {family: "hmac",
		hmac:    HMACConfig{Header: "X-CC-Webhook-Signature"},
		eventID: Field{Field: "event.id"}, evType: Field{Field: "event.type"}},
	// Sentry integrations: Sentry-Hook-Signature, hex HMAC-SHA256 of the
	// body; the id is the unsigned Request-ID header (replay guard on).
	"sentry": {family: "hmac",
		hmac:    HMACConfig{Header: "Sentry-Hook-Signature", AllowUnsignedID: true},
		eventID: Field{Header: "Request-ID"}, evType: Field{Header: "Sentry-Hook-Resource"}},
	// Linear: Linear-Signature, hex HMAC-SHA256 of the body; the body's
	// webhookTimestamp (ms, signed with it) within ± tolerance, as
	// @linear/sdk checks it (60 s there); the id is the unsigned
	// Linear-Delivery header (replay guard on), type Linear-Event.
	"linear": {family: "hmac",
		hmac: HMACConfig{Header: "Linear-Signature", AllowUnsignedID: true,
			TimestampField: "webhookTimestamp", TimestampFormat: "unix_ms"},
		eventID: Field{Header: "Linear-Delivery"}, evType: Field{Header: "Linear-Event"}},
	// Bitbucket Cloud: X-Hub-Signature "sha256=" + hex HMAC-SHA256 of the
	// body; the id is the unsigned X-Request-UUID (replay guard on).
	"bitbucket": {family: "hmac",
		hmac:    HMACConfig{Header: "X-Hub-Signature", Prefix: "sha256=", AllowUnsignedID: true},
		eventID: Field{Header: "X-Request-UUID"}, evType: Field{Header: "X-Event-Key"}},
	// Twitch EventSub: hex HMAC-SHA256 of "{message id}{timestamp}{body}"
	// (the id a UUID, the time RFC 3339), both headers signed; the
	// webhook_callback_verification challenge answered as text/plain.
	"twitch": {family: "hmac",
		hmac: HMACConfig{Header: "Twitch-Eventsub-Message-Signature", Prefix: "sha256=", Template: "{id}{timestamp}{body}", IDFormat: "uuid",
			TimestampHeader: "Twitch-Eventsub-Message-Timestamp", TimestampFormat: "rfc3339"},
		eventID: Field{Header: "Twitch-Eventsub-Message-Id"}, evType: Field{Field: "subscription.type"}, handshake: HandshakeTwitch},
	// Discord interactions: Ed25519 (hex) over "{X-Signature-Timestamp}{body}"
	// with the application's public key; body id and type; PING answered.
	"discord": {family: "pubkey",
		pubkey: PubKeyConfig{Algorithm: "ed25519", Header: "X-Signature-Ed25519", Encoding: "hex",
			TimestampHeader: "X-Signature-Timestamp", Template: "{timestamp}{body}"},
		eventID: Field{Field: "id"}, evType: Field{Field: "type"}, handshake: HandshakeDiscord},
	// Okta event hooks: the configured Authorization value; one event per
	// data.events item (uuid, eventType); the one-time GET verification
	// answered with the token checked.
	"okta": {family: "token",
		split:     SplitConfig{Field: "data.events", ID: "uuid", Type: "eventType"},
		handshake: HandshakeOkta},
	// SendGrid's Event Webhook: ECDSA P-256 (base64 DER) over
	// "{timestamp}{body}" with the verification key; the body an array of
	// events, each its sg_event_id and event (sendgrid-go eventwebhook).
	"sendgrid": {family: "pubkey",
		pubkey: PubKeyConfig{Algorithm: "ecdsa-p256", Header: "X-Twilio-Email-Event-Webhook-Signature",
			TimestampHeader: "X-Twilio-Email-Event-Webhook-Timestamp", Template: "{timestamp}{body}"},
		split: SplitConfig{ID: "sg_event_id", Type: "event"}},
	// Auth0 log streams (custom webhook): the configured Authorization
	// value; the body an array of logs, each its log_id and data.type.
	"auth0": {family: "token",
		split: SplitConfig{ID: "log_id", Type: "data.type"}},
	// QuickBooks Online (CloudEvents format): intuit-signature, base64
	// HMAC-SHA256 of the body with the verifier token; the body an array
	// of events, each its id and type.
	"quickbooks": {family: "hmac",
		hmac:  HMACConfig{Header: "Intuit-Signature", Encoding: "base64"},
		split: SplitConfig{ID: "id", Type: "type"}},
	// Jira / Atlassian admin webhooks with a secret: X-Hub-Signature
	// "sha256=" + hex of the body; the id the unsigned
	// X-Atlassian-Webhook-Identifier (replay guard on), type webhookEvent.
	"jira": {family: "hmac",
		hmac:    HMACConfig{Header: "X-Hub-Signature", Prefix: "sha256=", AllowUnsignedID: true},
		eventID: Field{Header: "X-Atlassian-Webhook-Identifier"}, evType: Field{Field: "webhookEvent"}},
	// Zendesk: X-Zendesk-Webhook-Signature, base64 HMAC-SHA256 of
	// "{timestamp}{body}", the timestamp RFC 3339 in its own header; body
	// id and type (event-subscribed webhooks).
	"zendesk": {family: "hmac",
		hmac: HMACConfig{Header: "X-Zendesk-Webhook-Signature", Encoding: "base64", Template: "{timestamp}{body}",
			TimestampHeader: "X-Zendesk-Webhook-Signature-Timestamp", TimestampFormat: "rfc3339"},
		eventID: Field{Field: "id"}, evType: Field{Field: "type"}},
	// Segment (webhooks destination): X-Signature, hex HMAC-SHA1 of the
	// body; body messageId and type.
	"segment": {family: "hmac",
		hmac:    HMACConfig{Header: "X-Signature", Algorithm: "sha1"},
		eventID: Field{Field: "messageId"}, evType: Field{Field: "type"}},
	// Box: BOX-SIGNATURE-PRIMARY, base64 HMAC-SHA256 of
	// "{body}{BOX-DELIVERY-TIMESTAMP}" (RFC 3339) with the primary key; the
	// id the unsigned BOX-DELIVERY-ID (replay guard on), type trigger.
	"box": {family: "hmac",
		hmac: HMACConfig{Header: "Box-Signature-Primary", Encoding: "base64", Template: "{body}{timestamp}",
			TimestampHeader: "Box-Delivery-Timestamp", TimestampFormat: "rfc3339", AllowUnsignedID: true},
		eventID: Field{Header: "Box-Delivery-Id"}, evType: Field{Field: "trigger"}},
	// PagerDuty v3: X-PagerDuty-Signature "v1=" + hex HMAC-SHA256 of the
	// body; body event.id and event.event_type. One signature only (see
	// docs/providers.md).
	"pagerduty": {family: "hmac",
		hmac:    HMACConfig{Header: "X-PagerDuty-Signature", Prefix: "v1="},
		eventID: Field{Field: "event.id"}, evType: Field{Field: "event.event_type"}},
	// Square: x-square-hmacsha256-signature, base64 HMAC-SHA256 of
	// "{notification URL}{body}" (public_url required); body event_id, type.
	"square": {family: "hmac",
		hmac:    HMACConfig{Header: "X-Square-Hmacsha256-Signature", Encoding: "base64", Template: "{url}{body}"},
		eventID: Field{Field: "event_id"}, evType: Field{Field: "type"}},
	// HubSpot (v3): X-HubSpot-Signature-v3, base64 HMAC-SHA256 of
	// "{method}{URI}{body}{X-HubSpot-Request-Timestamp}" (ms; public_url
	// required); the body an array of up to 100 events, each its eventId and
	// subscriptionType.
	"hubspot": {family: "hmac",
		hmac: HMACConfig{Header: "X-Hubspot-Signature-V3", Encoding: "base64", Template: "{method}{url}{body}{timestamp}",
			TimestampHeader: "X-Hubspot-Request-Timestamp", TimestampFormat: "unix_ms"},
		split: SplitConfig{ID: "eventId", Type: "subscriptionType"}},
	// Resend and Clerk send through Svix; OpenAI and GitLab's signing
	// token are Standard Webhooks (GitLab's type in X-Gitlab-Event).
	"resend": {family: "svix"},
	"clerk":  {family: "svix"},
	"openai": {family: "standard"},
	"gitlab": {family: "standard", evType: Field{Header: "X-Gitlab-Event"}},
	// GitLab with a secret token: X-Gitlab-Token holds it as it is; the id
	// is Idempotency-Key (stable across retries), type X-Gitlab-Event;
	// nothing is signed (replay guard on).
	"gitlab-token": {family: "token",
		token:   TokenConfig{Header: "X-Gitlab-Token"},
		eventID: Field{Header: "Idempotency-Key"}, evType: Field{Header: "X-Gitlab-Event"}},
}

// Presets lists the preset names, sorted.
func Presets() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Resolve returns cfg with a preset expanded into its family (Provider set
// to the family, its options and identity defaults filled in); a family's
// own config is returned as it is. config uses it to decide per-family
// defaults (the replay guard) for a preset.
func Resolve(cfg Config) (Config, error) { return resolvePreset(cfg) }

func resolvePreset(cfg Config) (Config, error) {
	p, ok := presets[cfg.Provider]
	if !ok {
		if cfg.Provider == "adyen" && cfg.Split.IsZero() {
			// The family's own default: its items are the events.
			cfg.Split = adyenSplit
		}
		return cfg, nil
	}
	name := cfg.Provider
	for _, o := range []struct {
		key string
		set bool
	}{
		{"hmac", cfg.HMAC != (HMACConfig{})},
		{"pairs", cfg.Pairs != (PairsConfig{})},
		{"token", cfg.Token != (TokenConfig{})},
		{"pubkey", cfg.PubKey != (PubKeyConfig{})},
	} {
		if o.set {
			return cfg, fmt.Errorf("%s: not with provider %s (the preset sets the scheme; use provider %s to configure it yourself)", o.key, name, p.family)
		}
	}
	cfg.Provider = p.family
	cfg.HMAC, cfg.Pairs, cfg.Token, cfg.PubKey = p.hmac, p.pairs, p.token, p.pubkey
	if cfg.Split.IsZero() {
		cfg.Split = p.split
	}
	if cfg.Handshake == "" {
		cfg.Handshake = p.handshake
	}
	if !cfg.Split.IsZero() {
		// Each item names its id and type; the preset's delivery-level
		// fields would read the batch as one event.
		cfg.HMAC.AllowUnsignedID, cfg.Pairs.AllowUnsignedID, cfg.PubKey.AllowUnsignedID = false, false, false
		return cfg, nil
	}
	for _, f := range []struct {
		dst *Field
		def Field
	}{
		{&cfg.EventID, p.eventID}, {&cfg.EventType, p.evType}, {&cfg.ObjectID, p.objectID}, {&cfg.ObjectVersion, p.version},
	} {
		if f.dst.IsZero() {
			*f.dst = f.def
		}
	}
	// An operator's event_id.field over a preset's unsigned header id is
	// signed; the opt-in stays only while a header id is in play.
	if cfg.EventID.Header == "" {
		cfg.HMAC.AllowUnsignedID, cfg.Pairs.AllowUnsignedID = false, false
	}
	return cfg, nil
}
