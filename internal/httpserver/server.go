package httpserver

import (
	"net/http"
	"time"
)

// Timeouts bound how long a client may take over a request, so slow clients
// cannot hold connections open (slowloris) whatever the body limit. Zero
// means none: callers pass their configuration's defaulted values.
type Timeouts struct {
	ReadHeader time.Duration
	Read       time.Duration
	Write      time.Duration
}

// MaxHeaderBytes caps a request's headers on every listener.
const MaxHeaderBytes = 64 << 10

// idleTimeout closes keep-alive connections unused for this long.
const idleTimeout = 2 * time.Minute

// New is an http.Server for h on addr with the timeouts t.
func New(addr string, h http.Handler, t Timeouts) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}
