package doclinks

import (
	"fmt"
	"html"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// roots are the Markdown files at the module root a reader starts from;
// each must exist. trees are the folders whose .md files are read too.
var (
	roots = []string{"README.md", "CHANGELOG.md", "BENCHMARKS.md"}
	trees = []string{"docs", "deploy", "examples"}
)

// TestDocLinks checks every relative link of the repository's Markdown.
func TestDocLinks(t *testing.T) {
	root := moduleRoot(t)
	files := markdownFiles(t, root)
	problems := check(root, files)
	for _, p := range problems {
		t.Error(p)
	}
	if !t.Failed() {
		t.Logf("%d Markdown files, every relative link resolves", len(files))
	}
}

// TestSlug pins the GitHub heading slug rules the anchors are checked by.
func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Quick start", "quick-start"},
		{"Guarantees, and their limits", "guarantees-and-their-limits"},
		{"Proof: chaos harness", "proof-chaos-harness"},
		{"`intake migrate` and the streams", "intake-migrate-and-the-streams"},
		{"nats.stream.duplicate_window", "natsstreamduplicate_window"},
		{"Upgrading to 0.x (migrations 00013–00015)", "upgrading-to-0x-migrations-0001300015"},
		{"A — B", "a--b"},
		{"Replays, redeliveries & reconcile", "replays-redeliveries--reconcile"},
		{"Dependencies, and why", "dependencies-and-why"},
		{"[A link](other.md) in a heading", "a-link-in-a-heading"},
		{"**Bold** and *emphasis*", "bold-and-emphasis"},
		{"Café au lait", "café-au-lait"},
		{"x × y → z", "x--y--z"},
		{"  Trailing spaces  ", "trailing-spaces"},
	} {
		if got := slug(headingText(c.heading)); got != c.want {
			t.Errorf("slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

// TestAnchorsOfRepeatedHeadings: GitHub suffixes a repeated slug -1, -2, ….
func TestAnchorsOfRepeatedHeadings(t *testing.T) {
	got := anchors("# Notes\n\n## Notes\n\n```\n# Notes (in a fence: no heading)\n```\n\n### Notes\n\nSetext\n------\n<a id=\"by-hand\"></a>\n")
	for _, want := range []string{"notes", "notes-1", "notes-2", "setext", "by-hand"} {
		if !got[want] {
			t.Errorf("anchor %q missing from %v", want, got)
		}
	}
	if got["notes-3"] || got["notes-in-a-fence-no-heading"] {
		t.Errorf("a heading inside a code fence was counted: %v", got)
	}
}

// TestBrokenLinksAreReported writes Markdown with every kind of broken link
// into a temporary repository and checks each is reported, and the good
// ones are not.
func TestBrokenLinksAreReported(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "repo")
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/repo\n")
	write("outside.md", "# Outside\n") // a sibling of the root that exists: still outside
	if err := os.Rename(filepath.Join(root, "outside.md"), filepath.Join(dir, "outside.md")); err != nil {
		t.Fatal(err)
	}
	write("docs/guarantees.md", "# Guarantees\n\n## The re-drive\n\n## Limits\n\n## Limits\n")
	write("README.md", strings.Join([]string{
		"# Intake",
		"",
		"## Quick start",
		"",
		"Good: [g](docs/guarantees.md), [g](docs/guarantees.md#the-re-drive), [l](docs/guarantees.md#limits-1),",
		"[here](#quick-start), [dir](docs/), [ext](https://example.com/x.md#nowhere), [m](mailto:a@b.c).",
		"Not links: `[x](missing-in-code.md)` and",
		"```",
		"[x](missing-in-fence.md)",
		"```",
		"Bad: [a](docs/missing.md), [b](docs/guarantees.md#no-such-heading), [c](#nowhere),",
		"[d](../outside.md), [e](/../outside.md), [f](docs/guarantees.md#limits-2),",
		"[g](<docs/also missing.md>)",
		"",
		"[ref]: docs/missing-ref.md",
	}, "\n"))

	problems := check(root, []string{filepath.Join(root, "README.md"), filepath.Join(root, "docs/guarantees.md")})
	var got []string
	for _, p := range problems {
		got = append(got, p.link)
	}
	want := []string{
		"docs/missing.md", "docs/guarantees.md#no-such-heading", "#nowhere",
		"../outside.md", "/../outside.md", "docs/guarantees.md#limits-2",
		"docs/also missing.md", "docs/missing-ref.md",
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("broken link %q not reported; reported: %v", w, problems)
		}
	}
	if len(got) != len(want) {
		t.Errorf("reported %d problems, want %d: %v", len(got), len(want), problems)
	}
	for _, p := range problems {
		if p.file != "README.md" || p.line < 11 {
			t.Errorf("problem at the wrong place: %v", p)
		}
	}
}

// moduleRoot walks up from the package directory to the directory holding
// go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package directory")
		}
		dir = parent
	}
}

// markdownFiles lists roots and the .md files of trees, as absolute paths.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	for _, r := range roots {
		p := filepath.Join(root, r)
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", r, err)
			continue
		}
		files = append(files, p)
	}
	for _, tree := range trees {
		err := filepath.WalkDir(filepath.Join(root, tree), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// problem is one link that does not resolve.
type problem struct {
	file string // relative to the root
	line int
	link string
	why  string
}

func (p problem) String() string { return fmt.Sprintf("%s:%d: (%s) %s", p.file, p.line, p.link, p.why) }

// link is one destination found in a file.
type link struct {
	dest string
	line int
}

// check reads files (absolute paths under root) and returns every link
// that does not resolve.
func check(root string, files []string) []problem {
	root, err := filepath.Abs(root)
	if err != nil {
		return []problem{{why: err.Error()}}
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	cache := map[string]map[string]bool{} // anchors by absolute path
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := cache[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := anchors(string(b))
		cache[path] = a
		return a, nil
	}

	var problems []problem
	for _, file := range files {
		rel, _ := filepath.Rel(root, file)
		b, err := os.ReadFile(file)
		if err != nil {
			problems = append(problems, problem{file: rel, why: err.Error()})
			continue
		}
		for _, l := range links(string(b)) {
			bad := func(why string, args ...any) {
				problems = append(problems, problem{file: rel, line: l.line, link: l.dest, why: fmt.Sprintf(why, args...)})
			}
			if isExternal(l.dest) {
				continue
			}
			pathPart, fragment, _ := strings.Cut(l.dest, "#")
			pathPart, _, _ = strings.Cut(pathPart, "?")
			p, err := url.PathUnescape(pathPart)
			if err != nil {
				bad("bad escape in the path: %v", err)
				continue
			}
			if fragment, err = url.PathUnescape(fragment); err != nil {
				bad("bad escape in the anchor: %v", err)
				continue
			}
			target := file
			if p != "" {
				if strings.HasPrefix(p, "/") { // GitHub: from the repository's root
					target = filepath.Join(root, filepath.FromSlash(p))
				} else {
					target = filepath.Join(filepath.Dir(file), filepath.FromSlash(p))
				}
			}
			if !inside(root, target) {
				bad("leaves the repository")
				continue
			}
			info, err := os.Stat(target)
			if err != nil {
				bad("no such file")
				continue
			}
			if real, err := filepath.EvalSymlinks(target); err == nil && !inside(root, real) {
				bad("leaves the repository (through a symbolic link)")
				continue
			}
			if fragment == "" {
				continue
			}
			switch {
			case info.IsDir():
				bad("an anchor on a directory")
			case strings.HasSuffix(target, ".md"):
				a, err := anchorsOf(target)
				if err != nil {
					bad("%v", err)
				} else if !a[fragment] {
					bad("no heading with anchor #%s in %s", fragment, filepath.Base(target))
				}
			case !lineAnchor.MatchString(fragment):
				bad("an anchor on a file that is not Markdown (only #L12 or #L12-L20)")
			}
		}
	}
	return problems
}

var (
	scheme     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	lineAnchor = regexp.MustCompile(`^L\d+(-L\d+)?$`)
)

// isExternal: a URL with a scheme (https:, mailto:, …), or protocol-relative.
func isExternal(dest string) bool {
	return scheme.MatchString(dest) || strings.HasPrefix(dest, "//")
}

// inside reports whether path is root or below it.
func inside(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

var (
	fence     = regexp.MustCompile("^ {0,3}(```+|~~~+)")
	refDef    = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	atx       = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	setext    = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	notPara   = regexp.MustCompile(`^ {0,3}([-*+][ \t]|\d+[.)][ \t]|>|\||#)`)
	htmlTag   = regexp.MustCompile(`<[^>]*>`)
	htmlID    = regexp.MustCompile(`<a\s[^>]*\b(?:id|name)="([^"]+)"`)
	inlineURL = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)|\[([^\]]*)\]\[[^\]]*\]`)
)

// blocks splits text into paragraphs outside fenced code: each is its lines
// joined, with the number of its first line. Code spans may span lines
// within a paragraph, so links are looked for per paragraph.
func blocks(text string) (paras []link, fencedLines map[int]bool) {
	fencedLines = map[int]bool{}
	var open string // the fence that opened the current code block
	var cur []string
	start := 0
	flush := func() {
		if len(cur) > 0 {
			paras = append(paras, link{dest: strings.Join(cur, "\n"), line: start})
		}
		cur = nil
	}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		if open != "" {
			fencedLines[n] = true
			if m := fence.FindStringSubmatch(line); m != nil && m[1][0] == open[0] && len(m[1]) >= len(open) && strings.TrimSpace(line[strings.Index(line, m[1])+len(m[1]):]) == "" {
				open = ""
			}
			continue
		}
		if m := fence.FindStringSubmatch(line); m != nil {
			flush()
			fencedLines[n] = true
			open = m[1]
			continue
		}
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if len(cur) == 0 {
			start = n
		}
		cur = append(cur, line)
	}
	flush()
	return paras, fencedLines
}

// blankCodeSpans replaces every code span (backtick runs of equal length)
// with spaces, newlines kept, so what is inside is not read as a link.
func blankCodeSpans(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		j := i
		for j < len(b) && b[j] == '`' {
			j++
		}
		run := j - i
		end := -1
		for k := j; k < len(b); {
			if b[k] != '`' {
				k++
				continue
			}
			m := k
			for m < len(b) && b[m] == '`' {
				m++
			}
			if m-k == run {
				end = m
				break
			}
			k = m
		}
		if end < 0 {
			i = j // an unmatched run is literal text
			continue
		}
		for k := i; k < end; k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
		i = end
	}
	return string(b)
}

// links returns the destinations of inline links, images and reference
// definitions outside code.
func links(text string) []link {
	paras, _ := blocks(text)
	var out []link
	for _, p := range paras {
		s := blankCodeSpans(p.dest)
		lineAt := func(off int) int { return p.line + strings.Count(s[:off], "\n") }
		for i, line := range strings.Split(s, "\n") {
			if m := refDef.FindStringSubmatch(line); m != nil {
				out = append(out, link{dest: strings.Trim(m[1], "<>"), line: p.line + i})
			}
		}
		for i := 0; i+1 < len(s); i++ {
			if s[i] != ']' || s[i+1] != '(' || !opensAt(s, i) {
				continue
			}
			if dest, ok := destination(s[i+2:]); ok {
				out = append(out, link{dest: dest, line: lineAt(i)})
			}
		}
	}
	return out
}

// opensAt reports whether the ']' at s[i] closes a '[' before it.
func opensAt(s string, i int) bool {
	depth := 0
	for j := i - 1; j >= 0; j-- {
		switch s[j] {
		case ']':
			depth++
		case '[':
			if depth == 0 {
				return j == 0 || s[j-1] != '\\'
			}
			depth--
		}
	}
	return false
}

// destination reads a link destination after "](": <…>, or up to
// whitespace or the ')' that balances.
func destination(s string) (string, bool) {
	s = strings.TrimLeft(s, " \t\n")
	if strings.HasPrefix(s, "<") {
		end := strings.IndexAny(s, ">\n")
		if end < 0 || s[end] != '>' {
			return "", false
		}
		return s[1:end], true
	}
	depth := 0
	for i, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')':
			if depth == 0 {
				return s[:i], i > 0
			}
			depth--
		case unicode.IsSpace(r):
			return s[:i], i > 0
		}
	}
	return "", false
}

// anchors returns the anchors of a Markdown document: its headings' slugs
// (repeated ones suffixed -1, -2, …) and explicit <a id> / <a name>.
func anchors(text string) map[string]bool {
	_, fenced := blocks(text)
	seen := map[string]bool{}
	add := func(heading string) {
		s := slug(headingText(heading))
		if seen[s] {
			for n := 1; ; n++ {
				if c := fmt.Sprintf("%s-%d", s, n); !seen[c] {
					s = c
					break
				}
			}
		}
		seen[s] = true
	}
	var para []string // the paragraph a setext underline would make a heading
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		if fenced[n] {
			para = nil
			continue
		}
		for _, m := range htmlID.FindAllStringSubmatch(blankCodeSpans(line), -1) {
			seen[m[1]] = true
		}
		if m := atx.FindStringSubmatch(line); m != nil {
			add(m[2])
			para = nil
			continue
		}
		if setext.MatchString(line) && len(para) > 0 {
			add(strings.Join(para, " "))
			para = nil
			continue
		}
		if strings.TrimSpace(line) == "" || (len(para) == 0 && notPara.MatchString(line)) {
			para = nil
			continue
		}
		para = append(para, strings.TrimSpace(line))
	}
	return seen
}

// headingText is the text GitHub renders for a heading's Markdown: links
// and images by their text, HTML tags dropped, entities decoded.
func headingText(md string) string {
	md = inlineURL.ReplaceAllString(md, "$1$2")
	md = htmlTag.ReplaceAllString(md, "")
	return html.UnescapeString(md)
}

// slug is GitHub's anchor for a heading's text: lower case; letters,
// numbers, marks, '-' and '_' kept, other characters dropped; each space a
// '-'.
func slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
