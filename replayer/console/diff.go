package console

import "strings"

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
