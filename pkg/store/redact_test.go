package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFailedConnectDoesNotPrintThePassword: Open and Migrate errors name
// the database without its password, for URLs and keyword/value DSNs, also
// ones that do not parse.
func TestFailedConnectDoesNotPrintThePassword(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens there: the connect fails
	addr := ln.Addr().String()
	dsns := []string{
		"postgres://svc:PASSWORD-s3cret@" + addr + "/intake?sslmode=disable",
		"postgresql://svc:PASSWORD-s3cret@" + addr + "/intake?sslmode=disable&connect_timeout=5",
		"postgres://svc@" + addr + "/intake?sslmode=disable&password=PASSWORD-s3cret",
		"host=127.0.0.1 port=" + itoa(port) + " user=svc password=PASSWORD-s3cret dbname=intake sslmode=disable",
		"host=127.0.0.1 port=" + itoa(port) + " user=svc password='PASSWORD s3cret' dbname=intake sslmode=disable",
		"postgres://svc:PASSWORD-s3cret@" + addr + ":notaport/intake",     // does not parse
		"postgres://svc:PASSWORD-s3cret@[::1/intake",                      // does not parse
		"postgres://svc:PASSWORD-s3cret@" + addr + "/intake?sslmode=nope", // bad option
		"host=127.0.0.1 port=x user=svc password=PASSWORD-s3cret",         // does not parse
	}
	for _, dsn := range dsns {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, openErr := Open(ctx, dsn, 1)
		migrateErr := Migrate(ctx, dsn, nil)
		cancel()
		for name, err := range map[string]error{"Open": openErr, "Migrate": migrateErr} {
			if err == nil {
				t.Fatalf("%s(%q) succeeded", name, dsn)
			}
			t.Logf("%s: %v", name, err)
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s: the password leaked: %v", name, err)
			}
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestHidePasswords: whatever a driver writes into its error, the text
// Open and Migrate return has the URL's passwords masked.
func TestHidePasswords(t *testing.T) {
	for _, dsn := range []string{
		"postgres://svc:PASSWORD-s3cret@db:5432/intake",
		"postgres://svc:PASSWORD%2Fs3cret@db:5432/intake",
		"postgres://svc@db/intake?password=PASSWORD-s3cret",
		"postgres://svc:PASSWORD-s3cret@db:x:y/intake",
		"postgres://svc:PASS@WORD-s3cret@db/intake",
		"host=db user=svc password=PASSWORD-s3cret",
		"host=db user=svc password='PASSWORD s3cret' dbname=intake",
		"host=db user=svc sslpassword=PASSWORD-s3cret",
	} {
		leaky := fmt.Errorf("driver: cannot use %q", dsn)
		got := hidePasswords(fmt.Errorf("store: %w", leaky), dsn)
		if strings.Contains(got.Error(), "s3cret") {
			t.Errorf("%q: the password leaked: %v", dsn, got)
		}
		if !errors.Is(got, leaky) {
			t.Errorf("%q: the cause is lost", dsn)
		}
	}
}
