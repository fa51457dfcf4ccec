// Package roledefaults holds a structural check (its test): every role built
// from a zero-value configuration — processor, outbox relay, receipt folder,
// ingress, replayer, subscriber, `intake dev` — gets the documented defaults,
// applied once by its constructor, and refuses bad values with an error.
package roledefaults
