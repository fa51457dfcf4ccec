// Package doclinks checks the repository's Markdown as a reader follows it
// (its test; the package has no other code). It reads README.md,
// CHANGELOG.md, BENCHMARKS.md and every .md file under docs/, deploy/ and
// examples/, and for every link that is not external (http, https, mailto
// and any other URL scheme are not fetched) it checks that:
//
//   - the path resolves to a file or directory that exists;
//   - the path stays inside the repository (the module root, where go.mod
//     is): a link to ../shared/… works on one machine and nowhere else;
//   - an anchor, in-page (#guarantees) or on another Markdown file
//     (docs/guarantees.md#what-a-2xx-survives), names a heading of the target, by
//     GitHub's slug rules: lower case, punctuation dropped except '-' and
//     '_', each space a '-', and a repeated heading's slug suffixed -1, -2, ….
//
// Links inside fenced code blocks and code spans are not links and are
// skipped. Reference definitions ([name]: path) are checked like inline
// links.
package doclinks
