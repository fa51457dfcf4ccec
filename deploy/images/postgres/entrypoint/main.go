// Command entrypoint starts the stand-in postgres image (deploy/images): it
// reads the environment the official postgres image reads (POSTGRES_USER,
// POSTGRES_PASSWORD, POSTGRES_DB, PGDATA), runs initdb on an empty data
// directory, creates the database, and then execs postgres. A static Go
// program because the image is FROM scratch: there is no shell for the
// official image's docker-entrypoint.sh.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "entrypoint:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	// As the official image: `postgres -c …`, or just flags.
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		args = append([]string{"postgres"}, args...)
	}
	if args[0] != "postgres" {
		return fmt.Errorf("%q: this image runs postgres only", args[0])
	}
	data := env("PGDATA", "/var/lib/postgresql/data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := initialize(data); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	postgres, err := exec.LookPath("postgres")
	if err != nil {
		return err
	}
	argv := append([]string{"postgres", "-D", data}, args[1:]...)
	return syscall.Exec(postgres, argv, os.Environ())
}

// initialize makes a cluster whose superuser is POSTGRES_USER with
// POSTGRES_PASSWORD (scram over TCP, from any address, as the official
// image), listening on every address, with the database POSTGRES_DB.
func initialize(data string) error {
	user := env("POSTGRES_USER", "postgres")
	password := os.Getenv("POSTGRES_PASSWORD")
	if password == "" {
		return errors.New("POSTGRES_PASSWORD is not set")
	}
	db := env("POSTGRES_DB", user)
	initdb := exec.Command("initdb", "-D", data, "-U", user, "--pwfile=/dev/stdin",
		"-E", "UTF8", "--locale=C", "--auth-local=trust", "--auth-host=scram-sha-256")
	initdb.Stdin = strings.NewReader(password + "\n")
	initdb.Stdout, initdb.Stderr = os.Stdout, os.Stderr
	if err := initdb.Run(); err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	if err := appendTo(filepath.Join(data, "pg_hba.conf"), "host all all all scram-sha-256\n"); err != nil {
		return err
	}
	if err := appendTo(filepath.Join(data, "postgresql.conf"), "listen_addresses = '*'\n"); err != nil {
		return err
	}
	if db == "postgres" {
		return nil
	}
	// Single-user mode: no server listening yet, so a healthcheck that
	// connects over TCP never sees a half-initialised cluster.
	single := exec.Command("postgres", "--single", "-D", data, "postgres")
	single.Stdin = strings.NewReader(`CREATE DATABASE "` + strings.ReplaceAll(db, `"`, `""`) + `";` + "\n")
	single.Stdout, single.Stderr = os.Stdout, os.Stderr
	if err := single.Run(); err != nil {
		return fmt.Errorf("create database %s: %w", db, err)
	}
	return nil
}

func appendTo(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
