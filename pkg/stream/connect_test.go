package stream

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/intakehq/intake/pkg/config"
)

func TestFailedConnectDoesNotPrintThePassword(t *testing.T) {
	// A port nothing listens on: the connect fails.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	_, err = Connect(config.NATS{URL: "nats://svc:PASSWORD-s3cret@" + addr}, "test", true, log)
	if err == nil {
		t.Fatal("connect to a closed port succeeded")
	}
	if strings.Contains(err.Error(), "s3cret") || strings.Contains(logs.String(), "s3cret") {
		t.Fatalf("the password leaked: err %q, logs %q", err, logs.String())
	}
	if !strings.Contains(err.Error(), "svc:xxxxx@"+addr) {
		t.Fatalf("the error no longer names the server: %v", err)
	}
}
