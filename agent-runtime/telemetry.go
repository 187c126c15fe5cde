package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
)

// Observer is told what a runtime's turns and model calls come to, for a
// node's metrics. The runtime never imports the metrics package: the node
// hands it one (hub/metrics implements it). Its methods are called on a
// turn's own goroutine, so they must be quick and never block.
type Observer interface {
	// TurnEnded is told once per turn that ended (one cut short by the
	// seat being let go is not over, and is told when its re-run ends).
	TurnEnded(outcome string, took time.Duration)
	// ModelCalled is told once per model call sent: the provider and
	// model as the company file names them, its outcome (a ModelCall*
	// value), how long it took and the tokens it spent.
	ModelCalled(provider, model, outcome string, took time.Duration, input, output int64)
}

// Model call outcomes, a closed set so a metric labelled by them stays
// bounded.
const (
	// ModelCallOK is a call the model answered.
	ModelCallOK = "ok"
	// ModelCallUnreachable is a call that never reached the endpoint: the
	// connection was refused, the host does not resolve, TLS failed.
	ModelCallUnreachable = "unreachable"
	// ModelCallTimeout is a call the endpoint did not answer in time.
	ModelCallTimeout = "timeout"
	// ModelCallRejected is a call the endpoint answered with an HTTP
	// error status (a wrong key, an unknown model, a rate limit).
	ModelCallRejected = "rejected"
	// ModelCallFailed is any other failure (an answer that could not be
	// read).
	ModelCallFailed = "failed"
	// ModelCallCut is a call cut short because its turn was (the seat let
	// go, the node stopping).
	ModelCallCut = "cut"
)

type noObserver struct{}

func (noObserver) TurnEnded(string, time.Duration)                                 {}
func (noObserver) ModelCalled(string, string, string, time.Duration, int64, int64) {}

// modelFailure classes a failed model call and says, as the reason a turn
// ended, which endpoint failed, how, and what would mend it: the sentence
// is read on the item's activity by whoever woke the seat, who may never
// open the node's log. Everything in it is the hub's own words, save a
// provider's short error message, quoted as the provider's: the provider
// is the company's own configured endpoint, which already writes every
// word the seat says.
func modelFailure(ctx context.Context, spec ModelSpec, timeout time.Duration, err error) (outcome, reason string) {
	endpoint := fmt.Sprintf("The model endpoint %s (provider %q, model %q)", redactURL(spec.BaseURL), spec.Provider, spec.Model)
	fix := fmt.Sprintf("Start the model server there, or set provider %q's base_url in the company file to where it runs.", spec.Provider)
	var oe *openai.Error
	var ae *anthropic.Error
	var ps *providerStatus
	var dns *net.DNSError
	var op *net.OpError
	var ue *url.Error
	status, said := 0, ""
	switch {
	case errors.As(err, &oe):
		status, said = oe.StatusCode, oe.Message
	case errors.As(err, &ae):
		status, said = ae.StatusCode, ae.Message
	case errors.As(err, &ps):
		status, said = ps.status, ps.said
	}
	if spec.APIKey != "" {
		said = strings.ReplaceAll(said, spec.APIKey, "[REDACTED]")
	}
	switch {
	case ctx.Err() != nil:
		return ModelCallCut, "The turn was cut short while its model answered."
	case status != 0:
		s := fmt.Sprintf("%s answered HTTP %d", endpoint, status)
		if said, left := providerWords(said); said != "" {
			s += fmt.Sprintf(", saying %q", said)
			if left > 0 {
				s += fmt.Sprintf(" [the provider's message runs %d bytes further, left out here]", left)
			}
		}
		return ModelCallRejected, s + ". " + statusAdvice(spec, status)
	case errors.Is(err, context.DeadlineExceeded):
		return ModelCallTimeout, fmt.Sprintf("%s did not answer within %s. Check that the model server is up and not overloaded, or choose a smaller model.", endpoint, timeout)
	case errors.Is(err, syscall.ECONNREFUSED):
		return ModelCallUnreachable, endpoint + " refused the connection: nothing is listening there. " + fix
	case errors.As(err, &dns):
		return ModelCallUnreachable, fmt.Sprintf("%s could not be reached: the host name %q does not resolve. %s", endpoint, dns.Name, fix)
	case errors.As(err, &op):
		return ModelCallUnreachable, fmt.Sprintf("%s could not be reached: %v. %s", endpoint, op.Err, fix)
	case errors.As(err, &ue):
		return ModelCallUnreachable, fmt.Sprintf("%s could not be reached: %v. %s", endpoint, ue.Err, fix)
	}
	return ModelCallFailed, fmt.Sprintf("%s could not answer: %v.", endpoint, scrubKey(err, spec.APIKey))
}

// redactURL is a base URL fit to show anyone: a password in it is not.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// providerStatus is an HTTP error status a provider answered a call the
// hub did not make through a vendor's client (a coding CLI's, through a
// box's model gateway), and what the provider said with it.
type providerStatus struct {
	status int
	said   string
}

func (e *providerStatus) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.said) }

// modelError is a failed model call as a turn ends with it: its reason
// in the hub's words, the client's error beneath.
type modelError struct {
	reason string
	err    error
}

func (e *modelError) Error() string { return e.reason }
func (e *modelError) Unwrap() error { return e.err }

// modelCalled tells obs of one model call, started at start and made
// under ctx with a bound of timeout, and answers the error a failed one
// ends with.
func modelCalled(obs Observer, ctx context.Context, spec ModelSpec, timeout time.Duration, start time.Time, rep Reply, err error) error {
	took := time.Since(start)
	if err == nil {
		obs.ModelCalled(spec.Provider, spec.Model, ModelCallOK, took, rep.Usage.Input, rep.Usage.Output)
		return nil
	}
	outcome, reason := modelFailure(ctx, spec, timeout, err)
	obs.ModelCalled(spec.Provider, spec.Model, outcome, took, 0, 0)
	return &modelError{reason: reason, err: err}
}

// statusAdvice says what mends a call an endpoint refused with status.
func statusAdvice(spec ModelSpec, status int) string {
	switch {
	case status == 401 || status == 403:
		return fmt.Sprintf("Check provider %q's api_key: the endpoint does not accept it.", spec.Provider)
	case status == 404:
		return fmt.Sprintf("Check the model name %q (the server must have it, e.g. pulled into Ollama) and provider %q's base_url (an OpenAI-compatible server's ends in /v1).", spec.Model, spec.Provider)
	case status == 429:
		return "The provider is limiting requests or the account's quota is spent: wait, or raise the limit with the provider."
	case status >= 500:
		return "The model server failed on its side; its own log says why."
	}
	return "The endpoint refused the request; its message says why."
}

// vendorRefusalBytes bounds how much of a provider's own message a turn's
// reason quotes (OUT-3). The reason is read on the item's activity and
// kept with the turn's end on the log; a provider's message is usually a
// sentence, which is quoted whole, but an endpoint behind a proxy or a
// misbehaving server can answer with pages. Past the bound the quote ends
// on a whole word and the reason says how much was left out, so nobody
// takes its opening for the whole message.
const vendorRefusalBytes = 2 << 10

// providerWords is a provider's error message fit to quote on one line:
// control characters dropped, at most vendorRefusalBytes of it, and how
// many bytes of it were left out past that.
func providerWords(s string) (quote string, left int) {
	s = strings.Join(strings.FieldsFunc(s, unicode.IsControl), " ")
	s = strings.TrimSpace(s)
	if len(s) <= vendorRefusalBytes {
		return s, 0
	}
	cut := vendorRefusalBytes
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	// A whole word where the text has spaces to end on.
	if sp := strings.LastIndexByte(s[:cut], ' '); sp > cut/2 {
		cut = sp
	}
	return s[:cut], len(s) - cut
}

// utf8Start reports whether b begins a UTF-8 sequence.
func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
