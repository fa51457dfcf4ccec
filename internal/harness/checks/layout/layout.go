package layout

import (
	"fmt"
	"sort"
	"strings"
)

// Module is the module path every rule is written against.
const Module = "github.com/intakehq/intake"

// Layer is where a package sits. Production import arrows point down, from
// a lower Layer value to a higher one: the module root composes the
// services, the services use the libraries under pkg/, and everything may
// use the helpers under internal/. The harness stands apart: it may use
// anything, and nothing of the product uses it.
type Layer int

const (
	Outside Layer = iota // not this module's (the standard library, dependencies)
	Program              // cmd/…, examples/…, deploy/…: programs, imported by nothing
	Root                 // package intake: the composition root
	Service              // ingress, processor, replayer and their sub-packages
	Library              // pkg/…: what services share and users may import
	Helper               // internal/… outside the harness: production helpers
	Harness              // internal/harness/…: proves or runs Intake locally
)

var layerNames = map[Layer]string{Outside: "outside", Program: "program", Root: "root", Service: "service",
	Library: "pkg", Helper: "internal helper", Harness: "harness"}

func (l Layer) String() string { return layerNames[l] }

// LayerOf places an import path by its prefix alone, so a new package lands
// in a layer without anyone editing a list.
func LayerOf(path string) Layer {
	rel, ok := strings.CutPrefix(path, Module)
	switch {
	case !ok || (rel != "" && rel[0] != '/'):
		return Outside
	case rel == "":
		return Root
	}
	rel = rel[1:]
	first, _, _ := strings.Cut(rel, "/")
	switch first {
	case "cmd", "examples", "deploy":
		return Program
	case "pkg":
		return Library
	case "internal":
		if rel == "internal/harness" || strings.HasPrefix(rel, "internal/harness/") {
			return Harness
		}
		return Helper
	}
	return Service
}

// service is the top folder of a service package ("replayer" for
// replayer/console).
func service(path string) string {
	rel := strings.TrimPrefix(path, Module+"/")
	first, _, _ := strings.Cut(rel, "/")
	return first
}

// Check returns one line for each import of graph (package → its direct,
// non-test imports) that breaks the layering:
//   - nothing imports a program;
//   - only the harness imports the harness (cmd/intake's harness files are
//     checked apart, file by file);
//   - the root imports services, libraries and helpers;
//   - a service imports libraries, helpers and its own sub-packages, never
//     another service or the root;
//   - a library imports libraries and helpers;
//   - a helper imports helpers only.
func Check(graph map[string][]string) []string {
	var out []string
	for from, imports := range graph {
		lf := LayerOf(from)
		if lf == Outside {
			continue
		}
		for _, to := range imports {
			if msg := arrow(from, lf, to, LayerOf(to)); msg != "" {
				out = append(out, fmt.Sprintf("%s (%s) imports %s (%s): %s", rel(from), lf, rel(to), LayerOf(to), msg))
			}
		}
	}
	sort.Strings(out)
	return out
}

func arrow(from string, lf Layer, to string, lt Layer) string {
	switch {
	case lt == Outside:
		return ""
	case lt == Program:
		return "a program is imported by nothing"
	case lt == Harness && lf != Harness:
		if lf == Program {
			return "" // cmd/intake: its harness files are checked apart
		}
		return "harness code is imported by the harness only"
	case lf == Harness || lf == Program:
		return ""
	case lf == Service && lt == Service && service(from) != service(to):
		return "a service does not import another service: what both need belongs under pkg/"
	case lt < lf:
		return "the arrow points up: " + lt.String() + " is above " + lf.String()
	}
	return ""
}

func rel(path string) string {
	if path == Module {
		return "intake (root)"
	}
	return strings.TrimPrefix(path, Module+"/")
}
