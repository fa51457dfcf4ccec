// Package layout holds the repository's structural checks (its test): the
// public packages and the production roles never reach harness code.
package layout
