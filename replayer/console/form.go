package console

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
)

// Bounds of a console POST's body. A form is a few short fields; a replay's
// selection of keys from the failed queue may be long (a page of keys, or
// a reconcile's fix carried as JSON).
const (
	maxForm        = 64 << 10
	maxKeyListForm = 1 << 20
)

// readForm reads a POST's form before anything else looks at it:
// application/x-www-form-urlencoded only (415 otherwise: a multipart body
// would be buffered in memory and spilled to temp files), under
// http.MaxBytesReader (413 past limit), with ParseForm. Handlers read
// r.PostForm, which nothing parses again.
func readForm(limit int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/x-www-form-urlencoded" {
				http.Error(w, "unsupported media type: a console POST is an application/x-www-form-urlencoded form",
					http.StatusUnsupportedMediaType)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			if err := r.ParseForm(); err != nil {
				var tooBig *http.MaxBytesError
				if errors.As(err, &tooBig) {
					http.Error(w, fmt.Sprintf("request too large: this form is at most %d KiB", limit>>10), http.StatusRequestEntityTooLarge)
					return
				}
				http.Error(w, "bad request: the form does not parse", http.StatusBadRequest)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
