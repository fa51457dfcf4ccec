// Package natsserver runs a nats-server with JetStream inside the process:
// one node or a node of a cluster, for `intake dev`, `intake nats`, the
// bench and chaos harnesses and tests. It is harness code: no role links
// the nats-server packages; production roles dial a NATS they are given.
package natsserver
