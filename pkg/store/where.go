package store

import (
	"strconv"
	"strings"
	"time"
)

// conds builds a WHERE clause with positional arguments. The list and
// selection queries differ only in which columns their filters compare;
// an empty filter value adds no condition.
type conds struct {
	where []string
	args  []any
}

// arg binds v and returns its placeholder.
func (c *conds) arg(v any) string {
	c.args = append(c.args, v)
	return "$" + strconv.Itoa(len(c.args))
}

// add appends a condition as written.
func (c *conds) add(cond string) { c.where = append(c.where, cond) }

// eq adds "expr = v" unless v is empty.
func (c *conds) eq(expr, v string) {
	if v != "" {
		c.add(expr + " = " + c.arg(v))
	}
}

// between adds "expr >= since" and "expr < until" for the bounds that are set.
func (c *conds) between(expr string, since, until time.Time) {
	if !since.IsZero() {
		c.add(expr + " >= " + c.arg(since))
	}
	if !until.IsZero() {
		c.add(expr + " < " + c.arg(until))
	}
}

// keyPrefix adds a scoped-key prefix condition unless prefix is empty.
func (c *conds) keyPrefix(alias, prefix string) {
	if prefix != "" {
		c.add("starts_with(" + alias + "integration || '/' || " + alias + "account || '/' || " + alias + "event_id, " + c.arg(prefix) + ")")
	}
}

// sql is " WHERE …", or "" without conditions.
func (c *conds) sql() string {
	if len(c.where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(c.where, " AND ")
}
