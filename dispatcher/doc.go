// Package dispatcher pushes processed events to HTTP services: the
// destinations of the config (docs/destinations.md).
//
// Each destination has a durable consumer of its own on INTAKE_OUT,
// "dispatch-{name}", filtered on its match's tenants and integrations, so
// each keeps its own position, backlog and back-pressure, and a slow
// destination never slows another. A dispatcher fetches at most
// max_in_flight messages at a time per destination and, for each:
//
//	type matched? ─no─▶ ack, no delivery
//	rate limit → POST the payload, signed as Standard Webhooks (sign.go):
//	  webhook-id = the INTAKE_OUT message id (the original's for a
//	  redelivered copy), stable across retries, replays and re-drives;
//	  Idempotency-Key = Intake-Key; the Intake-* identity headers
//	→ decide (decide.go, one pure function): 2xx delivered, 408/429/5xx
//	  and no answer retry on the destination's schedule (Retry-After
//	  honoured), 3xx and other 4xx failed at once
//	→ the attempt is written to intake.dispatch_attempts (log.go), then the
//	  message is acked (delivered), nak'd with the wait (retry) or
//	  terminated (failed)
//
// The delivery log is written before the acknowledgement, so every acked
// message has its row; a dispatcher that dies in between delivers the
// message again under the same webhook-id, which a receiver that records
// it dedupes. Failures in a row open the destination's circuit breaker
// (breaker.go): the dispatcher stops fetching for it and probes it with one
// delivery at a time until it answers. Operators pause and resume a
// destination through intake.destination_state, which every dispatcher
// reads every few seconds.
package dispatcher
