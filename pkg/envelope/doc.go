// Package envelope is Intake's shared vocabulary: the scoped dedup key, the
// JetStream message ids (every Nats-Msg-Id scheme, msgid.go), header names,
// subject names and the answers ingress gives a delivery (Answer). Ingress
// writes these, the processor and the replayer read them; keeping them in one
// place is what lets the three agree on what "the same event" means.
package envelope
