package agent

import (
	"strings"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
)

// OUT-2 (learning.summarize_episodes): with the key on, a turn's similar
// prior work is one summary of the recalled turns by the seat's auxiliary
// model, labelled with the model, instead of a bullet per turn. The
// summary reads a recalled ask past about 11 KB condensed (labelled, by
// the same model) and an account under it whole, though past the 600
// bytes a bullet shows; where the summary's call fails, the turn is shown
// the bullets instead.
func TestEpisodeSummary(t *testing.T) {
	for _, fails := range []bool{false, true} {
		longAsk := "The invoice export to the accounting system times out for our largest customers. " +
			strings.Repeat("Customer Northwind has 48,000 invoices this quarter and the export stops after ten minutes with a gateway timeout. ", 110)
		midAccount := "Raised the invoice export timeout to five minutes and told billing. " +
			strings.Repeat("The export now pages through invoices 5,000 at a time, and each page commits on its own. ", 25)
		if len(longAsk) <= summaryTextBytes || len(midAccount) <= recallBytes || len(midAccount) >= summaryTextBytes {
			t.Fatalf("the texts are %d and %d bytes", len(longAsk), len(midAccount))
		}
		const (
			shortAsk     = "Northwind's invoice export (48,000 invoices) times out after ten minutes."
			shortAccount = "Raised the export timeout; it now pages 5,000 invoices at a time."
			summary      = "Last time the Northwind export timed out, you raised the timeout and paged the export."
		)
		turns := bySubject(map[string][]modeltest.Reply{
			"CX-1": {comment("CX-1"), {Text: midAccount}},
			"CX-2": {comment("CX-2"), done},
		})
		h, _ := newBuiltinHarness(t, func(c modeltest.Conversation) modeltest.Reply {
			switch {
			case c.System == summarySystem && fails:
				return modeltest.Reply{Status: 500, Message: "the auxiliary model is down"}
			case c.System == summarySystem:
				return modeltest.Reply{Text: summary}
			case c.System == condenseSystem && strings.Contains(c.Messages[0].Text, "Customer Northwind"):
				return modeltest.Reply{Text: shortAsk}
			case c.System == condenseSystem:
				return modeltest.Reply{Text: shortAccount}
			}
			return turns(c)
		}, map[string]string{"CX-1": longAsk, "CX-2": "The invoice export is timing out again for Northwind."}, func(o *Options) {
			seat := o.Seat
			o.Seat = func(s string) (SeatSpec, bool, error) {
				spec, ok, err := seat(s)
				spec.SummarizeEpisodes = true
				return spec, ok, err
			}
		})
		h.turnFor("alan", "CX-1")
		h.turnFor("alan", "CX-2")

		var opening, asked string
		for _, c := range h.model.Requests() {
			if wokenAbout(c, "alan", "CX-2") && opening == "" {
				opening = c.Messages[0].Text
			}
			if c.System == summarySystem {
				asked = c.Messages[0].Text
			}
		}
		_, prior, _ := strings.Cut(opening, "## Similar prior work")
		if !strings.Contains(asked, shortAsk) || !strings.Contains(asked, "condensed by "+auxModel) ||
			strings.Contains(asked, "Customer Northwind has") || !strings.Contains(asked, midAccount) {
			t.Errorf("the summary read:\n%.2000s", asked)
		}
		if fails {
			if !strings.Contains(prior, "What woke you") || strings.Contains(prior, "A summary by") {
				t.Errorf("the summary failed, and similar prior work reads:\n%s", prior)
			}
			continue
		}
		if !strings.Contains(prior, "A summary by "+auxModel) || !strings.Contains(prior, summary) || strings.Contains(prior, "What woke you") {
			t.Errorf("similar prior work:\n%s", prior)
		}
	}
}
