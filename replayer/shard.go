package replayer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/intakehq/intake/pkg/envelope"
	"github.com/intakehq/intake/pkg/stream"
)

// A sharded deployment (processor.shard, docs/scaling.md) runs one replayer
// per shard, on the shard's database and with the shard's config. Its
// database holds the inbox and the replay records of the shard's
// integrations only, and the shard's processors apply a replay copy only
// when their database has its record; so a shard's replayer reads the ack
// floor of its shard's durable, scans only its integrations' subjects, and
// refuses a request naming another integration. Messages of other shards'
// integrations are none of its business: never checked, missing or
// replayed.

// durable is the processors' durable on INTAKE_IN whose ack floor
// reconcile and re-drive read: "processor", or "processor-{shard}".
func (r *Replayer) durable() string { return stream.ProcessorDurable(r.o.Shard) }

// mine reports whether events of integration are this replayer's: every
// integration's without a shard, the shard's with one.
func (r *Replayer) mine(integration string) bool {
	return r.o.Shard == "" || slices.Contains(r.o.Integrations, integration)
}

// checkMine refuses (400) an integration of another shard, named by field,
// and, when the replayer knows its integrations (Options.Integrations), one
// the config does not list: a selector naming it would match nothing, and
// an empty answer would read as "nothing lost".
func (r *Replayer) checkMine(field, integration string) error {
	if integration == "" {
		return nil
	}
	if r.o.Shard == "" && len(r.o.Integrations) > 0 && !slices.Contains(r.o.Integrations, integration) {
		return badRequest("%s: unknown integration %q; one of: %s", field, integration, strings.Join(r.o.Integrations, ", "))
	}
	if r.mine(integration) {
		return nil
	}
	return badRequest("%s: integration %q is not in shard %q (its integrations: %s): ask the replayer of the shard "+
		"whose config lists it", field, integration, r.o.Shard, strings.Join(r.o.Integrations, ", "))
}

// checkKeysMine refuses keys of another shard's integrations (a replayer
// without a shard takes any key: the dry run says which match nothing).
func (r *Replayer) checkKeysMine(keys []string) error {
	if r.o.Shard == "" {
		return nil // a key of an integration the config no longer lists may still be replayed
	}
	for i, s := range keys {
		k, _ := envelope.ParseKey(s)
		if err := r.checkMine(fmt.Sprintf("selector.keys[%d]", i), k.Integration); err != nil {
			return err
		}
	}
	return nil
}

// inSubjects are the INTAKE_IN subjects a scan for integration (every one
// of this replayer's when empty) reads: that integration's, else the
// shard's, else all (nil).
func (r *Replayer) inSubjects(integration string) []string {
	return r.subjects(integration, func(name string) string { return envelope.SubjectInPrefix(name) + ">" })
}

// outSubjects are the INTAKE_OUT subjects (intake.out.{tenant}.{integration}.…)
// a scan for tenant and integration (each every one when empty) reads; nil
// for all.
func (r *Replayer) outSubjects(tenant, integration string) []string {
	subject := func(name string) string { return envelope.SubjectOutFilter(tenant, name) }
	if s := r.subjects(integration, subject); s != nil {
		return s
	}
	if tenant != "" {
		return []string{envelope.SubjectOutFilter(tenant, "")}
	}
	return nil
}

// subjects is subject(integration), else subject of each of the shard's
// integrations, else nil (every integration).
func (r *Replayer) subjects(integration string, subject func(string) string) []string {
	if integration != "" {
		return []string{subject(integration)}
	}
	if r.o.Shard == "" {
		return nil
	}
	out := make([]string, 0, len(r.o.Integrations))
	for _, name := range r.o.Integrations {
		out = append(out, subject(name))
	}
	slices.Sort(out)
	return slices.Compact(out)
}
