package processor

import (
	"errors"
	"slices"

	"github.com/intakehq/intake/pkg/config"
)

// errShardWithoutIntegrations: a shard's consumers filter on its
// integrations, so a shard needs some.
var errShardWithoutIntegrations = errors.New("processor.shard is set but Options.Integrations is empty: a shard consumes its integrations' subjects only")

// integrationNames are the names of ins, sorted: a shard's consumers
// filter on their subjects (stream.ProcessorConsumerConfig).
func integrationNames(ins []config.Integration) []string {
	names := make([]string, 0, len(ins))
	for _, in := range ins {
		names = append(names, in.Name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
