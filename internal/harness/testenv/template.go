package testenv

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"
)

// templates are the template databases of this test binary, by name: each
// is prepared once (sync.Once) and dropped by Main after the tests. Package
// state for the same reason as shared: Main runs outside any test.
var templates struct {
	mu     sync.Mutex
	byName map[string]*template
}

type template struct {
	once  sync.Once
	db    string // database name on the shared server
	admin string
	err   error
}

// PostgresFrom returns the URL of a fresh database for this test, copied
// (CREATE DATABASE … TEMPLATE) from the template database called name, and
// dropped when the test ends like Postgres's. The first call for a name in
// this test binary creates the template and runs prepare on it (migrations,
// say); later calls only copy it, which takes milliseconds where preparing
// again would take far longer. Every call for one name must pass the same
// prepare. A failed prepare fails every test that asks for the template.
func PostgresFrom(t testing.TB, name string, prepare func(ctx context.Context, url string) error) string {
	t.Helper()
	admin := sharedAdminURL(t)
	templates.mu.Lock()
	if templates.byName == nil {
		templates.byName = map[string]*template{}
	}
	tpl, ok := templates.byName[name]
	if !ok {
		tpl = &template{admin: admin}
		templates.byName[name] = tpl
	}
	templates.mu.Unlock()

	tpl.once.Do(func() { tpl.db, tpl.err = prepareTemplate(admin, name, prepare) })
	if tpl.err != nil {
		t.Fatalf("testenv: template database %q: %v", name, tpl.err)
	}
	return createDatabase(t, admin, "TEMPLATE "+tpl.db)
}

// prepareTemplate creates the template database, prepares it and then
// closes it to connections: CREATE DATABASE … TEMPLATE fails while anyone
// is connected to the template.
func prepareTemplate(admin, name string, prepare func(ctx context.Context, url string) error) (string, error) {
	u, err := url.Parse(admin)
	if err != nil {
		return "", err
	}
	db := "tpl_" + randomHex(6) // random: an external DATABASE_URL server may host several test binaries
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := execAdmin(ctx, admin, "CREATE DATABASE "+db); err != nil {
		return "", err
	}
	u.Path = "/" + db
	if err := prepare(ctx, u.String()); err != nil {
		return db, fmt.Errorf("prepare %s: %w", name, err)
	}
	if err := execAdmin(ctx, admin, "ALTER DATABASE "+db+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return db, err
	}
	// Backends of prepare may still be exiting after their client closed.
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := countBackends(ctx, admin, db)
		if err != nil {
			return db, err
		}
		if n == 0 {
			return db, nil
		}
		if time.Now().After(deadline) {
			return db, fmt.Errorf("%d connections to %s left open after prepare", n, db)
		}
		time.Sleep(10 * time.Millisecond) // polling pg_stat_activity, not guessing a duration
	}
}

func countBackends(ctx context.Context, admin, db string) (int, error) {
	conn, err := connectAdmin(ctx, admin)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1`, db).Scan(&n)
	return n, err
}

// dropTemplates drops the template databases; Main calls it after the tests
// so that a server at DATABASE_URL keeps none.
func dropTemplates() error {
	templates.mu.Lock()
	defer templates.mu.Unlock()
	var first error
	for name, tpl := range templates.byName {
		if tpl.db == "" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := execAdmin(ctx, tpl.admin, "ALTER DATABASE "+tpl.db+" WITH IS_TEMPLATE false")
		if err == nil {
			err = execAdmin(ctx, tpl.admin, "DROP DATABASE IF EXISTS "+tpl.db+" WITH (FORCE)")
		}
		cancel()
		if err != nil && first == nil {
			first = fmt.Errorf("drop template database %q: %w", name, err)
		}
	}
	templates.byName = nil
	return first
}
