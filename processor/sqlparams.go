package processor

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// sqlParam is one named parameter a SQL handler's statement may take: its
// Postgres type (the placeholder is cast to it, so a statement never fails
// on a parameter whose type Postgres cannot infer) and its value.
type sqlParam struct {
	name, pgType string
	value        func(ev *Event, headers []byte) any
}

// sqlParams are the parameters a SQL handler binds from the verified event,
// the one list docs/configuration.md documents.
var sqlParams = []sqlParam{
	{"key", "text", func(ev *Event, _ []byte) any { return ev.Key.String() }},
	{"integration", "text", func(ev *Event, _ []byte) any { return ev.Key.Integration }},
	{"account", "text", func(ev *Event, _ []byte) any { return ev.Key.Account }},
	{"event_id", "text", func(ev *Event, _ []byte) any { return ev.Key.EventID }},
	{"tenant", "text", func(ev *Event, _ []byte) any { return ev.Tenant }},
	{"event_type", "text", func(ev *Event, _ []byte) any { return ev.EventType }},
	// json.RawMessage, not []byte, for the jsonb ones: in the query modes
	// that do not ask the server for parameter types (exec,
	// simple_protocol) pgx encodes a []byte as bytea text ("\\x7b…"),
	// which the jsonb cast refuses; JSON text it sends as it is.
	{"body", "jsonb", func(ev *Event, _ []byte) any { return json.RawMessage(ev.Body) }},
	{"raw", "bytea", func(ev *Event, _ []byte) any { return ev.Body }},
	{"headers", "jsonb", func(_ *Event, h []byte) any { return json.RawMessage(h) }},
	{"object_id", "text", func(ev *Event, _ []byte) any { return nullIfEmpty(ev.ObjectID) }},
	{"object_version", "bigint", func(ev *Event, _ []byte) any {
		if ev.ObjectID == "" {
			return nil
		}
		return ev.ObjectVersion
	}},
	{"execution_id", "text", func(ev *Event, _ []byte) any { return ev.ExecutionID }},
	{"mode", "text", func(ev *Event, _ []byte) any { return string(ev.Mode) }},
	{"received_at", "timestamptz", func(ev *Event, _ []byte) any { return ev.ReceivedAt }},
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ErrUnknownParameter is a :name in a SQL handler's statement that is not
// one of the parameters Intake binds.
var ErrUnknownParameter = errors.New("unknown parameter")

// bindNamed rewrites the named parameters (:key, :body, …) of sql to
// positional ones, each cast to its type ("($1::text)"); one name used twice
// is one parameter. It returns the statement and the parameters in order.
// String literals ('…', E'…' with backslash escapes, $tag$…$tag$), quoted
// identifiers, comments (-- and nested /* */) and :: casts are left alone;
// a positional $1 of the statement's own, or an unterminated literal,
// identifier or comment, is an error.
func bindNamed(sql string) (string, []sqlParam, error) {
	var (
		out   strings.Builder
		used  []sqlParam
		index = map[string]int{}
	)
	identChar := func(c byte) bool {
		return c == '_' || c == '$' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c >= 0x80
	}
	identStart := func(c byte) bool {
		return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c >= 0x80
	}
	n := len(sql)
	for i := 0; i < n; {
		c := sql[i]
		prevIdent := i > 0 && identChar(sql[i-1])
		switch {
		case c == '\'':
			// E'…' (or e'…') takes backslash escapes; any other string
			// doubles its quotes only.
			escapes := i > 0 && (sql[i-1] == 'E' || sql[i-1] == 'e') && (i == 1 || !identChar(sql[i-2]))
			j := i + 1
			for {
				if j >= n {
					return "", nil, fmt.Errorf("unterminated string literal at offset %d", i)
				}
				if escapes && sql[j] == '\\' {
					j += 2
					continue
				}
				if sql[j] == '\'' {
					if j+1 < n && sql[j+1] == '\'' {
						j += 2
						continue
					}
					break
				}
				j++
			}
			out.WriteString(sql[i : j+1])
			i = j + 1
		case c == '"':
			j := i + 1
			for {
				if j >= n {
					return "", nil, fmt.Errorf("unterminated quoted identifier at offset %d", i)
				}
				if sql[j] == '"' {
					if j+1 < n && sql[j+1] == '"' {
						j += 2
						continue
					}
					break
				}
				j++
			}
			out.WriteString(sql[i : j+1])
			i = j + 1
		case c == '-' && i+1 < n && sql[i+1] == '-':
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				j = n - i
			}
			out.WriteString(sql[i : i+j])
			i += j
		case c == '/' && i+1 < n && sql[i+1] == '*':
			depth, j := 1, i+2
			for depth > 0 {
				switch {
				case j+1 >= n:
					return "", nil, fmt.Errorf("unterminated comment at offset %d", i)
				case sql[j] == '/' && sql[j+1] == '*':
					depth, j = depth+1, j+2
				case sql[j] == '*' && sql[j+1] == '/':
					depth, j = depth-1, j+2
				default:
					j++
				}
			}
			out.WriteString(sql[i:j])
			i = j
		case c == '$' && !prevIdent:
			j := i + 1
			if j < n && '0' <= sql[j] && sql[j] <= '9' {
				return "", nil, fmt.Errorf("positional parameter at offset %d: use the named parameters (:key, :body, …)", i)
			}
			for j < n && identChar(sql[j]) && sql[j] != '$' {
				j++
			}
			if j >= n || sql[j] != '$' {
				out.WriteByte(c) // not a dollar quote; Postgres will say what it is
				i++
				continue
			}
			tag := sql[i : j+1]
			end := strings.Index(sql[j+1:], tag)
			if end < 0 {
				return "", nil, fmt.Errorf("unterminated dollar-quoted string %s at offset %d", tag, i)
			}
			stop := j + 1 + end + len(tag)
			out.WriteString(sql[i:stop])
			i = stop
		case c == ':' && i+1 < n && sql[i+1] == ':':
			out.WriteString("::")
			i += 2
		case c == ':' && i+1 < n && identStart(sql[i+1]):
			j := i + 1
			for j < n && identChar(sql[j]) && sql[j] != '$' {
				j++
			}
			name := sql[i+1 : j]
			k, ok := index[name]
			if !ok {
				p, found := lookupParam(name)
				if !found {
					return "", nil, fmt.Errorf("%w :%s (Intake binds %s)", ErrUnknownParameter, name, paramList())
				}
				used = append(used, p)
				k = len(used)
				index[name] = k
			}
			out.WriteString("($" + strconv.Itoa(k) + "::" + used[k-1].pgType + ")")
			i = j
		default:
			out.WriteByte(c)
			i++
		}
	}
	return out.String(), used, nil
}

func lookupParam(name string) (sqlParam, bool) {
	for _, p := range sqlParams {
		if p.name == name {
			return p, true
		}
	}
	return sqlParam{}, false
}

func paramList() string {
	names := make([]string, len(sqlParams))
	for i, p := range sqlParams {
		names[i] = ":" + p.name
	}
	return strings.Join(names, ", ")
}
