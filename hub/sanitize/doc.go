// Package sanitize decides what a tool result becomes before the hub hands it
// to a caller (requirement OUT-1).
//
// A tool server is untrusted with respect to what it prints: its output may
// carry terminal escape sequences that would repaint or hide text on a
// caller's terminal, credentials it read from its environment, or raw bytes
// that a careless server put in a text field. A [Sanitizer] applies three
// rules to every piece of text in a result:
//
//   - Control characters are stripped: C0 controls other than \n, \r and \t,
//     DEL, and C1 controls. ANSI escape sequences (CSI, OSC and the other
//     ECMA-48 string commands) are removed whole, so no "[31m" residue is left.
//     All other Unicode is kept as it is.
//   - Secrets are redacted: the exact values registered with [New] or
//     [Sanitizer.SetSecrets], and common credential shapes (bearer tokens,
//     Authorization headers, cloud and SaaS API keys, JWTs, PEM private keys,
//     password=/token= style pairs). Each is replaced by [Redacted], keeping
//     the text around it.
//   - Binary posing as text is rejected, never repaired: a text field holding
//     invalid UTF-8 or a NUL byte fails the whole result with an error whose
//     message is a sentence a model can read. Content the protocol types as
//     binary (image, audio, blob resources) passes untouched.
//
// [Sanitizer.Text] applies the rules to one string; [Sanitizer.Result] to
// every text field of a tool result, including structured content of any
// JSON shape and _meta.
//
// Nothing is ever truncated: a result of any size comes out whole, shorter
// only by what was stripped and differing only where something was redacted.
// The common case, text that needs no change, is returned without copying.
//
// A Sanitizer is safe for concurrent use; its secret set can be replaced
// while other goroutines are sanitising.
package sanitize
