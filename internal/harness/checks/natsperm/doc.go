// Package natsperm holds the tests of deploy/nats/intake.conf, the shipped
// NATS server configuration: a real nats-server runs that file, and each
// Intake role runs with its own user and must do its whole job with the
// permissions it has — and nothing beyond them. No code here but tests.
package natsperm
