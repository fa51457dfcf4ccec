package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/intakehq/intake/pkg/config"
	"github.com/intakehq/intake/pkg/envelope"
)

// ErrNotReady is wrapped by Check's error when a stream is missing or its
// settings are not the ones Intake relies on: the roles do not create or
// change streams (they lack the rights to), `intake migrate` does.
var ErrNotReady = errors.New("run `intake migrate` to create or update the streams")

// Configs are the streams Ensure creates, by name.
func Configs(c config.Stream) map[string]jetstream.StreamConfig {
	m := map[string]jetstream.StreamConfig{}
	for _, sc := range []jetstream.StreamConfig{InConfig(c), OutConfig(c), ReceiptsConfig(c)} {
		m[sc.Name] = sc
	}
	return m
}

// Check makes sure the named streams (all three when none is named) exist
// with the settings Intake's guarantees depend on — subjects, retention,
// storage, discard policy and duplicate window — and fails naming the
// stream and the setting otherwise (wrapping ErrNotReady). Sizing settings
// (replicas, max_age, max_bytes) that differ from the config are logged as
// warnings: the stream works, an operator may have tuned it on purpose.
// It needs only STREAM.INFO on the named streams.
func Check(ctx context.Context, js jetstream.JetStream, c config.Stream, log *slog.Logger, names ...string) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(names) == 0 {
		names = []string{envelope.StreamIn, envelope.StreamOut, envelope.StreamReceipts}
	}
	want := Configs(c)
	for _, name := range names {
		w, ok := want[name]
		if !ok {
			return fmt.Errorf("stream %s: not an Intake stream", name)
		}
		var info *jetstream.StreamInfo
		err := retry(ctx, func(ctx context.Context) error {
			s, err := js.Stream(ctx, name)
			if err != nil {
				return err
			}
			info = s.CachedInfo()
			return nil
		})
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("stream %s does not exist: %w", name, ErrNotReady)
		}
		if err != nil {
			return fmt.Errorf("stream %s: info: %w", name, Refusal(js, err))
		}
		mismatch, warnings := Compare(w, info.Config)
		for _, m := range warnings {
			log.Warn("stream setting differs from the config", "stream", name, "setting", m)
		}
		if len(mismatch) > 0 {
			return fmt.Errorf("stream %s: %s: %w", name, mismatch[0], ErrNotReady)
		}
	}
	return nil
}

// Compare lists how got differs from want: mismatch for the settings the
// pipeline's guarantees depend on, warnings for sizing.
func Compare(want, got jetstream.StreamConfig) (mismatch, warnings []string) {
	if !sameSet(want.Subjects, got.Subjects) {
		mismatch = append(mismatch, fmt.Sprintf("subjects are %q, want %q", got.Subjects, want.Subjects))
	}
	if got.Retention != want.Retention {
		mismatch = append(mismatch, fmt.Sprintf("retention is %s, want %s", got.Retention, want.Retention))
	}
	if got.Storage != want.Storage {
		mismatch = append(mismatch, fmt.Sprintf("storage is %s, want %s", got.Storage, want.Storage))
	}
	if got.Discard != want.Discard {
		mismatch = append(mismatch, fmt.Sprintf("discard is %s, want %s", got.Discard, want.Discard))
	}
	if got.Duplicates != want.Duplicates {
		mismatch = append(mismatch, fmt.Sprintf("duplicate window is %s, want %s (nats.stream.duplicate_window)", got.Duplicates, want.Duplicates))
	}
	if got.Replicas != want.Replicas {
		warnings = append(warnings, fmt.Sprintf("replicas is %d, config says %d (nats.stream.replicas)", got.Replicas, want.Replicas))
	}
	if got.MaxAge != want.MaxAge {
		warnings = append(warnings, fmt.Sprintf("max_age is %s, config says %s (nats.stream.max_age)", got.MaxAge, want.MaxAge))
	}
	if normBytes(got.MaxBytes) != normBytes(want.MaxBytes) {
		warnings = append(warnings, fmt.Sprintf("max_bytes is %d, config says %d (nats.stream.max_bytes)", got.MaxBytes, want.MaxBytes))
	}
	return mismatch, warnings
}

// normBytes treats 0 and -1 alike: both mean no limit to the server.
func normBytes(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
