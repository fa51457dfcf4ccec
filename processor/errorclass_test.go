package processor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/intakehq/intake/processor"
)

func TestErrorClass(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{processor.Permanent(errors.New("bad tax id")), "permanent"},
		{processor.Quarantine(errors.New("looks like fraud")), "quarantine"},
		{fmt.Errorf("call billing: %w", context.DeadlineExceeded), "timeout"},
		{&pgconn.PgError{Code: "57014"}, "timeout"},
		{fmt.Errorf("apply: %w", &pgconn.PgError{Code: "23505"}), "sql 23505"},
		{errors.New("billing API answered 503"), "error"},
	} {
		if got := processor.ErrorClass(c.err); got != c.want {
			t.Errorf("ErrorClass(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
