// Package ingress is Intake's HTTP receiver: POST /webhooks/{integration}.
//
// The flow of one request, in order, and why in that order:
//
//  1. look up the integration (404): the secret and limits come from config only;
//  2. read the raw body, bounded (413): the signature is over the exact bytes;
//  3. verify signature and timestamp (401) before parsing anything, so an
//     unsigned request never reserves an event id;
//  4. extract the event id (400 when absent) and build the scoped key;
//  5. publish to INTAKE_IN with Nats-Msg-Id = scoped key + payload hash and
//     wait for the PubAck — the durable boundary — then answer 200
//     (PubAck.Duplicate: 200 "duplicate"); no PubAck: 503 + Retry-After.
//
// Bodies, secrets and signatures are never logged.
package ingress
