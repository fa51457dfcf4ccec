// Package app composes Intake's services into the roles the binary runs:
// ingress, processor (with the outbox relay and the receipt folder) and the
// operator API, alone or together in one process. cmd/intake only parses
// flags and calls in here; a program with its own processor.Handler calls
// Run the same way (examples/support-cases).
package app
