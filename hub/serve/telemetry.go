package serve

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/hub/metrics"
	"github.com/crewlet/hub/hub/tracing"
	"github.com/crewlet/hub/servers/state"
	"github.com/sourcegraph/conc"
)

// telemetry is a node's metrics and traces, wired to the hub's observer
// seams. Metrics are always kept (a scrape reads them); traces are made
// only where OTEL_EXPORTER_OTLP_ENDPOINT names a collector.
type telemetry struct {
	metrics *metrics.Metrics
	tracing *tracing.Tracing
	// hub is the hub a scrape reads, once it is built.
	hub atomic.Pointer[hub.Hub]
}

func openTelemetry(ctx context.Context, o Options, node *state.Node) (*telemetry, error) {
	lookup := o.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	tr, err := tracing.FromEnv(ctx, lookup)
	if err != nil {
		return nil, err
	}
	t := &telemetry{tracing: tr}
	src := metrics.Sources{
		Servers: func() []hub.ServerState {
			if h := t.hub.Load(); h != nil {
				return h.ServerStates()
			}
			return nil
		},
		Sessions: func() int {
			if h := t.hub.Load(); h != nil {
				return h.OperatorSessions()
			}
			return 0
		},
	}
	if node != nil {
		src.Progress = node.Progress
	}
	t.metrics = metrics.New(src)
	return t, nil
}

// observers are the seams the hub is given: traces outermost, so the
// metrics' time includes nothing of the tracer's.
func (t *telemetry) observers() hub.Observers {
	obs := hub.Observers{Calls: t.metrics, Servers: t.metrics}
	if t.tracing.On() {
		obs.Calls = hub.CallObservers(t.tracing, t.metrics)
		obs.Hops = t.tracing
	}
	return obs
}

// reads lets scrapes read h.
func (t *telemetry) reads(h *hub.Hub) { t.hub.Store(h) }

// watch serves h with each operator request traced and counted.
func (t *telemetry) watch(h http.Handler) http.Handler {
	if t.tracing.On() {
		return hub.ObserveRequests(h, t.tracing, t.metrics)
	}
	return hub.ObserveRequests(h, t.metrics)
}

// serveMetrics serves GET /metrics alone on addr, without a token, until
// the returned server is closed; its end is said on served.
func (t *telemetry) serveMetrics(addr string, limits HTTPLimits, log *slog.Logger, wg *conc.WaitGroup, served chan<- error) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", t.metrics.Handler())
	srv, ln := newHTTPServer(mux, ln, limits, log)
	srv.Addr = ln.Addr().String()
	wg.Go(func() {
		if err := srv.Serve(ln); err != http.ErrServerClosed {
			served <- err
		}
	})
	return srv, nil
}

// close flushes the spans still queued, within a bound of its own.
func (t *telemetry) close(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.tracing.Shutdown(ctx); err != nil {
		log.Warn("traces_not_flushed", "error", err.Error())
	}
}
