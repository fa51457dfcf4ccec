package envelope

import (
	"fmt"
	"unicode/utf8"
)

// Bounds of an envelope's identity values. Whoever may publish to
// intake.in.> writes these headers, and they end up in Postgres keys,
// indexes and metric labels: a value outside them is a malformed envelope,
// terminated before any query (an invalid UTF-8 byte or NUL makes Postgres
// refuse the whole batch's statement; an oversized key overflows an index
// row).
const (
	MaxIntegrationBytes = 64 // the config's name rule: [A-Za-z0-9_-]{1,64}
	MaxAccountBytes     = MaxIDBytes
	MaxEventIDBytes     = MaxIDBytes
	MaxTenantBytes      = 64 // the config's tenant rule
	MaxEventTypeBytes   = MaxIDBytes
	MaxMsgIDBytes       = 1024
)

// CheckText reports why s cannot be an identity value of at most max bytes:
// empty when required, too long, not UTF-8, or holding a control (C0, C1)
// or bidirectional-formatting character, which would be shown raw to an
// operator and could disguise one id as another.
func CheckText(name, s string, max int, required bool) error {
	switch {
	case s == "" && required:
		return fmt.Errorf("%s is empty", name)
	case len(s) > max:
		return fmt.Errorf("%s is %d bytes, at most %d", name, len(s), max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s is not valid UTF-8", name)
	}
	for _, r := range s {
		if Unprintable(r) {
			return fmt.Errorf("%s holds the unprintable character %U", name, r)
		}
	}
	return nil
}

// Validate checks the key's parts against the identity bounds.
func (k Key) Validate() error {
	if err := CheckText("integration", k.Integration, MaxIntegrationBytes, true); err != nil {
		return err
	}
	for i := 0; i < len(k.Integration); i++ {
		if c := k.Integration[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("integration %q is not of [A-Za-z0-9_-]", k.Integration)
		}
	}
	if err := CheckText("account", k.Account, MaxAccountBytes, false); err != nil {
		return err
	}
	return CheckText("event id", k.EventID, MaxEventIDBytes, true)
}
