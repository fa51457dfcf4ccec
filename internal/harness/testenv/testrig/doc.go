// Package testrig is the one test rig of Intake's integration tests: an
// embedded nats-server with the streams ensured and a client on it, a fresh
// migrated Postgres database per test, optionally the app (app.Run with
// chosen roles) serving HTTP, and the operator API's client (apiclient, the
// CLI's) on it. Everything it starts is stopped in t.Cleanup.
//
//	r := testrig.New(t, testrig.Options{Config: yaml, App: &intake.Options{Roles: intake.Roles{Processor: true, Replayer: true}}})
//	r.Publish(t, msg)
//	page, err := r.App.Client(token).Events(ctx, apiclient.EventQuery{Status: "processed"})
//
// Databases are copies of a template migrated once per test binary
// (testenv.PostgresFrom): CREATE DATABASE … TEMPLATE takes milliseconds where
// running the migrations again took far longer.
//
// It lives apart from package testenv because it imports pkg/store,
// package intake (the module root) and through it the roles, whose own in-package tests import
// testenv: testenv itself must stay below them. So tests in package store,
// processor, ingress or replayer (not _test) cannot import testrig.
package testrig
