package telemetry

import (
	"io"
	"log/slog"
	"os"
	"strings"
)

// NewLogger returns a slog logger: JSON when format is "json", text
// otherwise, at level (debug, info, warn, error; defaults to info). A field
// whose value is the empty string is left out (dropEmpty): a line says
// what is known, and `requested_by=""` reads like a value.
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
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: dropEmpty}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Discard is a logger that drops everything: the Log every constructor
// takes when given none (a library embedded without a logger stays quiet),
// and a quiet logger for tests.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// dropEmpty is the handlers' ReplaceAttr: an empty string field becomes
// the zero Attr, which slog leaves out; the built-in keys (time, level,
// msg) are kept even when empty.
func dropEmpty(groups []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindString && a.Value.String() == "" {
		if len(groups) == 0 && (a.Key == slog.MessageKey || a.Key == slog.LevelKey || a.Key == slog.TimeKey) {
			return a
		}
		return slog.Attr{}
	}
	return a
}
