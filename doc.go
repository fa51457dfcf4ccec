// Package intake composes Intake's services into the roles the binary runs:
// ingress, processor (with the outbox relay and the receipt folder) and the
// operator API, alone or together in one process. cmd/intake only parses
// flags and calls Run; a program with its own processor.Handler calls Run
// the same way (examples/support-cases).
//
// Run is three steps an embedding program may also take itself: New
// connects and builds everything, Start listens and runs the roles, Stop
// shuts them down in order. A role that cannot run any more (its consumer
// refused, or lost for longer than Options.RestartGrace) fails the App:
// /readyz answers 503 with the reason and Run returns it, so the process
// exits non-zero and its supervisor restarts it.
//
// HTTP: one public listener (Options.HTTPAddr) for webhooks and /api/v1,
// over HTTPS when http.tls is set (the certificate reloaded when its files
// change: tls.go), and health. /metrics and /debug are on it too unless
// http.internal_addr gives them a second listener (listeners.go).
package intake
