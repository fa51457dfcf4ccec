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
// a signed cookie, not server state: any replayer with the same tokens
// accepts it, and removing a token from the config ends its sessions. Every
// POST carries a CSRF token bound to the session; a viewer's session gets
// no mutating control and a 403 if it posts one anyway.
package console
