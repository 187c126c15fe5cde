package serve

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
)

// Benchmarks of the agent runtime on a whole node, with a fake model that
// answers at once, so what is measured is the hub's side of a turn:
//
//	go test ./hub/serve -run '^$' -bench TurnToolCall -benchtime 2000x
//	go test ./hub/serve -run '^$' -bench Turns20Seats -benchtime 50x
//
// (-benchtime counts tool calls in the first, rounds of twenty turns in
// the second.)

// BenchmarkTurnToolCall is the hub's overhead per tool call inside a
// turn: deciding the call, routing it as the seat, the tool itself
// (lookup_colleague, a read of the directory), sanitising its result and
// the turn's bookkeeping, as the turn timed it (tool_called, us). Turns
// of ten rounds of ten calls each run until b.N calls are made.
func BenchmarkTurnToolCall(b *testing.B) {
	const perRound, rounds = 10, 10
	calls := make([]modeltest.Call, perRound)
	for i := range calls {
		calls[i] = modeltest.Call{Name: "lookup_colleague", Args: map[string]any{"query": "ada"}}
	}
	model := modeltest.Start(b, func(c modeltest.Conversation) modeltest.Reply {
		switch {
		case c.Round() < rounds:
			return modeltest.Reply{Calls: calls}
		case c.Round() == rounds:
			return reply("comment_on_work_item", map[string]any{"key": itemOf(c), "body": "found them"})
		}
		return finished
	})
	n := startTurnNode(b, model, company, env)
	ada := n.client(env["ADA_TOKEN"])
	b.ResetTimer()
	done := 0
	for done < b.N {
		mark := n.logs.mark()
		key := call(b, ada, "create_work_item", map[string]any{"title": "Who is ada?"})["key"].(string)
		call(b, ada, "comment_on_work_item", map[string]any{"key": key, "body": "@assistant who is ada?"})
		n.turnEndedSince(mark, "assistant", key)
		done += perRound * rounds
	}
	b.StopTimer()
	var total, count int64
	for _, r := range n.logs.all(map[string]any{"msg": "tool_called", "tool": "lookup_colleague"}) {
		us, _ := r["us"].(int64)
		total += us
		count++
	}
	if count == 0 {
		b.Fatal("no tool call was timed")
	}
	b.ReportMetric(float64(total)/float64(count), "hub-µs/call")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkTurns20Seats is how many turns a node runs per second when one
// comment wakes twenty seats at once: each turn a model round that posts
// a comment on the item (a write on the log, fsynced) and one that ends
// it.
func BenchmarkTurns20Seats(b *testing.B) {
	const seats = 20
	var roles, mentions strings.Builder
	for i := 1; i <= seats; i++ {
		fmt.Fprintf(&roles, "      - {name: Seat %02d, handle: s%02d}\n", i, i)
		fmt.Fprintf(&mentions, "@s%02d ", i)
	}
	doc := strings.Replace(company, "      - {name: Assistant, handle: assistant, instructions: \"Answer on the item you were asked on.\"}\n", roles.String(), 1)
	model := modeltest.Start(b, func(c modeltest.Conversation) modeltest.Reply {
		if c.Round() == 0 {
			return reply("comment_on_work_item", map[string]any{"key": itemOf(c), "body": "here"})
		}
		return finished
	})
	n := startTurnNode(b, model, doc, env)
	ada := n.client(env["ADA_TOKEN"])
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		mark := n.logs.mark()
		key := call(b, ada, "create_work_item", map[string]any{"title": "Everybody"})["key"].(string)
		call(b, ada, "comment_on_work_item", map[string]any{"key": key, "body": mentions.String() + "please say hello"})
		for i := 1; i <= seats; i++ {
			n.turnEndedSince(mark, fmt.Sprintf("s%02d", i), key)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(seats*b.N)/elapsed.Seconds(), "turns/s")
	b.ReportMetric(float64(elapsed.Microseconds())/float64(seats*b.N), "µs/turn")
	b.ReportMetric(0, "ns/op")
}
