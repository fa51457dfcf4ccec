package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/intakehq/intake/pkg/provider"
)

// requests builds signed Standard Webhooks deliveries of a given body size;
// every call gets a fresh event id, so nothing is a duplicate.
type requests struct {
	url     string
	cfg     provider.Config
	size    int
	prefix  string
	padding string
}

func newRequests(url string, cfg provider.Config, size int, prefix string) *requests {
	return &requests{url: url, cfg: cfg, size: size, prefix: prefix, padding: string(bytes.Repeat([]byte("x"), size))}
}

// body returns a JSON body of exactly r.size bytes (when size allows), in
// one allocation.
func (r *requests) body(id string) []byte {
	head := fmt.Sprintf(`{"id":%q,"type":"bench.event","pad":"`, id)
	n := max(r.size-len(head)-2, 0)
	b := make([]byte, 0, len(head)+n+2)
	return append(append(append(b, head...), r.padding[:n]...), `"}`...)
}

func (r *requests) make(i int64) (*http.Request, string, error) {
	id := fmt.Sprintf("%s_%d", r.prefix, i)
	body := r.body(id)
	h, err := provider.Sign(r.cfg, 0, id, body, time.Now())
	if err != nil {
		return nil, "", err
	}
	req, err := http.NewRequest(http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	req.Header = h
	return req, id, nil
}

// loadResult is one generator run.
type loadResult struct {
	OK, Failed int
	Why        map[string]int // Failed by reason: "HTTP 503", or the client's error
	Elapsed    time.Duration
	CPU        cpuReading      // the machine's and this process's meanwhile (inTurn's slices only)
	Latencies  []time.Duration // of OK requests
	Done       map[string]time.Time
}

func (l loadResult) rate() float64 { return float64(l.OK) / l.Elapsed.Seconds() }

// cpuPer is the CPU spent per OK request: the machine's, this process's.
func (l loadResult) cpuPer() cpuReading { return l.CPU.per(float64(l.OK)) }

// merge adds o's requests to l (o measured another slice of the same thing).
func (l *loadResult) merge(o loadResult) {
	l.OK += o.OK
	l.Failed += o.Failed
	for k, v := range o.Why {
		if l.Why == nil {
			l.Why = map[string]int{}
		}
		l.Why[k] += v
	}
	l.Elapsed += o.Elapsed
	l.CPU = l.CPU.add(o.CPU)
	l.Latencies = append(l.Latencies, o.Latencies...)
	if l.Done == nil {
		l.Done = map[string]time.Time{}
	}
	for k, v := range o.Done {
		l.Done[k] = v
	}
}

// inTurn saturates targets in turn, slices times each, dur in all per
// target, and returns each one's merged result. Taking turns cancels what
// drifts on a shared machine (another tenant, the page cache) between one
// long measurement and the next: the ratios are what count. The order
// rotates from slice to slice (a b c, b c a, …), so none always follows
// another and pays for what it left behind.
func inTurn(ctx context.Context, client *http.Client, targets []func(slice int) *requests, conns int, dur time.Duration, slices int) ([]loadResult, error) {
	part := dur / time.Duration(slices)
	res := make([]loadResult, len(targets))
	for i := range slices {
		for k := range targets {
			t := (i + k) % len(targets)
			cpu0 := cpuMeter{}.read()
			r, err := generate(ctx, client, targets[t](i), conns, part, 0, false)
			r.CPU = cpuMeter{}.read().sub(cpu0)
			res[t].merge(r)
			if err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

func (l loadResult) pct(p float64) time.Duration {
	if len(l.Latencies) == 0 {
		return 0
	}
	s := slices.Clone(l.Latencies)
	slices.Sort(s)
	return s[min(int(p*float64(len(s))), len(s)-1)]
}

// generate sends requests from conns workers for dur. With rate 0 it is a
// closed loop (saturation); with a rate, request i is due at start+i/rate
// and its latency counts from when it was due, so a slow server cannot hide
// its queueing (no coordinated omission). keep records each OK request's
// completion time by event id (end-to-end latency).
func generate(ctx context.Context, client *http.Client, reqs *requests, conns int, dur time.Duration, rate float64, keep bool) (loadResult, error) {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		res      = loadResult{Done: map[string]time.Time{}, Why: map[string]int{}}
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(dur)
	for range conns {
		wg.Go(func() {
			var lat []time.Duration
			ok, failed := 0, 0
			why := map[string]int{}
			done := map[string]time.Time{}
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				due := time.Now()
				if rate > 0 {
					due = start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
					if due.After(deadline) {
						break
					}
					if w := time.Until(due); w > 0 {
						time.Sleep(w)
					}
				} else if due.After(deadline) {
					break
				}
				req, id, err := reqs.make(i)
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				resp, err := client.Do(req.WithContext(ctx))
				if err != nil {
					failed++
					why[failure(err)]++
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				now := time.Now()
				if resp.StatusCode != http.StatusOK {
					failed++
					why[fmt.Sprintf("HTTP %d", resp.StatusCode)]++
					continue
				}
				ok++
				lat = append(lat, now.Sub(due))
				if keep {
					done[id] = now
				}
			}
			mu.Lock()
			res.OK += ok
			res.Failed += failed
			for k, v := range why {
				res.Why[k] += v
			}
			res.Latencies = append(res.Latencies, lat...)
			for k, v := range done {
				res.Done[k] = v
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	if rate > 0 {
		res.Elapsed = dur
	}
	return res, firstErr
}

// failure names a client error by its kind, not its text (which holds
// addresses and ports): a timeout, a refused or reset connection.
func failure(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection reset"
	}
	return "client error"
}

func newClient(conns int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        conns * 2,
			MaxIdleConnsPerHost: conns * 2,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
	}
}
