package state

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// DiagnosticBytes bounds the error text one entry of the log carries (a
// turn's reason for ending, on its own record and on the item it was
// about), OUT-3. The log refuses an entry past its message size (8 MiB),
// and a refused entry loses the whole record, not just the end of its
// error: the turn's end would go unrecorded. Error text is the one part of
// such an entry nobody bounds upstream, since it quotes whatever failed;
// 64 KiB holds any error a person reads whole, far inside the log's limit
// with the rest of the entry beside it.
const DiagnosticBytes = 64 << 10

// ClipDiagnostic is error text fit to travel on an entry of the log: whole
// when it is within DiagnosticBytes, else its head, where an error says
// what failed, ended on a whole line (or character, for one long line)
// and followed by a line saying how much was left out. The clipped text
// is never longer than DiagnosticBytes.
func ClipDiagnostic(s string) string {
	if len(s) <= DiagnosticBytes {
		return s
	}
	const room = 64 // the marker line
	cut := DiagnosticBytes - room
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	// A whole line, when one ends in the last quarter of the room.
	if nl := strings.LastIndexByte(s[:cut], '\n'); nl >= cut*3/4 {
		cut = nl
	}
	return fmt.Sprintf("%s\n[… %d more bytes of this error left out]", s[:cut], len(s)-cut)
}
