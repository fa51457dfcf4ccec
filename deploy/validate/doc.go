// Package validate checks deploy/ offline, with no cluster and no helm CLI:
// the Helm chart deploy/helm/intake is linted and rendered with Helm's own Go
// packages, every rendered object is decoded strictly into its Kubernetes
// API type (an unknown or misspelt field is an error), the rendered config is
// loaded by Intake's pkg/config, and the engines' files in deploy/engines are
// checked against what Intake expects of them.
//
// It is its own Go module so that Helm and the Kubernetes API types never
// enter the main module's dependencies. Run it with deploy/validate/run.
package validate
