// Package ingress is Intake's HTTP receiver: POST /webhooks/{integration}.
//
// The flow of one request, in order, and why in that order:
//
//  1. look up the integration (404): the secret and limits come from config only;
//  2. take a token from the integration's rate limit (429 + Retry-After):
//     before any read or MAC, so a flood costs as little as possible;
//  3. read the raw body, bounded (413): the signature is over the exact bytes;
//  4. verify signature and timestamp (401) before parsing anything, so an
//     unsigned request never reserves an event id; a verified handshake
//     (Slack's url_verification) is answered here and never published;
//  5. extract the event id (400 when absent) and build the scoped key; an
//     object id needs a readable object version (400), so the processor's
//     ordering guard always has both;
//  6. publish to INTAKE_IN with Nats-Msg-Id = scoped key + payload hash and
//     wait for the PubAck — the durable boundary — then answer 200
//     (PubAck.Duplicate: 200 "duplicate"); no PubAck: 503 + Retry-After.
//
// Answers are small JSON documents that never echo input, except the
// contract's scoped key and a handshake's signed challenge. Bodies, secrets
// and signatures are never logged.
package ingress
