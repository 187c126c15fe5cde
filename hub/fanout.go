package hub

import (
	"log/slog"

	"github.com/sourcegraph/conc/panics"
	"github.com/sourcegraph/conc/pool"
)

// maxFanOut bounds how many branches of one fan-out run at once: stopping
// children, refiling catalogues and listing tools are mostly waiting, but a
// company of many servers must not start as many goroutines at once.
const maxFanOut = 16

// fanOut runs every task on an owned pool and returns when all have ended,
// so no goroutine it starts outlives the call. A task that panics is
// caught and logged with its stack, naming what the fan-out was doing; the
// other tasks still run, and the hub carries on without that branch.
func fanOut(log *slog.Logger, what string, tasks ...func()) {
	if len(tasks) == 0 {
		return
	}
	p := pool.New().WithMaxGoroutines(min(len(tasks), maxFanOut))
	for _, task := range tasks {
		p.Go(func() {
			var pc panics.Catcher
			pc.Try(task)
			if r := pc.Recovered(); r != nil {
				log.Error("fan_out_panic", "what", what, "panic", r.String())
			}
		})
	}
	p.Wait()
}
