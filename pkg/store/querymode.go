package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// RegisterTypes tells conn's type map which PostgreSQL type each Go type
// Intake passes as a query argument stands for, where pgx's defaults have
// none: [16]byte is a uuid, [][16]byte a uuid[] (ids travel as bytes).
// In the query modes that ask the server for the parameter types
// (cache_statement, pgx's default, cache_describe, describe_exec) pgx
// needs no help; in exec and simple_protocol it asks nothing and encodes by
// Go type alone, and without these it fails with "cannot find encode plan"
// (pgx documents RegisterDefaultPgType for exactly this). Open's pool calls
// it on every new connection; a pool of the embedder's own whose
// transactions reach pkg/store needs it as its AfterConnect. (jsonb values
// go as JSON text, which needs no registration.)
func RegisterTypes(_ context.Context, conn *pgx.Conn) error {
	m := conn.TypeMap()
	m.RegisterDefaultPgType([16]byte{}, "uuid")
	m.RegisterDefaultPgType([][16]byte{}, "_uuid")
	return nil
}
