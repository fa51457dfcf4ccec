// Package testenv gives tests the real infrastructure Intake runs on, with
// fault injection: PostgreSQL databases and private clusters (pgcluster) and
// embedded nats-servers with JetStream (natsserver.Run). Import it from
// _test.go files only.
//
// A package that uses it runs its tests through Main:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// Main stops the per-binary Postgres cluster after the tests and then fails
// the run if any goroutine is left behind. Everything else a helper starts is
// stopped in t.Cleanup of the test that asked for it.
//
// What a test binary does once, its tests share: a template database
// (PostgresFrom copies it per test) and built binaries (GoBuild). The rig
// most integration tests want — NATS with the streams, a migrated database,
// the app, an operator API client — is package testrig below this one.
//
// Postgres comes from DATABASE_URL when set, otherwise from the PostgreSQL
// server binaries on PATH. With neither, tests that need Postgres fail with
// pgcluster.ErrNoBinaries, which says how to provide one: integration tests
// are not allowed to pass by not running.
package testenv
