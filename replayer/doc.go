// Package replayer is the operator side of Intake: the /api/v1 API behind
// bearer tokens. Today it reads events; replay, redelivery and reconcile
// grow here (see the replayer issue).
package replayer
