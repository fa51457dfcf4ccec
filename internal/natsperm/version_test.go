package natsperm

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/intakehq/intake/pkg/stream"
)

// TestShippedNATSIsAtLeastTheFloor: the compose stack runs a nats-server
// release Intake starts against (stream.MinServerVersion), and the shipped
// server configuration syncs before acknowledging (startServer checks that
// for every test here).
func TestShippedNATSIsAtLeastTheFloor(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
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
	name, tag, ok := strings.Cut(image, ":")
	if !ok || name != "nats" {
		t.Fatalf("compose's nats image %q: want nats:<version>", image)
	}
	if err := stream.CheckServerVersion(tag); err != nil {
		t.Fatalf("compose's nats image: %v", err)
	}
	startServer(t)
}
