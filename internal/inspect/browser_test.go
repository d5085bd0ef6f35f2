package inspect

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/foldstream/foldstream/internal/fold"
)

// chromium finds Debian's chromium (or another Chrome); without one the
// browser test skips, unless CI is set: there it must run (.ci/run
// installs chromium when it is missing).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH and CI is set: install it (apt-get install -y chromium; .ci/run does)")
	}
	t.Skip("no chromium on PATH: the inspector's browser test needs it (apt-get install -y chromium)")
	return ""
}

// browser starts a headless chromium driven by chromedp for the test.
func browser(t *testing.T, exe string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // root in containers; the page under test is our own
		chromedp.WindowSize(1440, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(cancelB)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelT)
	return ctx
}

// TestBrowserTimeline opens a real session, published by the demo bot to a
// real processor, in headless chromium and checks what an operator must
// see: the folds, a summary diff, the rejected event, a what-if refold's
// result beside the real one, and a live update.
//
// FOLDSTREAM_SCREENSHOTS=<dir> also saves the page as PNGs there (the
// ones in docs/ are made this way).
func TestBrowserTimeline(t *testing.T) {
	exe := chromium(t)
	r := newRig(t, TextAllow)
	// The browser starts after the rig so that it stops before it (the
	// test's cleanups run last first): its open live stream must not hold
	// up the HTTP server's close.
	ctx := browser(t, exe)
	const session = "game-night"
	r.conversation(session, 61)
	r.reject(session)

	err := chromedp.Do(ctx,
		chromedp.Navigate(r.http.URL+"/#s="+session),
		chromedp.WaitVisible(chromedp.CSS(`li.rejected`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	boundaries := evalInt(t, ctx, `document.querySelectorAll(".fold-boundary").length`)
	summaries := evalInt(t, ctx, `document.querySelectorAll("li.summary").length`)
	ins := evalInt(t, ctx, `document.querySelectorAll("li.summary .diff ins").length`)
	dels := evalInt(t, ctx, `document.querySelectorAll("li.summary .diff del").length`)
	rejected := text(t, ctx, `li.rejected .x`)
	// Three folds of ten turns: boundaries before turns 0, 10 and 20, and
	// the cursor before turn 30, where the verbatim window starts.
	if boundaries != 4 {
		t.Errorf("fold boundaries: got %d, want 4", boundaries)
	}
	if summaries != 3 {
		t.Errorf("summary entries: got %d, want 3", summaries)
	}
	if ins == 0 || dels == 0 {
		t.Errorf("summary diffs: %d insertions, %d deletions shown, want both", ins, dels)
	}
	if !strings.Contains(rejected, "missing_field") || !strings.Contains(rejected, "speaker") {
		t.Errorf("rejected entry: got %q, want its code missing_field and field speaker", rejected)
	}
	shoot(t, ctx, "inspector-timeline.png", `li.summary ~ li.summary`) // v2, with its diff

	// Memories read as facts, not JSON: speaker, text, when, and the
	// earlier fact a correction replaces.
	if facts := evalInt(t, ctx, `document.querySelectorAll("li.memory li.mem").length`); facts == 0 {
		t.Fatalf("memory events: no fact shown as an item (li.memory li.mem); the entries read %q", text(t, ctx, `li.memory`))
	}
	fact := text(t, ctx, `li.memory li.mem`)
	correction := text(t, ctx, `li.memory li.mem .supersedes`)
	if strings.Contains(fact, "{") || !regexp.MustCompile(`^\S+: .+ \(said \d{4}-\d\d-\d\d \d\d:\d\d UTC, turn \S+\)$`).MatchString(fact) {
		t.Errorf("memory facts: the first reads %q, want \"<speaker>: <text> (said <when>, turn <id>)\"", fact)
	}
	if !strings.HasPrefix(correction, "replaces: ") || len(correction) < len("replaces: ")+10 || strings.Contains(correction, "replaces: memory ") {
		t.Errorf("a correcting fact shows %q, want the text of the fact it replaces", correction)
	}

	// Context: the service's packed context for a query, within a budget.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`button[data-tab="context"]`)),
		chromedp.SetValue(chromedp.CSS(`#ctx-form input[name="query"]`), "grill"),
		chromedp.SetValue(chromedp.CSS(`#ctx-form input[name="budget_chars"]`), "3000"),
		chromedp.Click(chromedp.CSS(`#ctx-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#ctx-out pre.prompt`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	// With a query the summary competes with the matching turns for the
	// budget, so the page must show the match, not necessarily the summary.
	if prompt := text(t, ctx, `#ctx-out pre.prompt`); !strings.Contains(prompt, "grill") || len([]rune(prompt)) > 3000 {
		t.Errorf("context: got %d chars starting %.40q, want the query's match (grill) within 3000 chars", len([]rune(prompt)), prompt)
	}

	// What-if: a shorter window and smaller batches fold more.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`button[data-tab="whatif"]`)),
		chromedp.SetValue(chromedp.CSS(`#wi-form input[name="recent_window"]`), "20"),
		chromedp.SetValue(chromedp.CSS(`#wi-form input[name="batch_size"]`), "5"),
		chromedp.Click(chromedp.CSS(`#wi-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#whatif-result .sides`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	realSide := text(t, ctx, `#whatif-result .side:nth-child(1) > .meta`)
	whatIf := text(t, ctx, `#whatif-result .side:nth-child(2) > .meta`)
	if !strings.HasPrefix(realSide, "3 summary versions") || !strings.Contains(realSide, "cursor 30") {
		t.Errorf("real side: got %q, want 3 versions, cursor 30", realSide)
	}
	if !strings.HasPrefix(whatIf, "8 summary versions") || !strings.Contains(whatIf, "cursor 40") {
		t.Errorf("what-if side: got %q, want 8 versions, cursor 40", whatIf)
	}
	shoot(t, ctx, "inspector-whatif.png", "")
	// Its modes are the registered ones (a mode is one file).
	modes, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#wi-form select[name="mode"] option')].slice(1).map(o => o.value).join(",")`))
	if err != nil || modes != strings.Join(fold.ModeNames(), ",") {
		t.Errorf("what-if modes %q (%v), want %v", modes, err, fold.ModeNames())
	}

	// Live: ten more turns make a fourth fold, which the open page shows
	// without a reload.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`button[data-tab="timeline"]`))); err != nil {
		t.Fatal(err)
	}
	r.moreTurns(session, 10)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll("li.summary").length >= 4`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("live update: the fourth summary did not appear: %v", err)
	}
	if got := evalInt(t, ctx, `document.querySelectorAll("li.summary").length`); got != 4 {
		t.Errorf("after ten more turns the page shows %d summaries, want 4", got)
	}
}

func evalInt(t *testing.T, ctx context.Context, expr string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return n
}

func text(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
	if err != nil {
		t.Fatalf("text of %s: %v", css, err)
	}
	return s
}

// shrink re-encodes a screenshot with a palette of its 256 most frequent
// colours: a page of text on flat backgrounds loses nothing visible, and
// the PNG in docs/ gets about three times smaller.
func shrink(t *testing.T, data []byte) []byte {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[color.RGBA]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			counts[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	cols := make([]color.RGBA, 0, len(counts))
	for c := range counts {
		cols = append(cols, c)
	}
	sort.Slice(cols, func(i, j int) bool {
		if counts[cols[i]] != counts[cols[j]] {
			return counts[cols[i]] > counts[cols[j]]
		}
		return fmt.Sprint(cols[i]) < fmt.Sprint(cols[j])
	})
	pal := make(color.Palette, 0, 256)
	for _, c := range cols[:min(256, len(cols))] {
		pal = append(pal, c)
	}
	out := image.NewPaletted(b, pal)
	draw.Draw(out, b, img, b.Min, draw.Src)
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, out); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// shoot saves a screenshot when FOLDSTREAM_SCREENSHOTS names a directory.
// scrollTo, if set, is a CSS selector to scroll into view first.
func shoot(t *testing.T, ctx context.Context, name, scrollTo string) {
	t.Helper()
	dir := os.Getenv("FOLDSTREAM_SCREENSHOTS")
	if dir == "" {
		return
	}
	if scrollTo != "" {
		if err := chromedp.Do(ctx, chromedp.ScrollIntoView(chromedp.CSS(scrollTo))); err != nil {
			t.Fatal(err)
		}
	}
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	shot = shrink(t, shot)
	if err := os.WriteFile(filepath.Join(dir, name), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", filepath.Join(dir, name), len(shot))
}
