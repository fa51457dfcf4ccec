package natsperm

import (
	"os"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"

	"github.com/intakehq/intake/pkg/stream"
)

// TestShippedNATSIsAtLeastTheFloor: the compose stack runs a nats-server
// release Intake starts against (stream.MinServerVersion) — by default the
// release these tests embed (go.mod's nats-server, which the smoke test's
// stand-in image is built from) — and the shipped server configuration
// syncs before acknowledging (startServer checks that for every test here).
func TestShippedNATSIsAtLeastTheFloor(t *testing.T) {
	raw, err := os.ReadFile("../../../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]struct {
			Image string `yaml:"image"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	image := f.Services["nats"].Image
	// ${INTAKE_NATS_IMAGE:-nats:<version>-alpine}: the smoke test swaps it.
	def, ok := strings.CutPrefix(image, "${INTAKE_NATS_IMAGE:-")
	def, closed := strings.CutSuffix(def, "}")
	name, tag, tagged := strings.Cut(def, ":")
	if !ok || !closed || !tagged || name != "nats" {
		t.Fatalf("compose's nats image %q: want ${INTAKE_NATS_IMAGE:-nats:<version>[-variant]}", image)
	}
	version, _, _ := strings.Cut(tag, "-")
	if err := stream.CheckServerVersion(version); err != nil {
		t.Fatalf("compose's nats image: %v", err)
	}
	if version != server.VERSION {
		t.Errorf("compose's nats image is %s, the tests embed nats-server %s: keep them the same", version, server.VERSION)
	}
	startServer(t)
}
