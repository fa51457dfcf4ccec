package envelope

import "strings"

// SubjectsCollide reports whether some subject could match both NATS subject
// filters a and b: tokens are split on '.', '*' matches one token and '>'
// (last) one or more. It is how a consumer's filters are checked against
// another's without linking the nats-server packages into every role.
func SubjectsCollide(a, b string) bool {
	for {
		ta, resta, moreA := strings.Cut(a, ".")
		tb, restb, moreB := strings.Cut(b, ".")
		if ta == ">" || tb == ">" {
			return true // each side has at least this token left
		}
		if ta != tb && ta != "*" && tb != "*" {
			return false
		}
		if !moreA || !moreB {
			return moreA == moreB
		}
		a, b = resta, restb
	}
}
