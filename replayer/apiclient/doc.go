// Package apiclient is the client of the replayer's operator API (/api/v1)
// and the home of the API's wire types: the replayer encodes its answers as
// these types and decodes requests into them, and the operator CLI, the
// tests and any script's Go program decode the same types, so client and
// server cannot drift apart field by field. The JSON is a contract
// (docs/contract.md, docs/operations.md): a field keeps its name, omitempty
// and time format once it has shipped.
//
//	c := apiclient.New("http://127.0.0.1:8081", token, nil)
//	page, err := c.Events(ctx, apiclient.EventQuery{Status: "failed"})
//	var ae *apiclient.Error
//	if errors.As(err, &ae) && ae.Status == http.StatusForbidden { … }
//
// An answer outside 2xx is an *Error carrying the status and the API's
// error message; anything else (no connection, a body that is not the
// expected JSON) is an ordinary error. The package imports pkg/* only, so a
// program that talks to the API links neither the replayer nor Postgres.
package apiclient
