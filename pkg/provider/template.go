package provider

// Templates (hmac.template, pairs.template, pubkey.template) concatenate
// literals and placeholder values into the signed bytes. One signature must
// verify one reading of those bytes only: if the same bytes split into
// another id, timestamp and body, a captured delivery verifies under a new
// dedup id. Literals between placeholders give the split, when a
// placeholder's value cannot contain the literal's first or last byte
// (idBounds); two placeholders side by side give none, unless the format of
// one of them does.
//
// The rule (checkAdjacency): read the signed bytes from the left up to
// {body} and from the right back to it. Every placeholder met on the way
// must end where its own format says, so a placeholder before {body} that
// is followed directly by another placeholder must have a fixed format, and
// one after {body} preceded directly by another placeholder must too. The
// fixed formats:
//
//   - a UUID (hmac.id_format uuid): 36 bytes, so its extent is its length;
//   - an RFC 3339 time (strictRFC3339): it starts with four digits and a
//     '-' and ends with its zone, so no valid time is a prefix or a suffix
//     of another (a longer string has its zone or its year in the wrong
//     place);
//   - a unix time in seconds or milliseconds, canonical (no leading zero)
//     and within tolerance of now: a canonical string one digit longer or
//     shorter than another is at least about ten times it or a tenth of
//     it, so at most one of them lies in the window while now is more than
//     three tolerances after the epoch; tolerance is capped at 24 hours for
//     such templates (checkAdjacentTolerance) so that always holds. The
//     same holds, and is required, after a literal that ends in a digit.
//
// {body} and a free-form {id} have no format. "{id}{body}" stays refused:
// with nothing between them, one MAC verifies every split of the bytes.
// template_test.go checks the argument by enumerating every split.

import (
	"fmt"
	"strings"
	"time"
)

// fixedFormats says which placeholders a verifier parses strictly enough
// for their extent to follow from their value.
type fixedFormats struct{ timestamp, id bool }

func (f fixedFormats) has(name string) bool {
	switch name {
	case "timestamp":
		return f.timestamp
	case "id":
		return f.id
	}
	return false
}

// checkAdjacency refuses placeholders side by side whose split no format
// fixes (see the file comment). It returns the placeholders that have
// another placeholder beside them: a unix timestamp among them must then be
// canonical.
func checkAdjacency(parts []templatePart, fixed fixedFormats) (map[string]bool, error) {
	body := -1
	for i, p := range parts {
		if p.placeholder == "body" {
			body = i
		}
	}
	adjacent := map[string]bool{}
	for i := 1; i < len(parts); i++ {
		a, b := parts[i-1].placeholder, parts[i].placeholder
		if a == "" || b == "" {
			continue
		}
		// Before {body} the left one must end by its format; from {body}
		// on, the right one must start by its format.
		needs := a
		if i-1 >= body {
			needs = b
		}
		if !fixed.has(needs) {
			return nil, fmt.Errorf("{%s} follows {%s} with nothing between them, and {%s} has no fixed format: one signature would verify several splits "+
				"(put a separator between them%s)", b, a, needs, formatHint(needs))
		}
		adjacent[a], adjacent[b] = true, true
	}
	return adjacent, nil
}

func formatHint(name string) string {
	if name == "id" {
		return ", or set hmac.id_format: uuid if the id is a UUID"
	}
	return ""
}

// digitBefore reports whether a literal ending in a digit comes right
// before the placeholder name: a leading zero could then move between the
// literal's neighbour and the value ("{body}0{timestamp}": body "0" with
// time "17…", or body "" with time "017…"), so the value must be canonical
// as if a placeholder were beside it.
func digitBefore(parts []templatePart, name string) bool {
	for i := 1; i < len(parts); i++ {
		if l := parts[i-1].literal; parts[i].placeholder == name && l != "" && l[len(l)-1] >= '0' && l[len(l)-1] <= '9' {
			return true
		}
	}
	return false
}

// maxAdjacentTolerance bounds tolerance when a unix timestamp has a
// placeholder beside it (see the file comment).
const maxAdjacentTolerance = 24 * time.Hour

func checkAdjacentTolerance(f timestampFormat, tolerance time.Duration) error {
	if f != formatRFC3339 && tolerance > maxAdjacentTolerance {
		return fmt.Errorf("at most %s when the unix timestamp has a placeholder beside it in the template", maxAdjacentTolerance)
	}
	return nil
}

// isUUID accepts the 8-4-4-4-12 hex form, either case.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// containsAnyByte reports whether s holds any byte of set. Bytes, not runes:
// a literal's boundary byte may be half of a UTF-8 sequence ("{id}é{body}"
// bounds the id by 0xC3), which strings.ContainsAny would never match.
func containsAnyByte(s, set string) bool {
	for i := 0; i < len(set); i++ {
		if strings.IndexByte(s, set[i]) >= 0 {
			return true
		}
	}
	return false
}
