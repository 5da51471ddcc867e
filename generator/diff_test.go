package generator

import (
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestUnifiedDiff checks the exact output check prints for small changes.
func TestUnifiedDiff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		old, new string
		want     string
	}{
		{name: "equal", old: "a\nb\n", new: "a\nb\n", want: ""},
		{
			name: "one line changed",
			old:  "1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			new:  "1\n2\n3\n4\nfive\n6\n7\n8\n9\n",
			want: "--- old\n+++ new\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n",
		},
		{
			name: "new file",
			old:  "",
			new:  "a\nb\n",
			want: "--- old\n+++ new\n@@ -0,0 +1,2 @@\n+a\n+b\n",
		},
		{
			name: "deleted file",
			old:  "a\n",
			new:  "",
			want: "--- old\n+++ new\n@@ -1 +0,0 @@\n-a\n",
		},
		{
			name: "two hunks",
			old:  "a\n1\n2\n3\n4\n5\n6\n7\n8\nb\n",
			new:  "A\n1\n2\n3\n4\n5\n6\n7\n8\nB\n",
			want: "--- old\n+++ new\n@@ -1,4 +1,4 @@\n-a\n+A\n 1\n 2\n 3\n@@ -7,4 +7,4 @@\n 6\n 7\n 8\n-b\n+B\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := unifiedDiff("old", "new", tt.old, tt.new)
			if got != tt.want {
				t.Errorf("unifiedDiff:\n%s\nwant:\n%s", got, tt.want)
			}
			if got != "" {
				if back := applyUnified(t, tt.old, got); back != tt.new {
					t.Errorf("applying the diff gives %q, want %q", back, tt.new)
				}
			}
		})
	}
}

// TestUnifiedDiffLarge diffs two 5,000-line files, one with scattered edits
// and one with nothing in common, within a time and memory bound that a
// quadratic table (25 million cells, 200 MB) cannot meet, and checks that
// the diff turns the old file into the new one.
func TestUnifiedDiffLarge(t *testing.T) {
	const lines = 5000
	var old, edited, unrelated strings.Builder
	for i := range lines {
		fmt.Fprintf(&old, "line %d: the quick brown fox\n", i)
		switch {
		case i%97 == 0:
			fmt.Fprintf(&edited, "line %d: CHANGED\n", i)
		case i%251 == 0: // deleted
		case i%131 == 0:
			fmt.Fprintf(&edited, "line %d: the quick brown fox\ninserted after %d\n", i, i)
		default:
			fmt.Fprintf(&edited, "line %d: the quick brown fox\n", i)
		}
		fmt.Fprintf(&unrelated, "other %d\n", i)
	}
	tests := []struct {
		name string
		new  string
	}{
		{"scattered edits", edited.String()},
		{"nothing in common", unrelated.String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Not parallel: the memory measurement counts every allocation
			// of the process.
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			d := unifiedDiff("old", "new", old.String(), tt.new)
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d-line diff: %v, %.1f MB allocated, %d bytes of output", lines, elapsed, float64(allocated)/1e6, len(d))
			if elapsed > 2*time.Second {
				t.Errorf("diff took %v, want under 2s", elapsed)
			}
			if allocated > 40<<20 {
				t.Errorf("diff allocated %d MB, want under 40 MB", allocated>>20)
			}
			if back := applyUnified(t, old.String(), d); back != tt.new {
				t.Errorf("applying the diff does not give the new file")
			}
		})
	}
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$`)

// applyUnified applies a unified diff to old, independently of the diff
// library, and fails the test on a malformed diff.
func applyUnified(t *testing.T, old, diff string) string {
	t.Helper()
	src := strings.SplitAfter(old, "\n")
	if src[len(src)-1] == "" {
		src = src[:len(src)-1]
	}
	lines := strings.SplitAfter(diff, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "--- ") || !strings.HasPrefix(lines[1], "+++ ") {
		t.Fatalf("diff does not start with ---/+++ headers:\n%s", diff)
	}
	var out []string
	next := 0 // next line of src to copy
	for i := 2; i < len(lines) && lines[i] != ""; {
		m := hunkHeader.FindStringSubmatch(strings.TrimSuffix(lines[i], "\n"))
		if m == nil {
			t.Fatalf("line %d: want a hunk header, got %q", i+1, lines[i])
		}
		from, _ := strconv.Atoi(m[1])
		fromCount := 1
		if m[2] != "" {
			fromCount, _ = strconv.Atoi(m[2])
		}
		if fromCount > 0 {
			from-- // 1-based; an empty range names the line before it
		}
		if from < next {
			t.Fatalf("line %d: hunk starts at old line %d, before line %d", i+1, from+1, next+1)
		}
		out = append(out, src[next:from]...)
		next = from
		for i++; i < len(lines) && lines[i] != "" && !strings.HasPrefix(lines[i], "@@"); i++ {
			l := lines[i]
			switch l[0] {
			case ' ', '-':
				if next >= len(src) || src[next] != l[1:] {
					t.Fatalf("line %d: %q does not match old line %d", i+1, l, next+1)
				}
				if l[0] == ' ' {
					out = append(out, l[1:])
				}
				next++
			case '+':
				out = append(out, l[1:])
			default:
				t.Fatalf("line %d: unexpected diff line %q", i+1, l)
			}
		}
	}
	out = append(out, src[next:]...)
	return strings.Join(out, "")
}
