package ingress

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"
)

// TestReadBoundedWithoutContentLength covers chunked bodies: the size is
// only known by reading, and reading stops one byte past the limit.
func TestReadBoundedWithoutContentLength(t *testing.T) {
	for _, tt := range []struct {
		size    int
		tooMuch bool
	}{{0, false}, {99, false}, {100, false}, {101, true}, {1 << 20, true}} {
		body := bytes.Repeat([]byte("x"), tt.size)
		src := &countingReader{r: bytes.NewReader(body)}
		req, _ := http.NewRequest(http.MethodPost, "/", io.NopCloser(src))
		req.ContentLength = -1
		got, err := readBounded(req, 100, nil)
		if tt.tooMuch {
			if !errors.Is(err, errTooLarge) {
				t.Errorf("%d bytes: err %v, want errTooLarge", tt.size, err)
			}
			if src.n > 101 { // never more than one byte past the limit
				t.Errorf("%d bytes: read %d before refusing", tt.size, src.n)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("%d bytes: got %d bytes, err %v", tt.size, len(got), err)
		}
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
