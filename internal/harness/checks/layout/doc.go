// Package layout holds the repository's structural rules (Check, LayerOf)
// and their test over the real import graph: arrows point down (intake
// root → services → pkg/* → internal/*), nothing imports a program, and
// nothing of the product imports the harness (internal/harness/…). Layers
// come from path prefixes, not from a list, so a new package is checked
// the moment it exists.
package layout
