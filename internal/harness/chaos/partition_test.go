package chaos

import (
	"strings"
	"testing"
	"time"
)

// A partition run's faults are its partitions alone, at the issue's
// lengths, on one NATS node and one Postgres server.
func TestPartitionOptions(t *testing.T) {
	o := Options{Binary: "intake", Partition: true, ProcessorKills: 6}.WithDefaults()
	if o.ProcessorKills != 0 || !o.NoNATSFault || !o.NoPostgresFault {
		t.Errorf("partition run: kills %d, NATS fault %t, Postgres fault %t; want none of them",
			o.ProcessorKills, !o.NoNATSFault, !o.NoPostgresFault)
	}
	if o.PartitionPostgres != 45*time.Second || o.PartitionNATS != 30*time.Second {
		t.Errorf("partitions %s and %s, want 45s and 30s", o.PartitionPostgres, o.PartitionNATS)
	}
	if err := o.validate(); err != nil {
		t.Errorf("validate: %v", err)
	}
	for _, bad := range []Options{{Partition: true, Cluster: true}, {Partition: true, Failover: true}} {
		bad.Binary = "intake"
		if err := bad.WithDefaults().validate(); err == nil || !strings.Contains(err.Error(), "Options.Partition") {
			t.Errorf("validate %+v: %v, want Options.Partition refused", bad, err)
		}
	}
}
