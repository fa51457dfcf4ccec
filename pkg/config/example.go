package config

import _ "embed"

// Example is the example configuration (example.yaml beside this file):
// every section with its defaults written out, one integration of each
// scheme, and secrets taken from ${VAR:-default} whose defaults the
// repository publishes. It is built into the binary, so `intake dev` and
// `intake send` run anywhere, not only in a checkout.
//
//go:embed example.yaml
var Example []byte

// ExamplePath is where Example lives in the repository, as error messages
// name it.
const ExamplePath = "pkg/config/example.yaml"
