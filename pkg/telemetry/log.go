package telemetry

import (
	"io"
	"log/slog"
	"os"
	"strings"
)

// NewLogger returns a slog logger: JSON when format is "json", text
// otherwise, at level (debug, info, warn, error; defaults to info).
func NewLogger(w io.Writer, format, level string) *slog.Logger {
	if w == nil {
		w = os.Stderr
	}
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Discard is a logger that drops everything: the Log every constructor
// takes when given none (a library embedded without a logger stays quiet),
// and a quiet logger for tests.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
