package provider

import (
	"errors"
	"fmt"
)

// Sentinel errors; Verify wraps them with detail that never contains a secret,
// a signature or the body.
var (
	// ErrMissingHeader: a header the scheme requires is absent. Answer 401.
	ErrMissingHeader = errors.New("missing header")
	// ErrBadSignature: no configured secret produced a matching signature. Answer 401.
	ErrBadSignature = errors.New("signature mismatch")
	// ErrTimestamp: the signed timestamp is malformed or outside tolerance. Answer 401.
	ErrTimestamp = errors.New("timestamp outside tolerance")
	// ErrAccount: the signature is valid but the delivery names an account
	// the integration does not allow (Shopify's allowed_shops). Answer 401.
	ErrAccount = errors.New("account not allowed")
	// ErrMalformed: the verified delivery lacks an event id or cannot be
	// parsed where parsing is needed. Answer 400.
	ErrMalformed = errors.New("malformed delivery")
	// ErrObjectVersion: the verified delivery's object version cannot be
	// used (later than now plus the tolerance). It wraps ErrMalformed. Answer 400.
	ErrObjectVersion = fmt.Errorf("%w: unusable object version", ErrMalformed)
)

// Reason is a short, stable label for a rejection, used in metrics and JSON answers.
func Reason(err error) string {
	switch {
	case errors.Is(err, ErrUnavailable):
		return "key_unavailable"
	case errors.Is(err, ErrMissingHeader):
		return "missing_header"
	case errors.Is(err, ErrBadSignature):
		return "bad_signature"
	case errors.Is(err, ErrTimestamp):
		return "timestamp"
	case errors.Is(err, ErrAccount):
		return "account_not_allowed"
	case errors.Is(err, ErrObjectVersion):
		return "bad_object_version"
	case errors.Is(err, ErrMalformed):
		return "malformed"
	default:
		return "error"
	}
}
