package bench

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return procStats{}, err
	}
	// Uncompressed: gzip would be the processor's work, not ours.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return procStats{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return procStats{}, fmt.Errorf("%s/metrics: %s", base, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return procStats{}, fmt.Errorf("%s/metrics: %w", base, err)
	}
	var s procStats
	if f := fams["intake_processor_messages_total"]; f != nil {
		for _, m := range f.GetMetric() {
			s.Messages += m.GetCounter().GetValue()
		}
	}
	if f := fams["intake_processor_last_commit_timestamp_seconds"]; f != nil {
		for _, m := range f.GetMetric() {
			s.Last = m.GetGauge().GetValue()
		}
	}
	if f := fams["intake_processor_tx_seconds"]; f != nil {
		for _, m := range f.GetMetric() {
			s.Txs += float64(m.GetHistogram().GetSampleCount())
			s.TxSecs += m.GetHistogram().GetSampleSum()
		}
	}
	return s, nil
}
