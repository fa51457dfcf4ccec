package main

import (
	"bytes"
	"testing"

	"github.com/intakehq/intake/pkg/subscriber"
)

func TestSubscriberSchemaPrintsTheContract(t *testing.T) {
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"subscriber", "schema"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if out.String() != subscriber.Schema || !bytes.Contains(out.Bytes(), []byte("CREATE TABLE IF NOT EXISTS intake_subscriber.handled (")) {
		t.Fatalf("intake subscriber schema printed %q, want subscriber.Schema", out.String())
	}
}
