package console

import (
	"bytes"
	"encoding/json"
	"io"
	"sort"
	"strconv"
	"strings"
)

// diffRow is one line of a side-by-side diff: Left and Right are the lines
// (LN/RN their 1-based numbers, 0 when absent); Op is same, del (left only),
// add (right only) or change (both, different).
type diffRow struct {
	Op          string
	Left, Right string
	LN, RN      int
}

// maxDiffCells bounds the LCS table (lines × lines); beyond it the two
// texts are shown aligned line by line, unmatched.
const maxDiffCells = 4_000_000

// diffLines compares two texts line by line (a longest common subsequence)
// and pairs a run of deletions with the additions that follow it, so a
// changed value shows on one row.
func diffLines(a, b string) []diffRow {
	l, r := strings.Split(a, "\n"), strings.Split(b, "\n")
	n, m := len(l), len(r)
	var ops []diffRow
	if n*m > maxDiffCells {
		for i := 0; i < max(n, m); i++ {
			row := diffRow{Op: "change"}
			if i < n {
				row.Left, row.LN = l[i], i+1
			}
			if i < m {
				row.Right, row.RN = r[i], i+1
			}
			if i < n && i < m && l[i] == r[i] {
				row.Op = "same"
			}
			ops = append(ops, row)
		}
		return ops
	}
	// lcs[i][j]: the LCS length of l[i:] and r[j:].
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if l[i] == r[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var dels, adds []diffRow
	flush := func() {
		k := 0
		for ; k < len(dels) && k < len(adds); k++ {
			ops = append(ops, diffRow{Op: "change", Left: dels[k].Left, LN: dels[k].LN, Right: adds[k].Right, RN: adds[k].RN})
		}
		ops = append(ops, dels[k:]...)
		if k < len(adds) {
			ops = append(ops, adds[k:]...)
		}
		dels, adds = dels[:0], adds[:0]
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && l[i] == r[j]:
			flush()
			ops = append(ops, diffRow{Op: "same", Left: l[i], LN: i + 1, Right: r[j], RN: j + 1})
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			adds = append(adds, diffRow{Op: "add", Right: r[j], RN: j + 1})
			j++
		default:
			dels = append(dels, diffRow{Op: "del", Left: l[i], LN: i + 1})
			i++
		}
	}
	flush()
	return ops
}

// canonicalJSON re-indents a JSON document with every object's keys in
// sorted order (numbers kept as written), so that two payloads that hold
// the same fields in another order diff as the same: a moved field is not
// a change. ok is false for a body that is not one JSON value.
func canonicalJSON(b []byte) (v any, text string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, "", false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, "", false
	}
	out, err := json.MarshalIndent(v, "", "  ") // maps marshal with sorted keys
	if err != nil {
		return nil, "", false
	}
	return v, string(out), true
}

// fieldChange is one JSON path whose value differs between two payloads:
// Op is change, add (only on the right) or del (only on the left); Left and
// Right are the values as compact JSON.
type fieldChange struct {
	Path, Op    string
	Left, Right string
}

// maxFieldChanges bounds the list of changed paths a conflict shows.
const maxFieldChanges = 200

// jsonChanges compares two decoded JSON values structurally: objects by
// key (order ignored), arrays by position, everything else by value.
func jsonChanges(a, b any, path string, out []fieldChange) []fieldChange {
	if len(out) >= maxFieldChanges {
		return out
	}
	switch av := a.(type) {
	case map[string]any:
		if bv, ok := b.(map[string]any); ok {
			keys := make([]string, 0, len(av)+len(bv))
			for k := range av {
				keys = append(keys, k)
			}
			for k := range bv {
				if _, dup := av[k]; !dup {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			for _, k := range keys {
				l, inA := av[k]
				r, inB := bv[k]
				p := path + "." + k
				switch {
				case !inB:
					out = append(out, fieldChange{Path: p, Op: "del", Left: compact(l)})
				case !inA:
					out = append(out, fieldChange{Path: p, Op: "add", Right: compact(r)})
				default:
					out = jsonChanges(l, r, p, out)
				}
			}
			return out
		}
	case []any:
		if bv, ok := b.([]any); ok {
			for i := 0; i < max(len(av), len(bv)); i++ {
				p := path + "[" + strconv.Itoa(i) + "]"
				switch {
				case i >= len(bv):
					out = append(out, fieldChange{Path: p, Op: "del", Left: compact(av[i])})
				case i >= len(av):
					out = append(out, fieldChange{Path: p, Op: "add", Right: compact(bv[i])})
				default:
					out = jsonChanges(av[i], bv[i], p, out)
				}
			}
			return out
		}
	}
	if l, r := compact(a), compact(b); l != r {
		out = append(out, fieldChange{Path: path, Op: "change", Left: l, Right: r})
	}
	return out
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
