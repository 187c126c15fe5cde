package metrics

import (
	"context"
	"time"

	"github.com/crewlet/hub/hub"
	"github.com/prometheus/client_golang/prometheus"
)

// scraped reads what a node is now, at each scrape: its servers' states,
// its open sessions, its log and its projection. Nothing of it is kept
// between scrapes.
type scraped struct {
	src Sources
}

// progressBound is how long a scrape waits for the log to say where it
// ends; a log that does not answer in time is left out of that scrape.
const progressBound = 2 * time.Second

var (
	serverStateDesc = prometheus.NewDesc("crewlet_mcp_server_state",
		"1 for the state each configured MCP server's row reads (running, partly_failing, failing, waiting_for_credentials, not_started, not_reported), 0 for the others.",
		[]string{"server", "state"}, nil)
	serverToolsDesc = prometheus.NewDesc("crewlet_mcp_server_tools",
		"Tools the MCP server's instances listed (the most any one did).", []string{"server"}, nil)
	sessionsDesc = prometheus.NewDesc("crewlet_operator_sessions",
		"Open operator MCP sessions (2025 revisions; 2026-07-28 clients hold none).", nil, nil)
	logDesc = prometheus.NewDesc("crewlet_log_position",
		"Position of the newest entry of the durable operation log.", nil, nil)
	projectedDesc = prometheus.NewDesc("crewlet_projection_position",
		"Last log position this node's projection has applied.", nil, nil)
	lagDesc = prometheus.NewDesc("crewlet_projection_lag_entries",
		"Log entries this node's projection has not applied yet: what a read here does not see.", nil, nil)
)

func (s *scraped) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{serverStateDesc, serverToolsDesc, sessionsDesc, logDesc, projectedDesc, lagDesc} {
		ch <- d
	}
}

func (s *scraped) Collect(ch chan<- prometheus.Metric) {
	if s.src.Servers != nil {
		for _, row := range s.src.Servers() {
			for _, state := range hub.ServerStateNames {
				v := 0.0
				if state == row.State {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(serverStateDesc, prometheus.GaugeValue, v, row.Server, StateLabel(state))
			}
			ch <- prometheus.MustNewConstMetric(serverToolsDesc, prometheus.GaugeValue, float64(row.Tools), row.Server)
		}
	}
	if s.src.Sessions != nil {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(s.src.Sessions()))
	}
	if s.src.Progress != nil {
		ctx, cancel := context.WithTimeout(context.Background(), progressBound)
		defer cancel()
		logged, projected, err := s.src.Progress(ctx)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(logDesc, err)
			return
		}
		ch <- prometheus.MustNewConstMetric(logDesc, prometheus.GaugeValue, float64(logged))
		ch <- prometheus.MustNewConstMetric(projectedDesc, prometheus.GaugeValue, float64(projected))
		lag := 0.0
		if logged > projected {
			lag = float64(logged - projected)
		}
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, lag)
	}
}
