package apiclient

import (
	"context"
	"time"
)

// RedriveStatus is GET /api/v1/redrive: the replayer's re-drive settings
// and its last passes.
type RedriveStatus struct {
	Enabled  bool   `json:"enabled"`
	Interval string `json:"interval"`
	Lookback string `json:"lookback"`
	// Cursor is the highest INTAKE_IN sequence a pass has checked.
	Cursor uint64 `json:"cursor"`
	// Passes are the last passes of this replayer, newest first.
	Passes []Redrive `json:"passes"`
}

// Redrive is the record of one re-drive pass.
type Redrive struct {
	Trigger RedriveTrigger `json:"trigger"`
	At      time.Time      `json:"at"`
	// FromSeq..ToSeq is the INTAKE_IN range checked; empty (0..0) when the
	// processor had acked nothing new.
	FromSeq uint64 `json:"from_seq"`
	ToSeq   uint64 `json:"to_seq"`
	// Checked counts ingress messages in the range; Missing those acked
	// without an inbox row; Redriven the events the pass replayed (Missing
	// minus keys a running replay is about to publish and messages gone
	// from the stream).
	Checked  int `json:"checked"`
	Missing  int `json:"missing"`
	Redriven int `json:"redriven"`
	// Truncated: more were missing than one reconcile lists; the next pass
	// goes on from ToSeq.
	Truncated bool `json:"truncated,omitempty"`
	// ConflictsRecorded counts conflict records the pass wrote again:
	// conflicting deliveries the processor acknowledged whose record is
	// gone (ReconcileResult.LostConflicts).
	ConflictsRecorded int `json:"conflicts_recorded"`
	// Unfixable counts missing messages a re-drive replay of this replayer
	// already ran for that are still missing (a rejection or termination
	// the processor kept no record of): not replayed again; the first time
	// each is found, an error log names its stream sequence.
	Unfixable int      `json:"unfixable"`
	ReplayIDs []string `json:"replay_ids"`
	Error     string   `json:"error,omitempty"`
}

// RedriveTrigger says why a re-drive pass ran.
type RedriveTrigger string

// Re-drive triggers.
const (
	// RedriveStart: the replayer started; the pass looks back
	// api.redrive_lookback.
	RedriveStart RedriveTrigger = "start"
	// RedriveScheduled: every api.redrive_interval, from where the
	// previous pass stopped.
	RedriveScheduled RedriveTrigger = "scheduled"
	// RedriveFailover: another Postgres server answers (or the same one
	// restarted); the pass looks back api.redrive_lookback.
	RedriveFailover RedriveTrigger = "failover"
)

// Redrive is GET /api/v1/redrive.
func (c *Client) Redrive(ctx context.Context) (RedriveStatus, error) {
	var st RedriveStatus
	err := c.get(ctx, "/api/v1/redrive", nil, &st)
	return st, err
}
