// Package scrape reads a role's /metrics for the harnesses (intake bench,
// its soak, the chaos harness): the Prometheus text format parsed by
// prometheus/common's expfmt, as Prometheus itself reads it.
package scrape

import (
	"context"
	"fmt"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families fetches url (a /metrics endpoint) and returns its metric
// families by name.
func Families(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	// Uncompressed: gzip would be the measured process's work, not ours.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return fams, nil
}

// Sum adds the values of name's series (counters, gauges, untyped) whose
// labels include every one of match; exported reports whether name is
// there at all.
func Sum(fams map[string]*dto.MetricFamily, name string, match map[string]string) (sum float64, exported bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if !matches(m, match) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum, true
}

func matches(m *dto.Metric, match map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := match[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(match)
}
