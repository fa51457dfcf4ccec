package ingress

import (
	"errors"
	"fmt"

	"github.com/intakehq/intake/pkg/config"
)

// HeaderAllowance is the room a published message needs beside its body:
// Nats-Msg-Id, the Intake-* headers and the provider's retry hints. A body
// limit plus this must fit the NATS server's max_payload, or a body the
// limit admits would be refused by the server on every retry (503 forever)
// instead of answered 413.
const HeaderAllowance = 64 << 10

// ErrPayloadTooSmall is returned by New when an integration's
// max_body_bytes cannot fit the server's max_payload.
var ErrPayloadTooSmall = errors.New("NATS max_payload too small for max_body_bytes")

// checkPayload refuses integrations whose largest body plus HeaderAllowance
// exceeds maxPayload, naming each and both numbers.
func checkPayload(maxPayload int64, list []config.Integration) error {
	var errs []error
	for _, in := range list {
		if in.MaxBodyBytes > maxPayload-HeaderAllowance { // no overflow: both sides are validated sizes
			errs = append(errs, fmt.Errorf("%w: integration %s: max_body_bytes %d plus %d bytes of headers exceeds the NATS server's max_payload %d; "+
				"lower max_body_bytes to at most %d or raise max_payload in the server's configuration",
				ErrPayloadTooSmall, in.Name, in.MaxBodyBytes, HeaderAllowance, maxPayload, max(0, maxPayload-HeaderAllowance)))
		}
	}
	return errors.Join(errs...)
}
