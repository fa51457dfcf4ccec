package ingress

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/intakehq/intake/pkg/config"
)

// HeaderAllowance is the room a published message needs beside its body:
// Nats-Msg-Id, the Intake-* headers and the provider's retry hints. A body
// limit plus this must fit the NATS server's max_payload, or a body the
// limit admits would be refused by the server on every retry (503 forever)
// instead of answered 413.
const HeaderAllowance = 64 << 10

// ErrPayloadTooSmall is returned by New when a max_body_bytes the
// configuration sets cannot fit the server's max_payload.
var ErrPayloadTooSmall = errors.New("NATS max_payload too small for max_body_bytes")

// fitDefaultLimits lowers each body limit nobody set
// (config.Integration.MaxBodyBytesDefaulted) that would not fit maxPayload
// to maxPayload - HeaderAllowance, logging it: the default (1 MiB) plus the
// allowance exceeds a stock nats-server's max_payload (1 MB), and the
// default configuration must start against one. A limit the file sets is
// never changed: checkPayload refuses it if it does not fit.
func fitDefaultLimits(list []config.Integration, maxPayload int64, log *slog.Logger) {
	fit := maxPayload - HeaderAllowance
	for i := range list {
		in := &list[i]
		if !in.MaxBodyBytesDefaulted() || in.MaxBodyBytes <= fit || fit < 1 {
			continue
		}
		log.Info("max_body_bytes not set and its default does not fit the NATS server's max_payload: body limit lowered",
			"integration", in.Name, "max_body_bytes", fit, "default", in.MaxBodyBytes,
			"max_payload", maxPayload, "header_allowance", HeaderAllowance)
		in.MaxBodyBytes = fit
	}
}

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
