package console

import (
	"html/template"
	"net/url"
	"strings"
	"time"
)

var funcs = template.FuncMap{
	"ts": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			if v.IsZero() {
				return ""
			}
			return v.UTC().Format("2006-01-02 15:04:05Z")
		case *time.Time:
			if v == nil {
				return ""
			}
			return v.UTC().Format("2006-01-02 15:04:05Z")
		}
		return ""
	},
	"deref": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
	"short": func(s string, n int) string {
		if len(s) <= n {
			return s
		}
		return s[:n] + "…"
	},
	"mul":  func(i, n int) int { return i * n },
	"sub":  func(a, b float64) float64 { return a - b },
	"join": strings.Join,
	"withq": func(v url.Values, k, val string) string {
		out := url.Values{}
		for kk, vv := range v {
			out[kk] = vv
		}
		out.Set(k, val)
		return out.Encode()
	},
}
