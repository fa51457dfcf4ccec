package bench

import (
	"context"

	"github.com/intakehq/intake/internal/harness/scrape"
)

// procStats is what the processor's own /metrics say: scraping them costs
// the measured Postgres nothing (a count(*) of the inbox every few
// milliseconds would not).
type procStats struct {
	Messages float64 // intake_processor_messages_total, every outcome
	Last     float64 // intake_processor_last_commit_timestamp_seconds
	Txs      float64 // intake_processor_tx_seconds_count
	TxSecs   float64 // intake_processor_tx_seconds_sum
}

func scrapeProcessor(ctx context.Context, base string) (procStats, error) {
	fams, err := scrape.Families(ctx, base+"/metrics")
	if err != nil {
		return procStats{}, err
	}
	var s procStats
	s.Messages, _ = scrape.Sum(fams, "intake_processor_messages_total", nil)
	s.Last, _ = scrape.Sum(fams, "intake_processor_last_commit_timestamp_seconds", nil)
	if f := fams["intake_processor_tx_seconds"]; f != nil {
		for _, m := range f.GetMetric() {
			s.Txs += float64(m.GetHistogram().GetSampleCount())
			s.TxSecs += m.GetHistogram().GetSampleSum()
		}
	}
	return s, nil
}
