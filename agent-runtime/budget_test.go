package agent

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
)

func TestWindowStart(t *testing.T) {
	at := time.Date(2026, 12, 3, 17, 45, 12, 0, time.UTC) // a Thursday
	for period, want := range map[string]time.Time{
		"hour":  time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC),
		"day":   time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC),
		"week":  time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		"month": time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got := WindowStart(period, at); !got.Equal(want) {
			t.Errorf("%s: %v, want %v", period, got, want)
		}
	}
	if got := WindowStart("week", time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)); got.Day() != 30 {
		t.Errorf("a Monday's week starts on %v", got)
	}
}

// REF-2 budget_exhausted: a call that would pass a seat's or the
// company's ceiling is refused before anything is sent, naming the window,
// when it turns over and the line to raise; spending is counted per seat
// and for the company; a new window starts empty; seats calling at once
// never spend past a ceiling together.
func TestBudget(t *testing.T) {
	now := time.Date(2026, 12, 3, 17, 45, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ceilings := []Ceiling{{"company", "day", 1000}, {"seat", "hour", 400}}
	b := NewBudget(func() []Ceiling { return ceilings }, clock)

	settle, ref := b.Reserve("alan", 100)
	if ref != nil {
		t.Fatal(ref)
	}
	settle(Usage{Input: 250, Output: 50})
	settle(Usage{Input: 1000}) // a second settle is ignored
	if b.Spent("alan", "hour", now) != 300 || b.Spent("", "day", now) != 300 {
		t.Fatalf("spent %d / %d", b.Spent("alan", "hour", now), b.Spent("", "day", now))
	}
	_, ref = b.Reserve("alan", 150)
	if ref == nil || !errors.Is(ref, authority.ErrBudgetExhausted) {
		t.Fatalf("past the seat's hour: %v", ref)
	}
	for _, want := range []string{"This seat's token budget", "hour window", "300 of its 400", "about 150", "2026-12-03 18:00 UTC", "budget.seat.hour"} {
		if !strings.Contains(ref.Sentence, want) {
			t.Errorf("sentence lacks %q: %s", want, ref.Sentence)
		}
	}
	// Another seat has its own hour, but the company's day is shared.
	b.Load("grace", now.Add(-time.Hour), 600)
	_, ref = b.Reserve("grace", 150)
	if ref == nil || !strings.Contains(ref.Sentence, "The company's token budget") || !strings.Contains(ref.Sentence, "budget.company.day") {
		t.Fatalf("past the company's day: %v", ref)
	}
	settle, ref = b.Reserve("grace", 50)
	if ref != nil {
		t.Fatal(ref)
	}
	settle(Usage{}) // a failed call spends nothing
	if b.Spent("", "day", now) != 900 {
		t.Fatalf("a failed call's hold was kept: %d", b.Spent("", "day", now))
	}
	// The next day starts empty.
	now = now.Add(24 * time.Hour)
	if _, ref := b.Reserve("grace", 350); ref != nil {
		t.Fatalf("a new window: %v", ref)
	}

	// Twenty seats at once, each asking for 100 of a company's 1,000:
	// exactly ten get through.
	b = NewBudget(func() []Ceiling { return []Ceiling{{"company", "day", 1000}} }, clock)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for i := range 20 {
		wg.Go(func() {
			if _, ref := b.Reserve(string(rune('a'+i)), 100); ref == nil {
				mu.Lock()
				granted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if granted != 10 {
		t.Fatalf("%d of 20 calls got room under a ceiling of ten", granted)
	}
}
