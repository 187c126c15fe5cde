package config

import "sort"

// Budget sets how many tokens agent turns may spend, per window of time:
// company ceilings count every seat's spending together, seat ceilings
// each seat's own. A model call that would pass one is refused
// budget_exhausted before anything is sent (REF-2).
//
//	budget:
//	  company: {day: 2000000, hour: 400000}
//	  seat: {day: 200000}
//
// Windows are calendar windows in UTC (a week starts on Monday), so
// everybody reading the file knows when one turns over.
type Budget struct {
	Company map[string]int64 `yaml:"company"`
	Seat    map[string]int64 `yaml:"seat"`
}

// BudgetPeriods are the windows a ceiling may be set for, shortest first.
var BudgetPeriods = []string{"hour", "day", "week", "month"}

// Ceiling is one budget line: scope company or seat, its window, its
// tokens.
type Ceiling struct {
	Scope  string
	Period string
	Tokens int64
}

// Ceilings lists the budget's lines, company first, shortest window
// first.
func (b Budget) Ceilings() []Ceiling {
	var out []Ceiling
	for _, scope := range []struct {
		name string
		m    map[string]int64
	}{{"company", b.Company}, {"seat", b.Seat}} {
		for _, p := range BudgetPeriods {
			if n, ok := scope.m[p]; ok {
				out = append(out, Ceiling{Scope: scope.name, Period: p, Tokens: n})
			}
		}
	}
	return out
}

func (c *Company) checkBudget(add func(string, ...any)) {
	for _, scope := range []struct {
		name string
		m    map[string]int64
	}{{"company", c.Budget.Company}, {"seat", c.Budget.Seat}} {
		names := make([]string, 0, len(scope.m))
		for p := range scope.m {
			names = append(names, p)
		}
		sort.Strings(names)
		for _, p := range names {
			at := "budget." + scope.name + "." + p
			if !contains(BudgetPeriods, p) {
				add("%s: %q is not a window; use hour, day, week or month", at, p)
				continue
			}
			if n := scope.m[p]; n <= 0 {
				add("%s: %d tokens would refuse every model call; a ceiling is a positive number of tokens (remove the line for none)", at, n)
			}
		}
	}
}
