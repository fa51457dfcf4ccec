// Package examples ships the example configuration inside the binary, so a
// built `intake dev` runs anywhere, not only in a checkout.
package examples

import _ "embed"

// Config is examples/intake.yaml.
//
//go:embed intake.yaml
var Config []byte
