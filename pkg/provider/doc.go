// Package provider verifies webhook deliveries the way each provider's own SDK
// does and extracts the event's identity (id, type, account).
//
// One file per signature scheme, all behind Verifier. A Verifier sees the exact
// raw bytes and the headers; it checks the signature (in constant time) and the
// timestamp BEFORE it parses anything, so an unsigned or badly signed request
// never reserves an event id. Errors wrap the sentinels in errors.go, which
// ingress maps to HTTP answers and metric reasons.
package provider
