// Package ingress is Intake's HTTP receiver: POST /webhooks/{integration}.
//
// The flow of one request, in order, and why in that order:
//
//  1. look up the integration (404): the secret and limits come from config only;
//     an unsigned endpoint check (Microsoft Graph's ?validationToken) is
//     answered here, as a GET handshake is (handshake.go);
//  2. take a token from the client address's limit (429 + Retry-After)
//     and reserve the body's bytes in the process-wide budget (503 +
//     Retry-After), before any read or MAC, so a flood or a crowd of slow
//     uploads costs as little as possible; a declared size over the limit
//     is 413 here;
//  3. read the raw body, bounded (413), and scan its JSON nesting depth
//     (400) before anything parses it: the signature is over the exact
//     bytes, and a recursive parser pays per level;
//  4. verify signature and timestamp (401) before parsing anything, so an
//     unsigned request never reserves an event id; extract the event id
//     (400 when absent) and build the scoped key;
//  5. a delivery (key and body) this instance published in the last
//     seconds is answered from memory (recent.go): duplicate, then 429 —
//     a captured request replayed in a loop verifies every time, and must
//     spend neither the integration's limit nor a publish; its
//     client-address token stays spent. Where the id is unsigned, the
//     same body under another id spends a budget of its own instead of
//     the integration's. Any other verified delivery gets
//     that token back and takes one from the integration's rate limit
//     (429), which unsigned requests never reach; a verified handshake
//     (Slack's url_verification) is answered here and never published. An
//     object id needs a readable object version (400), so the processor's
//     ordering guard always has both;
//  6. publish to INTAKE_IN with Nats-Msg-Id = scoped key + payload hash and
//     wait for the PubAck — the durable boundary — then answer 200
//     (PubAck.Duplicate: 200 "duplicate"); no PubAck: 503 + Retry-After.
//
// Service.receive (webhook.go) reads as this list, one small function per
// step; the tracing spans (trace.go) wrap receive, the signature check and
// the publish, as middleware wraps a handler, and cost nothing when off.
//
// The public listener caps its connections (internal/httpserver.LimitListener,
// wired by package intake). With no trusted proxy, the client address's
// limit watches its first requests and warns once when all come from one
// private address (sharedpeer.go): a proxy every client shares a bucket
// behind. A body limit must fit, with its headers
// (HeaderAllowance), the NATS server's max_payload, or such a body would be
// answered 503 on every retry: New lowers a limit left at its default to
// fit (a stock nats-server's 1 MB is below 1 MiB plus headers) and refuses
// one the configuration sets.
//
// Answers are small JSON documents that never echo input, except the
// contract's scoped key and a handshake's challenge (signed, or bounded to
// a token charset); a sender that expects its own acknowledgement of a
// stored delivery gets that instead (Adyen's "[accepted]", writeStored).
// Bodies, secrets and signatures are never logged.
package ingress
