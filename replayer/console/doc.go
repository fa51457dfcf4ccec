// Package console is the operator console: the browser side of the
// replayer, served under /ui/ with its assets embedded in the binary (no
// CDN, no JavaScript build, every page readable without JavaScript).
//
// Each page's data writes the page in Go (its write method, beside the
// handler that reads the data) through writer, which escapes every value;
// there is no template engine, so that the one intake binary keeps the
// linker's dead code elimination of methods (html.go says why, and the
// rules that keep a page safe).
//
// It is a client of the replayer, not a second API: pages read through
// pkg/store's queries as /api/v1 does (the overview's aggregates are the
// store's too: pkg/store/overview.go), and mutations (a replay's dry run, its
// start, a cancel) call the same Replayer methods the API calls, with the
// signed-in token's name as the audit's requested_by.
//
// Sign-in takes an API token (api.tokens) through replayer.RequireToken,
// so the failed-authentication throttle, its log line and its metric guard
// the form as they guard the bearer header (the form's throttle is its own
// instance: an address has its failures' budget on each). A session is
// kept in Postgres (store.ConsoleSession): the cookie is a random id, the
// row, under the id's SHA-256, names the token, the expiry and the
// session's CSRF token, so every replayer on the database reads it, a
// sign-out ends it everywhere and removing a token from the config ends
// its sessions (docs/console.md says why not a signed cookie). Every POST
// is an urlencoded form read under a size limit (form.go) and carries the
// session's CSRF token; a viewer's session gets no mutating control and a
// 403 if it posts one anyway.
package console
